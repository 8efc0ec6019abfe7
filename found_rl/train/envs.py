"""The training env: the driving env plus what an advisor request about each observation needs.

Requests must describe o_t, the observation the policy acts on (ARCHITECTURE §6). Whatever is
needed is therefore computed in the env worker right when o_t is made, and travels in the info
returned *with* o_t (the reset's info for t = 0): the sampler hands that info over as
``obs_info``. The privileged expert's observation comes from the same snapshot the BEV was
rendered from; the RGB BEV is rendered only when the advisor needs pixels (VLM, CLIP).

CARLA env factories (:func:`carla_env_factories`) bring their own supervised server, one per
env, per node. A factory is a small picklable value; calling it (in a worker process or a Ray
actor) starts a CARLA server on that machine, on the GPU that process was given, on free ports,
and returns a :class:`~found_rl.env.DrivingEnv` whose backend restarts the server when it dies
or hangs and stops it when the env closes. So ``RayExecutor(carla_env_factories(...),
num_gpus_per_clip=1)`` spreads a run over every GPU node of a Ray cluster with no other change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from found_rl.dataset.text import prompt_speed_mps
from found_rl.expert import ExpertObserver
from found_rl.sim.carla.supervised_backend import PORT_STRIDE, start_supervised_backend, visible_gpu

ADVICE_KEY = "advice"
"""``info[ADVICE_KEY]``: ``{"command", "speed_mps"[, "state"][, "image"]}`` about this observation."""

AdviceState = Literal["expert", "prompt"] | None
"""What ``advice["state"]`` holds: the expert's privileged observation (``"expert"``), only what
the advisor prompt reads (``"prompt"``: the next route target, ``target_ego_xy``), or nothing."""

PROMPT_STATE_KEYS = ("target_ego_xy",)
"""The keys of the expert's observation that ``vlm_server.answers.build_prompt`` reads: a
navigation target any driving agent is given, nothing about other actors or the map."""


class AdviceInfo(gym.Wrapper):
    """Adds ``info["advice"]`` about the returned observation to every reset and step.

    Args:
        env: a ``DrivingEnv`` (or a wrapper of one).
        state: ``"expert"``: the expert's privileged observation (``ExpertObservation.to_dict()``);
            ``"prompt"``: only its keys the advisor prompt reads (an unprivileged advisor, such
            as a VLM, must see no more); ``None``: no state.
        with_image: include the 192 × 192 × 3 RGB BEV (uint8).
    """

    def __init__(self, env: gym.Env, *, state: AdviceState, with_image: bool) -> None:
        super().__init__(env)
        self.state, self.with_image = state, with_image
        self._observer = ExpertObserver() if state is not None else None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if self._observer is not None:
            self._observer.reset()
        return obs, self._with_advice(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._with_advice(info)

    def _with_advice(self, info: dict[str, Any]) -> dict[str, Any]:
        driving_env = self.env.unwrapped
        # the prompt's speed as the expert data states it (not info["speed_mps"], which is |v|)
        speed_mps = prompt_speed_mps(driving_env.snapshot.ego)
        advice: dict[str, Any] = {"command": int(info["command"]), "speed_mps": speed_mps}
        if self._observer is not None:
            state = self._observer.observe(driving_env.snapshot).to_dict()
            advice["state"] = state if self.state == "expert" else {key: state[key] for key in PROMPT_STATE_KEYS}
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
    state: AdviceState,
    with_image: bool,
    bev_pool: int = 2,
) -> gym.Env:
    """One training clip's env (called inside its worker process)."""
    from found_rl.bev import BevConfig
    from found_rl.env import DrivingEnv

    env: gym.Env = DrivingEnv(scenario, bev_config=BevConfig(pool=bev_pool))
    if train_routes is not None:
        env = RouteSubset(env, train_routes)
    return AdviceInfo(env, state=state, with_image=with_image)


@dataclass(frozen=True)
class SupervisedCarlaEnv:
    """Build a ``DrivingEnv`` on a CARLA server started for it on this machine.

    Attributes:
        scenario: scenario YAML path (``backend: carla``), readable on every node.
        carla_root: CARLA release folder on the nodes (default ``$CARLA_ROOT`` there).
        rpc_base / tm_base: first RPC and Traffic Manager ports tried; taken sets are skipped.
        gpu: graphics adapter; ``None`` picks the process's first visible GPU.
        observation: ``"bev"`` or ``"state"``.
        log_dir: server logs (default ``$FOUND_RL_CACHE/carla/logs``).
        timeout_s: per-call timeout; a tick longer than this is a hung server.
        ready_timeout_s: longest wait for the server to start.
    """

    scenario: str
    carla_root: str | None = None
    rpc_base: int = 2000
    tm_base: int = 8000
    gpu: int | None = None
    observation: str = "bev"
    log_dir: str | None = None
    timeout_s: float = 20.0
    ready_timeout_s: float = 120.0

    def __call__(self) -> gym.Env:
        from found_rl.env import DrivingEnv
        from found_rl.scenario import load_scenario

        scenario = load_scenario(self.scenario)
        backend = start_supervised_backend(
            scenario, carla_root=self.carla_root, gpu=visible_gpu() if self.gpu is None else self.gpu,
            rpc_base=self.rpc_base, tm_base=self.tm_base, log_dir=self.log_dir, timeout_s=self.timeout_s,
            ready_timeout_s=self.ready_timeout_s,
        )  # fmt: skip
        try:
            return DrivingEnv(scenario, observation=self.observation, backend=backend)
        except BaseException:
            backend.close()
            raise


def carla_env_factories(scenario: str | Path, num_envs: int, **options) -> list[SupervisedCarlaEnv]:
    """One factory per env, with port bases ``PORT_STRIDE`` apart so envs on a node never race."""
    rpc_base, tm_base = options.pop("rpc_base", 2000), options.pop("tm_base", 8000)
    offsets = [k * PORT_STRIDE for k in range(num_envs)]
    return [SupervisedCarlaEnv(str(scenario), rpc_base=rpc_base + o, tm_base=tm_base + o, **options) for o in offsets]


def advice_of(info: dict[str, Any]) -> dict[str, Any] | None:
    """The advice payload in an observation's info, if the env added one."""
    advice = info.get(ADVICE_KEY)
    return advice if isinstance(advice, dict) else None

