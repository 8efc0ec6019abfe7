"""A run killed with SIGKILL and resumed ends in the same state as one that never stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest
import torch

from found_rl.checkpoint import read_checkpoint

from .conftest import train_command

IGNORED = {"wall_s"}  # wall time differs, by nature


def assert_same(a, b, path: str = "") -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {sorted(set(a) ^ set(b))} differ"
        for key in a:
            if key not in IGNORED:
                assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), f"{path}: tensors differ"
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def final_state(run_dir):
    payload = read_checkpoint(run_dir / "checkpoints" / "checkpoint.pt")
    state = payload["training_state"]
    with np.load(run_dir / "checkpoints" / state.pop("replay_file")) as replay:
        arrays = {name: replay[name] for name in replay.files}
    return payload["policy_state"], state, arrays


@pytest.mark.timeout(900)  # three short training runs
def test_a_killed_and_resumed_run_reaches_the_state_of_an_uninterrupted_run(tmp_path, run_config, train):
    config = run_config()
    straight = train(str(config), "--run-dir", str(tmp_path / "straight"))
    assert straight.returncode == 0, straight.stderr

    # The same run with a budget it will not reach, killed as soon as it has a checkpoint.
    killed_dir = tmp_path / "killed"
    process = subprocess.Popen(
        train_command(str(config), "--run-dir", str(killed_dir), "--set", "budget.env_steps=100000"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    checkpoint = killed_dir / "checkpoints" / "checkpoint.pt"
    deadline = time.monotonic() + 240
    while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    killed_at = read_checkpoint(checkpoint)["metadata"]["env_steps"]
    assert 0 < killed_at < 300

    resumed = train("--resume", str(killed_dir), "--set", "budget.env_steps=300")
    assert resumed.returncode == 0, resumed.stderr

    policy_a, state_a, replay_a = final_state(tmp_path / "straight")
    policy_b, state_b, replay_b = final_state(killed_dir)
    assert state_a["counters"]["env_steps"] == state_b["counters"]["env_steps"] >= 300
    assert state_a["counters"]["updates"] == state_b["counters"]["updates"] > 0
    assert_same(policy_a, policy_b, "policy")
    assert_same(state_a, state_b, "training_state")  # networks, optimisers, α, counters, RNGs, sampler
    assert_same(replay_a, replay_b, "replay")
