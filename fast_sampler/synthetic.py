"""A synthetic env with CARLA's timing profile, for tests and for the sampler benchmark.

What matters to a sampler is when steps and resets finish and when episodes end, not what the
observations mean. This env reproduces CARLA closed-loop training's profile, scaled down:

* a reset costs 40–100 steps' time (uniform); in CARLA a reset (respawn ego and traffic,
  warm-up ticks) takes seconds against tens of ms per synchronous step;
* episodes end early (collision, route deviation, blocking) with a heavy tail: lengths are
  log-normal, median 50 steps, σ = 1 (mean ≈ 82, 90th percentile ≈ 180, 99th ≈ 510), capped by
  a time limit that truncates;
* latencies are ``time.sleep`` calls, so they overlap across worker processes even on a
  machine with few cores, just as waiting for a CARLA server does.

With zero latency (the default) it is a fast deterministic toy env for tests.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

_STATE_BOUND = 10.0


class CarlaLikeEnv(gym.Env):
    """Synthetic driving-like env with CARLA's step/reset latency ratio and episode lengths.

    Args:
        step_latency_s: mean wall-clock seconds per step (0 disables sleeping).
        step_jitter: σ of the log-normal factor on each step's latency.
        reset_steps: a reset sleeps ``uniform(low, high) * step_latency_s``.
        median_episode_steps: median of the log-normal episode length (steps until terminated).
        episode_sigma: σ of the log-normal episode length (the tail weight).
        min_episode_steps: shortest episode.
        max_episode_steps: time limit; an episode reaching it is truncated.
        episode_lengths: if given, episode k lasts ``episode_lengths[k % len]`` steps instead of
            a random length (for tests that need known episode boundaries).
        obs_dim: length of the state vector.
        dict_obs: observe ``{"state": (obs_dim,) float32, "image": (3, 8, 8) uint8}``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        *,
        step_latency_s: float = 0.0,
        step_jitter: float = 0.3,
        reset_steps: tuple[float, float] = (40.0, 100.0),
        median_episode_steps: float = 50.0,
        episode_sigma: float = 1.0,
        min_episode_steps: int = 5,
        max_episode_steps: int = 1000,
        episode_lengths: Sequence[int] | None = None,
        obs_dim: int = 8,
        dict_obs: bool = False,
    ) -> None:
        if step_latency_s < 0:
            raise ValueError(f"step_latency_s: expected >= 0 seconds, got {step_latency_s}")
        if not 0 <= reset_steps[0] <= reset_steps[1]:
            raise ValueError(f"reset_steps: expected 0 <= low <= high, got {reset_steps}")
        if obs_dim < 1:
            raise ValueError(f"obs_dim: expected an int >= 1, got {obs_dim}")
        if not 1 <= min_episode_steps <= max_episode_steps:
            raise ValueError(
                "min_episode_steps, max_episode_steps: expected 1 <= min <= max, "
                f"got {min_episode_steps}, {max_episode_steps}"
            )
        if episode_lengths is not None and (len(episode_lengths) == 0 or min(episode_lengths) < 1):
            raise ValueError(f"episode_lengths: expected a non-empty sequence of ints >= 1, got {episode_lengths}")
        self.step_latency_s = step_latency_s
        self.step_jitter = step_jitter
        self.reset_steps = reset_steps
        self.median_episode_steps = median_episode_steps
        self.episode_sigma = episode_sigma
        self.min_episode_steps = min_episode_steps
        self.max_episode_steps = max_episode_steps
        self.episode_lengths = list(episode_lengths) if episode_lengths is not None else None
        state_space = gym.spaces.Box(-_STATE_BOUND, _STATE_BOUND, (obs_dim,), np.float32)
        if dict_obs:
            image_space = gym.spaces.Box(0, 255, (3, 8, 8), np.uint8)
            self.observation_space = gym.spaces.Dict({"state": state_space, "image": image_space})
        else:
            self.observation_space = state_space
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._state = np.zeros(obs_dim, np.float32)
        self._episodes_started = 0
        self._length = 0
        self._t = 0
        self._latency_rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._latency_rng = np.random.default_rng(seed + 1_000_003)
        self._sleep(self._latency_rng.uniform(*self.reset_steps))
        if self.episode_lengths is not None:
            self._length = self.episode_lengths[self._episodes_started % len(self.episode_lengths)]
        else:
            drawn = self.np_random.lognormal(np.log(self.median_episode_steps), self.episode_sigma)
            self._length = int(max(self.min_episode_steps, round(drawn)))
        self._episodes_started += 1
        self._t = 0
        initial = self.np_random.normal(size=self._state.shape)
        self._state = np.clip(initial, -_STATE_BOUND, _STATE_BOUND).astype(np.float32)
        return self._observation(), {"episode_length": self._length}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        action = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self._sleep(self._latency_rng.lognormal(-0.5 * self.step_jitter**2, self.step_jitter))
        self._t += 1
        noise = self.np_random.normal(size=self._state.shape).astype(np.float32)
        self._state = np.clip(0.9 * self._state + 0.1 * noise, -_STATE_BOUND, _STATE_BOUND)
        self._state[0] = self._t / self.max_episode_steps
        self._state[-1] = action[0]
        reward = 1.0 - 0.25 * float(np.sum(action**2))
        terminated = self._t >= self._length
        if terminated:
            reward -= 1.0  # an early end is a failure (collision, deviation) in CARLA
        truncated = not terminated and self._t >= self.max_episode_steps
        return self._observation(), reward, terminated, truncated, {"t": self._t}

    def _sleep(self, latency_in_steps: float) -> None:
        if self.step_latency_s > 0:
            time.sleep(self.step_latency_s * latency_in_steps)

    def _observation(self) -> Any:
        if isinstance(self.observation_space, gym.spaces.Dict):
            level = int(np.clip(128 + 100 * self._state[1 % len(self._state)], 0, 255))
            image = np.full((3, 8, 8), level, np.uint8)
            image[0, 0, 0] = self._t % 256
            return {"state": self._state.copy(), "image": image}
        return self._state.copy()
