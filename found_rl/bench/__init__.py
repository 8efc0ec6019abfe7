"""Benchmarks behind ``found-rl bench``."""
