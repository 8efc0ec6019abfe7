"""The training env: the driving env plus what an advisor request about each observation needs.

Requests must describe o_t, the observation the policy acts on (ARCHITECTURE §6). Whatever is
needed is therefore computed in the env worker right when o_t is made, and travels in the info
returned *with* o_t (the reset's info for t = 0): the sampler hands that info over as
``obs_info``. The privileged expert's observation comes from the same snapshot the BEV was
rendered from; the RGB BEV is rendered only when the advisor needs pixels (VLM, CLIP).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from found_rl.expert import ExpertObserver

ADVICE_KEY = "advice"
"""``info[ADVICE_KEY]``: ``{"command", "speed_mps"[, "state"][, "image"]}`` about this observation."""


class AdviceInfo(gym.Wrapper):
    """Adds ``info["advice"]`` about the returned observation to every reset and step.

    Args:
        env: a ``DrivingEnv`` (or a wrapper of one).
        with_state: include the expert's privileged observation (``ExpertObservation.to_dict()``).
        with_image: include the 192 × 192 × 3 RGB BEV (uint8).
    """

    def __init__(self, env: gym.Env, *, with_state: bool, with_image: bool) -> None:
        super().__init__(env)
        self.with_state, self.with_image = with_state, with_image
        self._observer = ExpertObserver() if with_state else None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if self._observer is not None:
            self._observer.reset()
        return obs, self._with_advice(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._with_advice(info)

    def _with_advice(self, info: dict[str, Any]) -> dict[str, Any]:
        advice: dict[str, Any] = {"command": int(info["command"]), "speed_mps": float(info["speed_mps"])}
        driving_env = self.env.unwrapped
        if self._observer is not None:
            advice["state"] = self._observer.observe(driving_env.snapshot).to_dict()
        if self.with_image:
            advice["image"] = np.array(driving_env.rgb_bev())  # the renderer reuses its buffer
        return {**info, ADVICE_KEY: advice}


class RouteSubset(gym.Wrapper):
    """Draws each episode's route from ``route_indices`` only (the training routes).

    The draw has its own generator, reseeded by a seeded reset, so the same seed replays the
    same episode.
    """

    def __init__(self, env: gym.Env, route_indices: list[int]) -> None:
        super().__init__(env)
        if not route_indices:
            raise ValueError("RouteSubset: no training routes are left after holding out the evaluation routes")
        self.route_indices = list(route_indices)
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        route_index = self.route_indices[int(self._rng.integers(len(self.route_indices)))]
        return self.env.reset(seed=seed, options={**(options or {}), "route_index": route_index})


def make_training_env(
    scenario: str | Path,
    *,
    train_routes: list[int] | None,
    with_state: bool,
    with_image: bool,
    bev_pool: int = 2,
) -> gym.Env:
    """One training clip's env (called inside its worker process)."""
    from found_rl.bev import BevConfig
    from found_rl.env import DrivingEnv

    env: gym.Env = DrivingEnv(scenario, bev_config=BevConfig(pool=bev_pool))
    if train_routes is not None:
        env = RouteSubset(env, train_routes)
    return AdviceInfo(env, with_state=with_state, with_image=with_image)


def advice_of(info: dict[str, Any]) -> dict[str, Any] | None:
    """The advice payload in an observation's info, if the env added one."""
    advice = info.get(ADVICE_KEY)
    return advice if isinstance(advice, dict) else None

