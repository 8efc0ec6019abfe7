"""Infraction events and episode outcomes passed from the env to metrics and evaluation.

Kind values are the CARLA leaderboard's infraction keys, so results files read like the
leaderboard's own (ARCHITECTURE §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class InfractionKind(str, Enum):
    """Infraction types, valued by their CARLA leaderboard key."""

    COLLISION_PEDESTRIAN = "collisions_pedestrian"
    COLLISION_VEHICLE = "collisions_vehicle"
    COLLISION_LAYOUT = "collisions_layout"
    RED_LIGHT = "red_light"
    STOP_SIGN = "stop_infraction"
    OUTSIDE_ROUTE_LANES = "outside_route_lanes"
    ROUTE_DEVIATION = "route_dev"
    ROUTE_TIMEOUT = "route_timeout"
    VEHICLE_BLOCKED = "vehicle_blocked"


@dataclass(frozen=True)
class Infraction:
    """One infraction at one step.

    Attributes:
        kind: what happened.
        step: env step at which it was detected.
        xy: ``(x, y)`` ego location in the CARLA world frame, metres.
        actor_id: the other party (vehicle or walker id), if any.
        speed_mps: ego speed at the moment (collisions and red lights are scaled by it).
        detail: a human-readable sentence for results files.
    """

    kind: InfractionKind
    step: int
    xy: tuple[float, float]
    actor_id: str | None = None
    speed_mps: float = 0.0
    detail: str = ""


class EpisodeStatus(str, Enum):
    """How an episode ended, in the leaderboard's words."""

    COMPLETED = "Completed"
    FAILED_COLLISION = "Failed - Agent collided"
    FAILED_RED_LIGHT = "Failed - Agent ran a red light"
    FAILED_DEVIATION = "Failed - Agent deviated from the route"
    FAILED_BLOCKED = "Failed - Agent got blocked"
    FAILED_TIMEOUT = "Failed - Simulation timed out"
    RUNNING = "Running"
    TRUNCATED = "Truncated"


@dataclass(frozen=True)
class EpisodeSummary:
    """What the env reports in ``info["episode"]`` when an episode ends.

    Attributes:
        route_id: route driven.
        status: how it ended.
        route_completion: fraction of the route's length driven, in ``[0, 1]``.
        route_length_m: total route length.
        distance_m: distance the ego drove.
        outside_lane_m: distance driven outside the route's lanes.
        duration_s: simulated time.
        steps: env steps.
        infractions: every infraction of the episode, in order.
    """

    route_id: str
    status: EpisodeStatus
    route_completion: float
    route_length_m: float
    distance_m: float
    outside_lane_m: float
    duration_s: float
    steps: int
    infractions: tuple[Infraction, ...]
