"""An env whose simulator was replaced (``EnvLostError``) loses one step, like a dead worker."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

from fast_sampler import CarlaLikeEnv, ClipError, EnvLostError, InProcessExecutor, PerClipResetSampler, ProcessExecutor


class LosesItsSimulator(gym.Wrapper):
    """Raises EnvLostError on the given global step numbers (and on reset, when told)."""

    def __init__(self, lose_on_steps: tuple[int, ...] = (), lose_on_reset: bool = False) -> None:
        super().__init__(CarlaLikeEnv(dict_obs=True, median_episode_steps=50.0))
        self.lose_on_steps, self.lose_on_reset, self.steps = set(lose_on_steps), lose_on_reset, 0

    def reset(self, **kwargs):
        if self.lose_on_reset:
            raise EnvLostError("server gone during reset")
        return self.env.reset(**kwargs)

    def step(self, action):
        self.steps += 1
        if self.steps in self.lose_on_steps:
            raise EnvLostError("CARLA server hung; restarted it")
        return self.env.step(action)


EXECUTORS = {
    "in-process": InProcessExecutor,
    "process": functools.partial(ProcessExecutor, timeout_s=30),
}


@pytest.mark.parametrize("kind", sorted(EXECUTORS))
def test_lost_step_is_truncated_and_the_clip_resumes_in_the_same_worker(kind, stepping):
    executor = EXECUTORS[kind]([functools.partial(LosesItsSimulator, (3,)), LosesItsSimulator])
    pid = executor.worker_pid(0) if kind == "process" else None
    executor.reset({0: 0, 1: 1})
    action = np.zeros(2, np.float32)
    for _ in range(2):
        assert not any(r.worker_died for r in stepping.step_executor(executor, {0: action, 1: action}).values())
    results = stepping.step_executor(executor, {0: action, 1: action})
    lost = results[0]
    assert lost.worker_died and lost.truncated and lost.obs is None
    assert "CARLA server hung; restarted it" in lost.info["worker_died"]
    assert not results[1].worker_died
    assert executor.worker_restarts == 0  # the worker lives on; only the step is lost
    if kind == "process":
        assert executor.worker_pid(0) == pid
    executor.reset({0: 5})
    assert not stepping.step_executor(executor, {0: action})[0].worker_died
    executor.close()


@pytest.mark.parametrize("kind", sorted(EXECUTORS))
def test_a_lost_reset_is_an_error_naming_the_clip(kind):
    executor = EXECUTORS[kind]([functools.partial(LosesItsSimulator, lose_on_reset=True)])
    with pytest.raises(ClipError, match=r"clip 0: .*server gone during reset"):
        executor.reset({0: 0})
    executor.close()


def test_the_sampler_marks_the_lost_row_and_resets_the_clip(stepping):
    executor = InProcessExecutor([functools.partial(LosesItsSimulator, (4,))])
    with PerClipResetSampler(executor, lambda obs: np.zeros((1, 2), np.float32), seed=0) as sampler:
        rollout = stepping.collect(sampler, 8)
    assert rollout.worker_died[:, 0].tolist() == [False, False, False, True, False, False, False, False]
    assert not rollout.valid[3, 0]
    assert rollout.episode_index[4, 0] == rollout.episode_index[2, 0] + 1  # a fresh episode after the loss
