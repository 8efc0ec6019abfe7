"""Helpers for training-run tests: a tiny run config and the real ``found-rl train`` command."""

from __future__ import annotations

import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"


def tiny_run_config(**sections) -> dict:
    """A run of a few hundred env steps on a small town: the loop's machinery, not learning."""
    config = {
        "scenario": str(DATA / "tiny_random.yaml"),
        "torch_threads": 1,
        "budget": {"env_steps": 300},
        "sampler": {"clips": 2, "horizon": 60},
        "learner": {"learning_starts": 60, "batch_size": 16, "replay_capacity": 1000, "updates_per_step": 0.25},
        "evaluation": {"enabled": False},
        "checkpoint": {"every_env_steps": 50},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values} if isinstance(values, dict) else values
    return config


def train_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "found_rl", "train", *args, "--no-progress"]

