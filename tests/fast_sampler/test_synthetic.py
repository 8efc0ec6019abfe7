"""The CARLA-like synthetic env: a valid gymnasium env with the documented episode lengths."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from fast_sampler import CarlaLikeEnv


@pytest.mark.parametrize("dict_obs", [False, True])
def test_passes_the_gymnasium_env_checker(dict_obs: bool) -> None:
    check_env(CarlaLikeEnv(dict_obs=dict_obs), skip_render_check=True)


def test_episode_lengths_are_heavy_tailed_with_median_50() -> None:
    env = CarlaLikeEnv()
    env.reset(seed=0)
    lengths = np.array([env.reset()[1]["episode_length"] for _ in range(4000)])
    # log-normal(ln 50, 1): median 50, mean ≈ 82, 99th percentile ≈ 510 (sampling error ~5%).
    assert 45 <= np.median(lengths) <= 55
    assert 72 <= lengths.mean() <= 92
    assert 400 <= np.percentile(lengths, 99) <= 650
    assert lengths.min() >= 5


def test_episode_ends_terminated_at_its_length_and_truncated_at_the_time_limit() -> None:
    env = CarlaLikeEnv(episode_lengths=[3, 20], max_episode_steps=10)
    env.reset(seed=1)
    flags = [env.step(np.zeros(2))[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (True, False)]
    env.reset()
    flags = [env.step(np.zeros(2))[2:4] for _ in range(10)]
    assert flags[-1] == (False, True) and not any(any(f) for f in flags[:-1])


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="step_latency_s"):
        CarlaLikeEnv(step_latency_s=-1)
    with pytest.raises(ValueError, match="episode_lengths"):
        CarlaLikeEnv(episode_lengths=[0])
