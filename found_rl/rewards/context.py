"""What a reward function may look at for one step: pure data, no simulator.

The env assembles a :class:`StepContext` after each step; reward functions are pure
functions of it, so they can be checked by hand on made-up numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from found_rl.hazards import ActorHazard, LightHazard, StopSignHazard
from found_rl.infractions import InfractionReport
from found_rl.routes.progress import RouteProgress
from found_rl.world import LightState, WorldSnapshot


@dataclass(frozen=True)
class Hazards:
    """Hazards ahead of the ego that slow it down (``None``: no such hazard).

    Distances are centre to centre (ego centre to actor centre, or to the middle of the stop
    line), as in Roach's reward.

    Attributes:
        vehicle_m: distance to the leading vehicle on the route.
        walker_m: distance to the nearest walker in the ego's path.
        light_m: distance to the stop line of an affecting red or yellow light.
        stop_sign_m: distance to the stop line of a stop sign the ego has not stopped at yet.
        leader_gap_m: bumper-to-bumper gap to the leading vehicle (for time to collision).
        leader_closing_mps: ego speed minus the leader's speed along the route (> 0: closing).
    """

    vehicle_m: float | None = None
    walker_m: float | None = None
    light_m: float | None = None
    stop_sign_m: float | None = None
    leader_gap_m: float | None = None
    leader_closing_mps: float | None = None


def reward_hazards(
    snapshot: WorldSnapshot,
    light: LightHazard | None,
    stop_sign: StopSignHazard | None,
    leader: ActorHazard | None,
    walkers: Sequence[ActorHazard],
) -> Hazards:
    """The reward's view of the hazards :mod:`found_rl.hazards` found ahead.

    Args:
        snapshot: the world now.
        light: the affecting traffic light, if any (only red or yellow slow the ego down).
        stop_sign: the next stop sign the ego has not stopped at yet, if any.
        leader: the leading vehicle on the route, if any.
        walkers: walkers in the ego's path.
    """
    if light is None and stop_sign is None and leader is None and not walkers:
        return _NO_HAZARDS  # the usual step: nothing ahead (Hazards is frozen, so one serves all)
    ego_x, ego_y = snapshot.ego.xy.tolist()

    def centre_distance_m(xy: np.ndarray) -> float:
        x, y = xy.tolist()
        return math.hypot(x - ego_x, y - ego_y)

    light_m = None
    if light is not None and light.state in (LightState.RED, LightState.YELLOW) and light.index >= 0:
        light_m = centre_distance_m(_line_middle(snapshot.traffic_lights.segments, light.index))
    sign_m = None
    if stop_sign is not None and stop_sign.index >= 0:
        sign_m = centre_distance_m(_line_middle(snapshot.stop_signs.segments, stop_sign.index))
    if leader is None:
        vehicle_m = gap_m = closing_mps = None
    else:
        vehicle_m = centre_distance_m(snapshot.vehicles.xy[leader.index])
        gap_m = max(leader.distance_m, 0.0)
        closing_mps = snapshot.ego.forward_speed_mps - leader.speed_along_route_mps
    return Hazards(
        vehicle_m=vehicle_m,
        walker_m=min((centre_distance_m(snapshot.walkers.xy[w.index]) for w in walkers), default=None),
        light_m=light_m,
        stop_sign_m=sign_m,
        leader_gap_m=gap_m,
        leader_closing_mps=closing_mps,
    )


_NO_HAZARDS = Hazards()


def _line_middle(segments: np.ndarray, index: int) -> np.ndarray:
    """Middle ``(2,)`` of stop line ``index``."""
    return segments[index].mean(axis=0)


@dataclass(frozen=True)
class StepContext:
    """Everything about one env step a reward may use.

    Attributes:
        snapshot: the world after the step (``snapshot.ego.steer`` is the steer applied).
        previous: the world before the step.
        progress: the ego's route progress after the step.
        report: infractions detected in this step.
        hazards: hazards ahead after the step.
        terminated: the episode ends in this step (``report.is_terminal`` unless the env
            chose not to end on route completion).
    """

    snapshot: WorldSnapshot
    previous: WorldSnapshot
    progress: RouteProgress
    report: InfractionReport
    hazards: Hazards
    terminated: bool


class Reward(NamedTuple):
    """A step's reward and its named terms (for logging; ``sum(terms) == total`` for valeo).

    Attributes:
        total: the scalar reward.
        terms: name -> value of each term or factor.
    """

    total: float
    terms: dict[str, float]
