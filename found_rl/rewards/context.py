"""What a reward function may look at for one step: pure data, no simulator.

The env assembles a :class:`StepContext` after each step; reward functions are pure
functions of it, so they can be checked by hand on made-up numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from found_rl.infractions import InfractionReport
from found_rl.route_progress import RouteProgress
from found_rl.sim.snapshot import WorldSnapshot


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
