"""Simulator backends: each advances a world and returns WorldSnapshots."""
