"""Ray executor on a local single-machine Ray: same data as in-process, actor crash recovery."""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Iterator

import numpy as np
import pytest

from fast_sampler import CarlaLikeEnv, EnvFactoryError, FastSampler, InProcessExecutor

ray = pytest.importorskip("ray")
from fast_sampler.executors.ray_actors import RayExecutor  # noqa: E402

pytestmark = pytest.mark.xdist_group("local_ray")  # one worker starts the module's Ray once (about 10 s)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init installs its own and shutdown leaves it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, sigterm)


def env_fns() -> list[functools.partial]:
    return [functools.partial(CarlaLikeEnv, dict_obs=True, episode_lengths=lengths) for lengths in ([4, 2], [6], [3])]


def policy(obs: dict[str, np.ndarray]) -> np.ndarray:
    return np.tanh(obs["state"][:, :2])


def test_ray_executor_matches_in_process_and_recovers_from_a_killed_actor(local_ray: None, stepping) -> None:
    with FastSampler(InProcessExecutor(env_fns()), policy, rho=0.5, seed=2) as sampler:
        expected = sampler.collect(8)
    executor = RayExecutor(env_fns(), num_cpus_per_clip=0.5, timeout_s=60)
    with FastSampler(executor, policy, rho=0.5, seed=2) as sampler:
        got = stepping.collect(sampler, 8)
        for key in expected.obs:
            np.testing.assert_array_equal(expected.obs[key], got.obs[key])
        for name in ("rewards", "valid", "terminated", "truncated", "episode_index", "step_index"):
            np.testing.assert_array_equal(getattr(expected, name), getattr(got, name), err_msg=name)

        # Lock-step 8 starts a new round (all clips running); kill clip 1's actor process.
        stepping.step(sampler)
        os.kill(executor.worker_pid(1), signal.SIGKILL)
        died = stepping.step(sampler)
        assert died.worker_died.tolist() == [False, True, False] and not died.valid[1]
        assert executor.worker_restarts == 1
        assert stepping.step(sampler).valid[[0, 2]].any()  # sampling goes on


def test_ray_both_forms_give_identical_step_batches(local_ray: None, step_forms, assert_same_batches) -> None:
    runs = []
    for form in step_forms:
        executor = RayExecutor(env_fns(), num_cpus_per_clip=0.5, timeout_s=60)
        with FastSampler(executor, policy, rho=0.5, seed=2) as sampler:
            runs.append([form.step(sampler) for _ in range(12)])
    assert_same_batches(*runs)


def test_ray_env_factory_that_raises_names_its_clip(local_ray: None) -> None:
    fns = [functools.partial(CarlaLikeEnv), functools.partial(CarlaLikeEnv, obs_dim=0)]
    with pytest.raises(EnvFactoryError, match=r"clip 1: .*obs_dim"):
        RayExecutor(fns, num_cpus_per_clip=0.5, timeout_s=60)


def test_ray_env_that_lost_its_simulator_loses_one_step_and_keeps_its_actor(local_ray: None) -> None:
    import gymnasium as gym

    from fast_sampler import EnvLostError

    class LosesItsSimulator(gym.Wrapper):  # local: Ray ships it by value
        def __init__(self) -> None:
            super().__init__(CarlaLikeEnv(dict_obs=True, median_episode_steps=50.0))
            self.steps = 0

        def step(self, action):
            self.steps += 1
            if self.steps == 2:
                raise EnvLostError("CARLA server hung; restarted it")
            return self.env.step(action)

    executor = RayExecutor([LosesItsSimulator], num_cpus_per_clip=0.5, timeout_s=60)
    try:
        pid = executor.worker_pid(0)
        executor.reset({0: 0})
        action = np.zeros(2, np.float32)
        assert not executor.step({0: action})[0].worker_died
        lost = executor.step({0: action})[0]
        assert lost.worker_died and lost.truncated and "restarted it" in lost.info["worker_died"]
        assert executor.worker_restarts == 0 and executor.worker_pid(0) == pid
        executor.reset({0: 1})
        assert not executor.step({0: action})[0].worker_died
    finally:
        executor.close()


def test_ray_gpus_per_clip_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"num_gpus_per_clip: expected a number >= 0, got -1"):
        RayExecutor([CarlaLikeEnv], num_gpus_per_clip=-1)
