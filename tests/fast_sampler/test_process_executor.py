"""Subprocess executor: same data as in-process, crash recovery, hangs, bad factories, cleanup."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from fast_sampler import (
    CarlaLikeEnv,
    ClipError,
    EnvFactoryError,
    FastSampler,
    InProcessExecutor,
    PerClipResetSampler,
    ProcessExecutor,
    Rollout,
    WorkerTimeoutError,
)


def state_policy(obs: dict[str, np.ndarray]) -> np.ndarray:
    return np.tanh(obs["state"][:, :2])


def dict_env_fns(num_clips: int, episode_lengths: list[list[int]] | None = None) -> list[functools.partial]:
    return [
        functools.partial(
            CarlaLikeEnv, dict_obs=True, median_episode_steps=6.0,
            episode_lengths=episode_lengths[clip] if episode_lengths else None,
        )
        for clip in range(num_clips)
    ]


def assert_same_rows(first: Rollout, second: Rollout, clip: int, rows: slice = slice(None)) -> None:
    for key in first.obs:
        np.testing.assert_array_equal(first.obs[key][rows, clip], second.obs[key][rows, clip])
        np.testing.assert_array_equal(first.next_obs[key][rows, clip], second.next_obs[key][rows, clip])
    for name in ("actions", "rewards", "terminated", "valid", "episode_index", "step_index"):
        np.testing.assert_array_equal(getattr(first, name)[rows, clip], getattr(second, name)[rows, clip], err_msg=name)


def test_process_executor_gives_the_same_rollout_as_in_process(stepping) -> None:
    with FastSampler(InProcessExecutor(dict_env_fns(3)), state_policy, rho=0.5, seed=7) as sampler:
        expected = sampler.collect(25)
    with FastSampler(ProcessExecutor(dict_env_fns(3), timeout_s=30), state_policy, rho=0.5, seed=7) as sampler:
        got = stepping.collect(sampler, 25)
    for clip in range(3):
        assert_same_rows(expected, got, clip)
    np.testing.assert_array_equal(expected.truncated, got.truncated)


def test_killed_worker_is_restarted_and_its_clip_truncated_without_corrupting_data(stepping) -> None:
    crash_at, num_steps = 5, 20  # clip 1 is mid-episode at lock-step 5 (its first episode lasts 7)
    lengths = [[3, 5], [7, 5], [4]]
    with PerClipResetSampler(InProcessExecutor(dict_env_fns(3, lengths)), state_policy, seed=3) as sampler:
        reference = sampler.collect(num_steps)

    executor = ProcessExecutor(dict_env_fns(3, lengths), timeout_s=30)
    with PerClipResetSampler(executor, state_policy, seed=3) as sampler:
        steps = [stepping.step(sampler) for _ in range(crash_at)]
        killed_pid = executor.worker_pid(1)
        os.kill(killed_pid, signal.SIGKILL)
        steps += [stepping.step(sampler) for _ in range(num_steps - crash_at)]
        restarted_pid = executor.worker_pid(1)
    rollout = Rollout.from_steps(steps)

    assert restarted_pid != killed_pid and executor.worker_restarts == 1
    # The lost step is padding; the clip's last real transition becomes a truncation, and the
    # replacement worker starts a new episode on the next lock-step.
    assert rollout.worker_died[:, 1].tolist() == [t == crash_at for t in range(num_steps)]
    assert not rollout.valid[crash_at, 1] and rollout.clip_index[crash_at, 1] == -1
    assert rollout.truncated[crash_at - 1, 1] and not steps[crash_at - 1].truncated[1]
    assert rollout.valid[crash_at + 1 :, 1].all()
    assert rollout.episode_index[crash_at + 1, 1] == rollout.episode_index[crash_at - 1, 1] + 1
    assert rollout.step_index[crash_at + 1, 1] == 0
    # Nothing else changed: the other clips and clip 1 before the crash match the reference.
    assert_same_rows(reference, rollout, 0)
    assert_same_rows(reference, rollout, 2)
    assert_same_rows(reference, rollout, 1, slice(0, crash_at))


def test_killed_worker_under_fast_counts_as_an_ended_clip(stepping) -> None:
    fns = [functools.partial(CarlaLikeEnv, episode_lengths=[10]) for _ in range(4)]
    executor = ProcessExecutor(fns, timeout_s=30)
    with FastSampler(executor, lambda obs: np.zeros((4, 2)), rho=0.5, seed=0) as sampler:
        stepping.step(sampler)
        os.kill(executor.worker_pid(2), signal.SIGKILL)
        died = stepping.step(sampler)
        assert died.worker_died.tolist() == [False, False, True, False] and not died.valid[2]
        padded = stepping.step(sampler)  # clip 2 is continued virtually until the global reset
        assert padded.valid.tolist() == [True, True, False, True]
        rest = stepping.collect(sampler, 8)  # lock-steps 3 … 10
    # Lock-step 9 (row 6): clips 0, 1, 3 end their 10-step episodes, 4 of 4 ended -> reset.
    assert rest.terminated[6].tolist() == [True, True, False, True]
    assert not rest.valid[:7, 2].any() and rest.valid[7].all()
    assert rest.step_index[7].tolist() == [0, 0, 0, 0] and rest.episode_index[7, 2] == 1
    assert not rest.truncated.any() and sampler.stats.global_resets == 1


def test_worker_killed_between_episodes_is_replaced_transparently_at_reset() -> None:
    executor = ProcessExecutor(dict_env_fns(2), timeout_s=30)
    try:
        executor.reset({0: 0, 1: 1})
        os.kill(executor.worker_pid(0), signal.SIGKILL)
        results = executor.reset({0: 5, 1: None})
        assert sorted(results) == [0, 1] and executor.worker_restarts == 1
        assert results[0].obs["image"].shape == (3, 8, 8)
    finally:
        executor.close()


def test_hung_worker_raises_a_timeout_naming_its_clip(stepping) -> None:
    fns = [
        functools.partial(CarlaLikeEnv),
        functools.partial(CarlaLikeEnv, step_latency_s=60.0, reset_steps=(0.0, 0.0)),
    ]
    executor = ProcessExecutor(fns, timeout_s=0.5)
    try:
        executor.reset({0: 0, 1: 1})
        with pytest.raises(WorkerTimeoutError, match=r"clip 1: .*'step' within 0.5 s") as info:
            stepping.step_executor(executor, {0: np.zeros(2), 1: np.zeros(2)})
        assert info.value.clip == 1 and not executor.pending  # the failed step is not left pending
    finally:
        executor.close()


def test_env_factory_that_raises_in_a_worker_names_its_clip() -> None:
    fns = [functools.partial(CarlaLikeEnv), functools.partial(CarlaLikeEnv, obs_dim=0)]
    with pytest.raises(EnvFactoryError, match=r"clip 1: .*obs_dim"):
        ProcessExecutor(fns, timeout_s=30)


def test_workers_with_different_spaces_are_rejected() -> None:
    fns = [functools.partial(CarlaLikeEnv), functools.partial(CarlaLikeEnv, dict_obs=True)]
    with pytest.raises(ValueError, match="clip 1: observation_space"):
        ProcessExecutor(fns, timeout_s=30)


def test_close_stops_workers_and_frees_shared_memory() -> None:
    executor = ProcessExecutor(dict_env_fns(2), timeout_s=30)
    pids = [executor.worker_pid(clip) for clip in range(2)]
    shm_path = Path("/dev/shm") / executor.shared_memory_name.lstrip("/")
    executor.close()
    executor.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    if Path("/dev/shm").is_dir():
        assert not shm_path.exists()


def test_workers_end_when_their_parent_is_killed() -> None:
    """A SIGKILLed trainer must not leave its env workers behind (they hold a simulator each)."""
    import subprocess
    import sys
    import time

    script = (
        "import time, gymnasium as gym\n"
        "from fast_sampler import ProcessExecutor\n"
        "executor = ProcessExecutor([lambda: gym.make('CartPole-v1')])\n"
        "print(executor.worker_pid(0), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker_pid = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(worker_pid, signal.SIGKILL)  # our own leftover, by PID
    raise AssertionError(f"worker {worker_pid} outlived its killed parent")


def test_workers_of_a_killed_parent_exit_quietly_and_leave_no_shared_memory() -> None:
    """After ``kill -9`` of the trainer: no traceback, no leaked-shared-memory warning, no /dev/shm block."""
    import subprocess
    import sys

    script = (
        "import time, gymnasium as gym\n"
        "from fast_sampler import ProcessExecutor\n"
        "executor = ProcessExecutor([lambda: gym.make('CartPole-v1')] * 2)\n"
        "executor.reset({0: 0, 1: 1})\n"
        "print(executor.worker_pid(0), executor.worker_pid(1), executor.shared_memory_name, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    *pids, shm_name = parent.stdout.readline().split()
    os.kill(parent.pid, signal.SIGKILL)
    try:
        # stderr reaches EOF once the workers and the resource tracker (which warns of leaks) are gone.
        _, stderr = parent.communicate(timeout=30)
    finally:
        for pid in map(int, pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # our own leftovers, by PID
    assert not [pid for pid in map(int, pids) if _running(pid)]
    assert "Traceback" not in stderr and "leaked" not in stderr, stderr
    if Path("/dev/shm").is_dir():
        assert not (Path("/dev/shm") / shm_name.lstrip("/")).exists()


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (an exited worker may wait a moment as a zombie to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def _deep_inside_the_env(action: np.ndarray) -> None:
    raise KeyError("lane_id")


class _BrokenStepEnv(CarlaLikeEnv):
    """An env with a bug: its step raises from a helper."""

    def step(self, action):
        return _deep_inside_the_env(action)


@pytest.mark.parametrize("kind", ["process", "in-process"])
def test_a_step_that_raises_is_forwarded_with_the_envs_own_traceback(stepping, kind) -> None:
    import traceback

    fns = [functools.partial(_BrokenStepEnv)]
    executor = ProcessExecutor(fns, timeout_s=30) if kind == "process" else InProcessExecutor(fns)
    try:
        executor.reset({0: 0})
        with pytest.raises(ClipError, match=r"clip 0: step raised KeyError: 'lane_id'") as info:
            stepping.step_executor(executor, {0: np.zeros(2)})
    finally:
        executor.close()
    if kind == "process":  # the worker's traceback travels in the message
        assert "--- worker traceback ---" in str(info.value) and "_deep_inside_the_env" in str(info.value)
    else:  # the env's own exception is the cause, with its frames
        frames = traceback.extract_tb(info.value.__cause__.__traceback__)
        assert frames[-1].name == "_deep_inside_the_env"
