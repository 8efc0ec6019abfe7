"""What the hazard queries answer: the light, stop sign or road users ahead of the ego."""

from __future__ import annotations

from dataclasses import dataclass

from found_rl.world import LightState


@dataclass(frozen=True)
class LightHazard:
    """The traffic light whose stop line the route crosses next.

    Attributes:
        light_id: id of the light.
        lane_id: incoming lane the crossed segment stops.
        state: its current state.
        distance_m: along the route from the ego's front bumper to the stop line; negative
            once the bumper is past the line (reported until the ego centre passes it).
        remaining_ratio: ``remaining_s / phase_s`` of the current state, or -1 if unknown.
        index: index of the crossed segment in ``snapshot.traffic_lights``.
    """

    light_id: str
    lane_id: str
    state: LightState
    distance_m: float
    remaining_ratio: float
    index: int = -1


@dataclass(frozen=True)
class StopSignHazard:
    """The stop-sign line the route crosses next (same distance convention as lights).

    Attributes:
        sign_id: id of the stop sign.
        lane_id: incoming lane the crossed segment stops.
        distance_m: along the route from the ego's front bumper to the line.
        index: index of the crossed segment in ``snapshot.stop_signs``.
    """

    sign_id: str
    lane_id: str
    distance_m: float
    index: int = -1


@dataclass(frozen=True)
class ActorHazard:
    """A vehicle or walker whose box overlaps the route corridor ahead.

    Attributes:
        index: index into ``snapshot.vehicles`` (or ``snapshot.walkers``).
        actor_id: its id.
        distance_m: gap along the route from the ego's front bumper to the nearest point of its
            box (negative when the box reaches back past the bumper).
        speed_along_route_mps: its velocity projected on the route direction at its position.
    """

    index: int
    actor_id: str
    distance_m: float
    speed_along_route_mps: float
