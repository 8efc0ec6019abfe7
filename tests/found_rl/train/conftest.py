"""Fixtures for training-run tests: a tiny run config and the real ``found-rl train`` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


@pytest.fixture
def run_config(tmp_path):
    """Factory: write a tiny run config (sections override) and return its path."""

    def write(name: str = "run.yaml", **sections) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(tiny_run_config(**sections)))
        return path

    return write


def train_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "found_rl", "train", *args, "--no-progress"]


@pytest.fixture
def train(tmp_path):
    """Run ``found-rl train ARGS`` to completion; returns the CompletedProcess."""

    def run(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
        env = {**os.environ, "FOUND_RL_CACHE": os.environ.get("FOUND_RL_CACHE", str(tmp_path / "cache"))}
        return subprocess.run(train_command(*args), capture_output=True, text=True, timeout=timeout, env=env)

    return run
