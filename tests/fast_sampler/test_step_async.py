"""A lock-step split into step_async() and step_wait(): same batches, overlap with workers, misuse, close."""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from fast_sampler import (
    CarlaLikeEnv,
    FastSampler,
    InProcessExecutor,
    LockstepSampler,
    PerClipResetSampler,
    ProcessExecutor,
)

EXECUTORS = {
    "in-process": InProcessExecutor,
    "process": functools.partial(ProcessExecutor, timeout_s=30),
}


def value_policy(obs: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    return np.tanh(obs["state"][:, :2]), {"values": obs["state"][:, 0] * 2.0}


def dict_env_fns(num_clips: int) -> list[functools.partial]:
    return [functools.partial(CarlaLikeEnv, dict_obs=True, median_episode_steps=6.0) for _ in range(num_clips)]


def slow_second_clip(step_latency_s: float) -> list[functools.partial]:
    """Two clips; clip 1's steps take ``step_latency_s`` (its resets none)."""
    slow = functools.partial(CarlaLikeEnv, dict_obs=True, step_latency_s=step_latency_s, reset_steps=(0.0, 0.0))
    return dict_env_fns(1) + [slow]


@pytest.mark.parametrize("kind", sorted(EXECUTORS))
def test_both_forms_give_identical_step_batches(kind: str, step_forms, assert_same_batches) -> None:
    # Random episode lengths, a horizon and rho = 0.5: padding, truncations and global resets
    # all happen within the 30 lock-steps.
    runs = []
    for form in step_forms:
        with FastSampler(EXECUTORS[kind](dict_env_fns(3)), value_policy, rho=0.5, horizon=7, seed=4) as sampler:
            runs.append([form.step(sampler) for _ in range(30)])
            assert sampler.stats.global_resets > 1 and sampler.stats.valid_transitions < 90
            assert any(batch.truncated.any() for batch in runs[-1])
    assert_same_batches(*runs)


class RecordsItsSteps(gym.Wrapper):
    """Touches ``folder/clip{clip}-step{k}`` as it finishes its k-th step (from 0): what a
    test can read while a step is pending."""

    def __init__(self, folder: Path, clip: int) -> None:
        super().__init__(CarlaLikeEnv(dict_obs=True, episode_lengths=[50]))
        self.folder, self.clip, self.steps = folder, clip, 0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        (self.folder / f"clip{self.clip}-step{self.steps}").touch()
        self.steps += 1
        return result


def recording_env_fns(folder: Path, num_clips: int) -> list[functools.partial]:
    folder.mkdir()
    return [functools.partial(RecordsItsSteps, folder, clip) for clip in range(num_clips)]


def stepped_clips(folder: Path, step: int) -> list[str]:
    return sorted(path.name for path in folder.glob(f"clip*-step{step}"))


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("kind, steps_in_background", [("in-process", False), ("process", True)])
def test_workers_step_while_the_caller_works_between_step_async_and_step_wait(
    kind: str, steps_in_background: bool, tmp_path: Path, assert_same_batches
) -> None:
    with FastSampler(InProcessExecutor(recording_env_fns(tmp_path / "reference", 3)), value_policy, seed=1) as sampler:
        reference = [sampler.step() for _ in range(4)]

    records = tmp_path / "records"
    executor = EXECUTORS[kind](recording_env_fns(records, 3))
    batches = []
    with FastSampler(executor, value_policy, seed=1) as sampler:
        for t in range(4):
            sampler.step_async()
            # The caller's own work: here, watching for the clips' records of this lock-step.
            if steps_in_background:  # worker processes step on their own, before step_wait
                assert wait_until(lambda t=t: len(stepped_clips(records, t)) == 3), stepped_clips(records, t)
            else:  # in-process clips step inside step_wait
                assert stepped_clips(records, t) == []
            batches.append(sampler.step_wait())
            assert stepped_clips(records, t) == [f"clip{clip}-step{t}" for clip in range(3)]
    assert_same_batches(reference, batches)


@pytest.mark.parametrize("kind", sorted(EXECUTORS))
def test_executor_refuses_calls_that_would_lose_a_pending_step(kind: str) -> None:
    executor = EXECUTORS[kind](dict_env_fns(2))
    try:
        executor.reset({0: 0, 1: 1})
        action = np.zeros(2, np.float32)
        with pytest.raises(RuntimeError, match=r"^step_wait: no step is pending; call step_async"):
            executor.step_wait()
        executor.step_async({0: action, 1: action})
        assert executor.pending
        with pytest.raises(RuntimeError, match=r"^step_async: a step is pending; call step_wait\(\)"):
            executor.step_async({0: action})
        with pytest.raises(RuntimeError, match=r"^step: a step is pending"):
            executor.step({0: action})
        with pytest.raises(RuntimeError, match=r"^reset: a step is pending"):
            executor.reset({0: 2})
        results = executor.step_wait()  # the step sent first is still there, whole
        assert sorted(results) == [0, 1] and not any(result.worker_died for result in results.values())
        assert not executor.pending
        with pytest.raises(RuntimeError, match=r"^step_wait: no step is pending"):
            executor.step_wait()
    finally:
        executor.close()


MISUSES_WHILE_PENDING = {
    "step_async": lambda sampler: sampler.step_async(),
    "step": lambda sampler: sampler.step(),
    "collect": lambda sampler: sampler.collect(2),
    "transitions": lambda sampler: next(sampler.transitions(1)),
    "state_dict": lambda sampler: sampler.state_dict(),
    "load_state_dict": lambda sampler: sampler.load_state_dict({"episode_index": [3, 3]}),
    "at_round_boundary": lambda sampler: sampler.at_round_boundary,
}


@pytest.mark.parametrize("misuse", sorted(MISUSES_WHILE_PENDING))
def test_sampler_refuses_calls_while_a_lock_step_is_pending(misuse: str, assert_same_batches) -> None:
    def run(misuse_while_pending: Callable[[LockstepSampler], Any] | None) -> list:
        fns = [functools.partial(CarlaLikeEnv, episode_lengths=[2, 3]) for _ in range(2)]
        with PerClipResetSampler(fns, lambda obs: obs[:, :2], seed=0) as sampler:
            batches = [sampler.step()]
            sampler.step_async()
            if misuse_while_pending is not None:
                named = "step" if misuse in ("collect", "transitions") else misuse  # they step
                with pytest.raises(RuntimeError, match=rf"^{named}: a lock-step is pending; call step_wait\(\)"):
                    misuse_while_pending(sampler)
            assert sampler.pending
            batches.append(sampler.step_wait())
            assert not sampler.pending
            return batches + [sampler.step() for _ in range(3)]

    # The refused call changed nothing: the run goes on exactly as one without it.
    assert_same_batches(run(None), run(MISUSES_WHILE_PENDING[misuse]))


def test_sampler_step_wait_without_a_pending_lock_step_is_refused() -> None:
    with FastSampler(dict_env_fns(2), value_policy, seed=0) as sampler:
        with pytest.raises(RuntimeError, match=r"^step_wait: no step is pending; call step_async\(\) first"):
            sampler.step_wait()
        sampler.step()
        with pytest.raises(RuntimeError, match=r"^step_wait: no step is pending"):
            sampler.step_wait()


@pytest.mark.parametrize("step_latency_s", [0.0, 60.0], ids=["answered", "still-stepping"])
def test_close_while_a_lock_step_is_pending_stops_workers_and_frees_shared_memory(step_latency_s: float) -> None:
    # "still-stepping": clip 1 would answer in a minute; close must not wait for it.
    executor = ProcessExecutor(slow_second_clip(step_latency_s), timeout_s=120)
    sampler = FastSampler(executor, value_policy, seed=0)
    pids = [executor.worker_pid(clip) for clip in range(2)]
    shm_path = Path("/dev/shm") / executor.shared_memory_name.lstrip("/")
    sampler.step_async()
    sampler.close()
    assert not sampler.pending and not executor.pending
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    if Path("/dev/shm").is_dir():
        assert not shm_path.exists()
    with pytest.raises(RuntimeError, match=r"^step_wait: no step is pending"):
        sampler.step_wait()


def test_worker_killed_while_its_step_is_in_flight_loses_that_step_and_is_restarted() -> None:
    # Clip 1's step takes a minute, so the kill lands while it steps, between step_async and step_wait.
    executor = ProcessExecutor(slow_second_clip(60.0), timeout_s=120)
    with PerClipResetSampler(executor, value_policy, seed=0) as sampler:
        sampler.step_async()
        killed_pid = executor.worker_pid(1)
        os.kill(killed_pid, signal.SIGKILL)
        batch = sampler.step_wait()
        assert batch.worker_died.tolist() == [False, True] and batch.valid.tolist() == [True, False]
        assert executor.worker_restarts == 1 and executor.worker_pid(1) != killed_pid
