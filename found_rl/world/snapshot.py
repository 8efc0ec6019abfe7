"""The world state a simulator backend hands downstream (ARCHITECTURE §2).

A backend (SUMO, CARLA) advances the world and returns a :class:`WorldSnapshot`; the BEV
renderer, state vector, rewards, infractions, metrics and the expert read only snapshots and
never call a simulator. All coordinates are in CARLA's world frame: x east, y south
(left-handed), metres; yaw in degrees, positive clockwise seen from above.

Per-step data is structure-of-arrays (one ``(N, ...)`` array per field) so that renderers and
checks vectorise. Static data (:class:`MapGeometry`, :class:`Route`) is built once and shared
by reference between snapshots. Fields may be added (with defaults); never renamed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from found_rl.world.map_geometry import MapGeometry
from found_rl.world.route import Route

STEP_S = 0.1
"""Seconds per snapshot: every backend steps synchronously at 10 Hz."""


class LightState(IntEnum):
    """Traffic-light state; values match the state vector's light code (ARCHITECTURE §4)."""

    NONE = 0
    RED = 1
    YELLOW = 2
    GREEN = 3


@dataclass(frozen=True)
class ActorBoxes:
    """Oriented boxes of one actor kind (vehicles or walkers) at one instant.

    Attributes:
        ids: ``(N,)`` actor ids (stable across steps).
        xy: ``(N, 2)`` float64 box centres, metres.
        yaw_deg: ``(N,)`` float64 headings.
        half_extent: ``(N, 2)`` float64 half-length (along heading) and half-width, metres.
        velocity_xy: ``(N, 2)`` float64 world-frame velocities, m/s.
    """

    ids: tuple[str, ...]
    xy: np.ndarray
    yaw_deg: np.ndarray
    half_extent: np.ndarray
    velocity_xy: np.ndarray

    @staticmethod
    def empty() -> ActorBoxes:
        return ActorBoxes((), np.zeros((0, 2)), np.zeros(0), np.zeros((0, 2)), np.zeros((0, 2)))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def speed_mps(self) -> np.ndarray:
        return np.hypot(self.velocity_xy[:, 0], self.velocity_xy[:, 1])


@dataclass(frozen=True)
class StopLines:
    """Traffic-light stop lines (or stop signs) at one instant.

    A light controlling several lanes contributes one segment per lane.

    Attributes:
        ids: ``(M,)`` id of the light/sign each segment belongs to.
        lane_ids: ``(M,)`` lane each segment stops (the incoming lane).
        segments: ``(M, 2, 2)`` float64 endpoints across the lane, metres.
        states: ``(M,)`` int8 :class:`LightState` (stop signs: ``RED``).
        remaining_s: ``(M,)`` float64 time until the state changes (``inf`` if unknown).
        phase_s: ``(M,)`` float64 full duration of the current state (``inf`` if unknown).
    """

    ids: tuple[str, ...]
    lane_ids: tuple[str, ...]
    segments: np.ndarray
    states: np.ndarray
    remaining_s: np.ndarray
    phase_s: np.ndarray

    @staticmethod
    def empty() -> StopLines:
        return StopLines((), (), np.zeros((0, 2, 2)), np.zeros(0, np.int8), np.zeros(0), np.zeros(0))

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class EgoState:
    """The ego vehicle.

    Attributes:
        xy: ``(2,)`` float64 centre of the bounding box, metres.
        yaw_deg: heading.
        velocity_xy: ``(2,)`` float64 world-frame velocity, m/s.
        half_extent: ``(2,)`` float64 half-length and half-width, metres.
        throttle, steer, brake: the controls applied in the last step.
        gear: current gear (1 forward, 0 standing, -1 reverse).
        lane_id: lane the backend maps the ego onto, if any.
        acceleration_mps2: longitudinal acceleration over the last step.
    """

    xy: np.ndarray
    yaw_deg: float
    velocity_xy: np.ndarray
    half_extent: np.ndarray
    throttle: float = 0.0
    steer: float = 0.0
    brake: float = 0.0
    gear: int = 1
    lane_id: str | None = None
    acceleration_mps2: float = 0.0

    @functools.cached_property
    def speed_mps(self) -> float:
        """Read several times per step (rewards, infractions, state vector): computed once."""
        return float(np.hypot(self.velocity_xy[0], self.velocity_xy[1]))

    @property
    def forward_speed_mps(self) -> float:
        """Velocity along the heading (negative when reversing)."""
        yaw = np.deg2rad(self.yaw_deg)
        return float(self.velocity_xy[0] * np.cos(yaw) + self.velocity_xy[1] * np.sin(yaw))


@dataclass(frozen=True)
class WorldSnapshot:
    """Everything downstream code may know about the world at one step.

    Attributes:
        step: simulation steps since reset.
        time_s: simulated seconds since reset (steps of 0.1 s).
        ego: the ego vehicle.
        vehicles: other vehicles (ego excluded).
        walkers: pedestrians.
        traffic_lights: traffic-light stop lines with states.
        stop_signs: stop-sign stop lines (state ``RED``).
        route: the ego's dense route (static, shared).
        map: static map geometry (static, shared).
        ego_collided_with: ids the backend itself reports in collision with the ego this step
            (a hint only; infractions are computed from exact geometry).
    """

    step: int
    time_s: float
    ego: EgoState
    vehicles: ActorBoxes
    walkers: ActorBoxes
    traffic_lights: StopLines
    stop_signs: StopLines
    route: Route
    map: MapGeometry
    ego_collided_with: tuple[str, ...] = ()
