"""``DrivingEnv``: the gymnasium env of found-rl (``found_rl/Driving-v0``, ARCHITECTURE §4–5).

A backend advances the world; everything else here reads its snapshots: the BEV renderer and
state vector make the observation, the route tracker and infraction monitor decide how the
episode goes, and a pure reward function scores the step. The env never auto-resets.

Example::

    env = gymnasium.make("found_rl/Driving-v0", scenario="scenarios/small_grid.yaml")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.array([0.5, 0.0], np.float32))
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np

from found_rl import hazards
from found_rl.actions import ACTION_DIM, action_to_controls
from found_rl.bev import BevConfig, BevRenderer
from found_rl.events import EpisodeStatus, EpisodeSummary, Infraction, InfractionKind
from found_rl.infractions import (
    TERMINAL_KINDS,
    InfractionConfig,
    InfractionMonitor,
    InfractionReport,
    drivable_area,
)
from found_rl.rewards import Hazards, Reward, StepContext, get_reward, reward_hazards
from found_rl.routes.progress import RouteProgress, RouteTracker
from found_rl.scenario import Scenario, load_scenario
from found_rl.sim.backend import Backend, make_backend
from found_rl.state_vector import STATE_SIZE, state_vector
from found_rl.world import STEP_S, WorldSnapshot, route_command

LIGHT_HORIZON_M = 18.0
"""Roach searches lights 18 m ahead for the state vector and the reward."""

ACTOR_HORIZON_M = 15.0
"""Vehicles and walkers are hazards within 15 m of the bumper (Roach's object-finder range)."""

STOP_SIGN_HORIZON_M = 20.0

ObservationKind = Literal["bev", "state"]

_STATUS_BY_KIND: tuple[tuple[InfractionKind, EpisodeStatus], ...] = (
    (InfractionKind.COLLISION_PEDESTRIAN, EpisodeStatus.FAILED_COLLISION),
    (InfractionKind.COLLISION_VEHICLE, EpisodeStatus.FAILED_COLLISION),
    (InfractionKind.COLLISION_LAYOUT, EpisodeStatus.FAILED_COLLISION),
    (InfractionKind.RED_LIGHT, EpisodeStatus.FAILED_RED_LIGHT),
    (InfractionKind.ROUTE_DEVIATION, EpisodeStatus.FAILED_DEVIATION),
    (InfractionKind.VEHICLE_BLOCKED, EpisodeStatus.FAILED_BLOCKED),
    (InfractionKind.ROUTE_TIMEOUT, EpisodeStatus.FAILED_TIMEOUT),
)
"""How an episode's end is named, most serious cause first."""


class DrivingEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Drive the ego along a scenario's routes.

    ``terminated``: collision (vehicle, walker, leaving the road), red-light run, route
    deviation, blocked, or route completed. ``truncated``: the step limit (reported as a
    ``route_timeout`` infraction). ``info`` holds ``step`` (the index of this observation in its
    episode; the id unique within a run, ``(clip, episode, step)``, is the sampler's, since only
    the sampler knows the clip slot and counts episodes across seeded resets),
    ``command`` (:class:`~found_rl.actions.RoadOption` value), ``speed_mps``, ``infractions``
    (this step's :class:`~found_rl.events.Infraction` s), ``route_completion``, ``reward_terms``
    and, when the episode ends, ``episode`` (an :class:`~found_rl.events.EpisodeSummary`).

    Args:
        scenario: a scenario YAML path or a loaded :class:`~found_rl.scenario.Scenario`.
        reward: ``"valeo"`` (Roach) or ``"carl"``; default: the scenario's ``reward``.
        observation: ``"bev"`` for ``Dict(bev, state)``; ``"state"`` for ``Dict(state)`` only
            (no rendering: for benchmarks and state-based agents).
        render_mode: ``None`` or ``"rgb_array"`` (the 192 × 192 RGB BEV).
        max_steps: truncate episodes after this many steps; default: ``episode.max_steps``.
            With ``episode.route_timeout`` set, an episode is also truncated at its route's
            leaderboard time limit, whichever comes first (``step_limit``).
        backend: an already-built backend (tests, custom worlds); default: the scenario's.
        bev_config: renderer settings (Roach's by default).
        infraction_config: infraction thresholds; the blocked time comes from the scenario
            unless given here.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        scenario: str | Path | Scenario,
        *,
        reward: str | None = None,
        observation: ObservationKind = "bev",
        render_mode: str | None = None,
        max_steps: int | None = None,
        backend: Backend | None = None,
        bev_config: BevConfig | None = None,
        infraction_config: InfractionConfig | None = None,
    ) -> None:
        self.scenario = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        if observation not in ("bev", "state"):
            raise ValueError(f"DrivingEnv: observation must be 'bev' or 'state', got {observation!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"DrivingEnv: render_mode must be None or 'rgb_array', got {render_mode!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"DrivingEnv: max_steps must be >= 1, got {max_steps}")
        self.reward_name = reward or self.scenario.reward
        self._reward_fn = get_reward(self.reward_name)
        self.observation_kind: ObservationKind = observation
        self.render_mode = render_mode
        self.max_steps = max_steps or self.scenario.episode.max_steps
        self.terminate_on_route_completion = self.scenario.episode.terminate_on_route_completion

        if backend is None:
            backend = make_backend(self.scenario)
        self.backend = backend
        # State-only envs rasterise the map only if render() is ever called.
        self.renderer = BevRenderer(backend.map if observation == "bev" else None, bev_config or BevConfig())
        infraction_config = infraction_config or InfractionConfig(blocked_time_s=self.scenario.episode.blocked_s)
        self.monitor = InfractionMonitor(infraction_config)
        drivable_area(backend.map)  # build the map's road union now rather than in the first reset

        self._can_observe_bev = observation == "bev"
        self.observation_space = self._observation_space(observation)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)

        self._snapshot: WorldSnapshot | None = None
        self._tracker: RouteTracker | None = None
        self._steps = 0
        self._step_limit = self.max_steps
        self._infractions: list[Infraction] = []
        self._is_done = True
        self._rendered_step = -1

    # ------------------------------------------------------------------------- public API

    @property
    def snapshot(self) -> WorldSnapshot:
        """The last world snapshot (after the last reset or step)."""
        if self._snapshot is None:
            raise RuntimeError("DrivingEnv.snapshot: call reset() first")
        return self._snapshot

    @property
    def num_routes(self) -> int:
        """Routes in the scenario's route file (``options={"route_index": i}`` picks one);
        0 when the scenario draws random routes."""
        return self.backend.num_routes

    @property
    def progress(self) -> RouteProgress:
        """The ego's progress along its route after the last reset or step."""
        if self._tracker is None:
            raise RuntimeError("DrivingEnv.progress: call reset() first")
        return self._tracker.progress

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode.

        Args:
            seed: reseeds the env's generator, which draws the route (unless given) and the
                backend's seed, so the same seed gives the same rollout, infos included.
            options: ``{"route_index": i}`` drives route ``i`` of the route file.

        Raises:
            ValueError: unknown option or a route index out of range.
        """
        super().reset(seed=seed)
        route_index = self._route_index_option(options)
        if route_index is None and self.num_routes > 0:
            route_index = int(self.np_random.integers(self.num_routes))
        backend_seed = int(self.np_random.integers(2**31 - 1))
        snapshot = self.backend.reset(seed=backend_seed, route_index=route_index)

        self._snapshot = snapshot
        self._tracker = RouteTracker(snapshot.route, snapshot.ego.xy, snapshot.ego.yaw_deg)
        self.monitor.reset(snapshot)
        self.renderer.reset()
        self._rendered_step = -1
        self._steps = 0
        self._step_limit = self._route_step_limit(snapshot.route.length_m)
        self._infractions = []
        self._is_done = False
        observation, _ = self._observe(snapshot, self._tracker.progress)
        info = self._info(snapshot, self._tracker.progress, ())
        return observation, info

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply ``(acc, steer)`` for one 0.1 s step.

        Raises:
            ValueError: the action is not two finite numbers in ``[-1, 1]``.
            RuntimeError: the episode has ended (or never started): call ``reset()``.
        """
        acc, steer = self._check_action(action)
        if self._is_done or self._tracker is None or self._snapshot is None:
            raise RuntimeError("DrivingEnv.step: the episode has ended (or not started); call reset() first")
        previous = self._snapshot
        snapshot = self.backend.step(action_to_controls(acc, steer))
        self._snapshot = snapshot
        self._steps += 1

        progress = self._tracker.update(snapshot.ego.xy, snapshot.ego.yaw_deg)
        report = self.monitor.step(snapshot, progress)
        infractions = list(report.infractions)
        is_completed = report.route_completed and self.terminate_on_route_completion
        terminated = is_completed or any(i.kind in TERMINAL_KINDS for i in infractions)
        truncated = not terminated and self._steps >= self._step_limit
        if truncated and not report.route_completed:
            timeout = self._infraction(snapshot, InfractionKind.ROUTE_TIMEOUT, f"no arrival in {self._steps} steps")
            infractions.append(timeout)
        observation, reward_hazards = self._observe(snapshot, progress)
        reward = self._reward_fn(StepContext(snapshot, previous, progress, report, reward_hazards, terminated))

        self._infractions.extend(infractions)
        info = self._info(snapshot, progress, tuple(infractions), reward)
        if terminated or truncated:
            self._is_done = True
            info["episode"] = self._summary(snapshot, progress, report, terminated, info)
        return observation, float(reward.total), terminated, truncated, info

    @property
    def step_limit(self) -> int:
        """Steps this episode may take: ``max_steps``, or less under ``episode.route_timeout``."""
        return self._step_limit

    def _route_step_limit(self, route_length_m: float) -> int:
        timeout = self.scenario.episode.route_timeout
        if timeout is None:
            return self.max_steps
        return min(self.max_steps, timeout.steps(route_length_m, STEP_S))

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """The RGB BEV of the last snapshot (``render_mode="rgb_array"``), else ``None``."""
        if self.render_mode is None:
            return None
        return self.rgb_bev()

    def set_observation(self, observation: ObservationKind) -> None:
        """Observe ``"state"`` only or ``"bev"`` too from the next reset on: an evaluation worker
        drives agents that read no BEV (the expert, the reference policies) without rendering one
        per step, and trained policies with it, in one simulator.

        Raises:
            ValueError: ``"bev"`` on an env built with ``observation="state"`` (its renderer has
                no map), or an unknown kind.
        """
        if observation not in ("bev", "state"):
            raise ValueError(f"DrivingEnv.set_observation: 'bev' or 'state', got {observation!r}")
        if observation == "bev" and not self._can_observe_bev:
            raise ValueError("DrivingEnv.set_observation: this env was built with observation='state'; "
                             "build it with observation='bev' to switch between the two")
        self.observation_kind = observation
        self.observation_space = self._observation_space(observation)

    def _observation_space(self, observation: ObservationKind) -> gym.spaces.Dict:
        spaces: dict[str, gym.Space] = {"state": gym.spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float32)}
        if observation == "bev":
            spaces = {"bev": gym.spaces.Box(0, 255, self.renderer.observation_shape, np.uint8), **spaces}
        return gym.spaces.Dict(spaces)

    def rgb_bev(self) -> np.ndarray:
        """The 192 × 192 × 3 RGB BEV of the last snapshot, whatever the ``render_mode`` (what an
        advisor or a video is shown of the observation just returned)."""
        snapshot = self.snapshot
        if self._rendered_step != snapshot.step:  # state-only observations render nothing
            self.renderer.render(snapshot, self.progress.index)
            self._rendered_step = snapshot.step
        return self.renderer.render_rgb()

    def close(self) -> None:
        self.backend.close()
        super().close()

    # ------------------------------------------------------------------------- internals

    def _route_index_option(self, options: dict[str, Any] | None) -> int | None:
        if not options:
            return None
        unknown = sorted(set(options) - {"route_index"})
        if unknown:
            raise ValueError(f"DrivingEnv.reset: unknown options {unknown}; allowed: ['route_index']")
        index = options.get("route_index")
        if index is None:
            return None
        if self.num_routes == 0:
            raise ValueError(
                f"DrivingEnv.reset: options['route_index']={index!r} given, but the scenario draws random routes "
                "(routes.random_length_m); give a routes.file to choose routes by index"
            )
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < self.num_routes:
            raise ValueError(
                f"DrivingEnv.reset: options['route_index'] must be an int in [0, {self.num_routes}), got {index!r}"
            )
        return int(index)

    def _check_action(self, action: np.ndarray) -> tuple[float, float]:
        values = np.asarray(action, dtype=np.float64)
        if values.shape != (ACTION_DIM,):
            raise ValueError(f"DrivingEnv.step: action must have shape (2,) as (acc, steer), got shape {values.shape}")
        acc, steer = float(values[0]), float(values[1])
        if not (math.isfinite(acc) and math.isfinite(steer)):
            raise ValueError(f"DrivingEnv.step: action must be finite, got (acc={acc}, steer={steer})")
        # float32 rounding of a value computed in float64 may exceed 1 by an ulp.
        if not (-1.0 - 1e-6 <= acc <= 1.0 + 1e-6 and -1.0 - 1e-6 <= steer <= 1.0 + 1e-6):
            raise ValueError(
                f"DrivingEnv.step: action must lie in [-1, 1]^2 as (acc, steer), got (acc={acc}, steer={steer}); "
                "clip or squash it in the policy"
            )
        return acc, steer

    def _observe(self, snapshot: WorldSnapshot, progress: RouteProgress) -> tuple[dict[str, np.ndarray], Hazards]:
        """The observation and the hazards the reward needs (both use the same look-ahead)."""
        index = progress.index
        light = hazards.affecting_light(snapshot, index, LIGHT_HORIZON_M)
        sign = hazards.affecting_stop_sign(snapshot, index, STOP_SIGN_HORIZON_M)
        if sign is not None and self.monitor.has_stopped_at(sign.sign_id):
            sign = None
        state = state_vector(snapshot, light, sign, progress.progress_m)
        observation = {"state": state}
        if self.observation_kind == "bev":
            observation = {"bev": self.renderer.render(snapshot, index), "state": state}
            self._rendered_step = snapshot.step
        leader = hazards.leading_vehicle(snapshot, index, ACTOR_HORIZON_M)
        walkers = hazards.walkers_in_path(snapshot, index, ACTOR_HORIZON_M)
        return observation, reward_hazards(snapshot, light, sign, leader, walkers)

    def _info(
        self,
        snapshot: WorldSnapshot,
        progress: RouteProgress,
        infractions: tuple[Infraction, ...],
        reward: Reward | None = None,
    ) -> dict[str, Any]:
        info: dict[str, Any] = {
            "step": self._steps,
            "command": int(route_command(snapshot.route, progress.index, snapshot.ego.speed_mps)),
            "speed_mps": snapshot.ego.speed_mps,
            "infractions": list(infractions),
            "route_completion": progress.completion,
        }
        if reward is not None:
            info["reward_terms"] = reward.terms
        return info

    def _summary(
        self,
        snapshot: WorldSnapshot,
        progress: RouteProgress,
        report: InfractionReport,
        terminated: bool,
        info: dict[str, Any],
    ) -> EpisodeSummary:
        if report.outside_lane_m > 0.0:
            share = report.outside_lane_m / max(progress.distance_driven_m, 1e-9)
            detail = f"drove {report.outside_lane_m:.1f} m ({100 * share:.1f} %) outside the route's lanes"
            outside = self._infraction(snapshot, InfractionKind.OUTSIDE_ROUTE_LANES, detail)
            self._infractions.append(outside)
            info["infractions"].append(outside)
        status = EpisodeStatus.COMPLETED if report.route_completed else EpisodeStatus.TRUNCATED
        kinds = {i.kind for i in self._infractions}
        for kind, failure in _STATUS_BY_KIND:
            if kind in kinds and (terminated or kind is InfractionKind.ROUTE_TIMEOUT):
                status = failure
                break
        return EpisodeSummary(
            route_id=snapshot.route.route_id,
            status=status,
            route_completion=1.0 if report.route_completed else progress.completion,
            route_length_m=float(snapshot.route.length_m),
            distance_m=progress.distance_driven_m,
            outside_lane_m=report.outside_lane_m,
            duration_s=float(snapshot.time_s),
            steps=self._steps,
            infractions=tuple(self._infractions),
        )

    def _infraction(self, snapshot: WorldSnapshot, kind: InfractionKind, detail: str) -> Infraction:
        xy = (float(snapshot.ego.xy[0]), float(snapshot.ego.xy[1]))
        return Infraction(kind, snapshot.step, xy, None, snapshot.ego.speed_mps, detail)

