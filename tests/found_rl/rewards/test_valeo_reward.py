"""Roach's valeo reward, term by term, on numbers worked out by hand."""

import math

import pytest

from found_rl.events import Infraction, InfractionKind
from found_rl.hazards import ActorHazard, LightHazard
from found_rl.infractions import InfractionReport
from found_rl.rewards import Hazards, StepContext, reward_hazards, valeo_reward
from found_rl.routes.progress import RouteProgress
from found_rl.world import LightState
from tests.scenes import EAST_LANE_Y, boxes, snapshot, stop_line


def context(
    speed_mps: float = 6.0,
    lateral_m: float = 0.0,
    heading_error_rad: float = 0.0,
    steer: float = 0.0,
    previous_steer: float = 0.0,
    hazards: Hazards | None = None,
    infractions: tuple[Infraction, ...] = (),
    terminated: bool = False,
    route_completed: bool = False,
) -> StepContext:
    now = snapshot(1, (10.0, EAST_LANE_Y), speed_mps=speed_mps, steer=steer)
    before = snapshot(0, (9.4, EAST_LANE_Y), speed_mps=speed_mps, steer=previous_steer)
    progress = RouteProgress(10, 10.0, 0.1, 0.006, lateral_m, heading_error_rad, lateral_m, 10.0)
    report = InfractionReport(infractions, False, False, 0.0, 0.0, route_completed)
    return StepContext(now, before, progress, report, hazards or Hazards(), terminated)


def crash(kind: InfractionKind) -> tuple[Infraction, ...]:
    return (Infraction(kind, 1, (10.0, EAST_LANE_Y), speed_mps=4.0),)


def test_perfect_driving_earns_one():
    reward = valeo_reward(context())
    assert reward.total == pytest.approx(1.0)
    assert reward.terms == {"speed": 1.0, "position": 0.0, "rotation": 0.0, "action": 0.0, "terminal": 0.0}


@pytest.mark.parametrize(
    "kwargs, term, value",
    [
        ({"speed_mps": 3.0}, "speed", 0.5),
        ({"speed_mps": 9.0}, "speed", 0.5),  # no extra penalty above v_max
        ({"lateral_m": 1.0}, "position", -0.5),
        ({"heading_error_rad": -math.pi / 6}, "rotation", -math.pi / 6),
        ({"steer": 0.3, "previous_steer": 0.28}, "action", -0.1),
        ({"steer": 0.3, "previous_steer": 0.295}, "action", 0.0),
    ],
)
def test_single_terms(kwargs, term, value):
    reward = valeo_reward(context(**kwargs))
    assert reward.terms[term] == pytest.approx(value)
    assert reward.total == pytest.approx(sum(reward.terms.values()))


@pytest.mark.parametrize(
    "hazards, desired_mps",
    [
        (Hazards(vehicle_m=10.5), 3.0),  # 6 * clip(10.5 - 8, 0, 5) / 5
        (Hazards(vehicle_m=20.0), 6.0),
        (Hazards(walker_m=7.0), 1.2),  # 6 * (7 - 6) / 5
        (Hazards(light_m=4.0), 0.0),
        (Hazards(stop_sign_m=8.0), 3.6),
        (Hazards(vehicle_m=10.5, light_m=9.0), 3.0),  # the slowest hazard wins
        (Hazards(light_m=7.5), 3.0),  # 6 * (7.5 - 5) / 5: the light's d0 is 5 m
        (Hazards(stop_sign_m=5.5), 0.6),  # 6 * (5.5 - 5) / 5
        (Hazards(walker_m=13.0), 6.0),  # past d0 + 5 m the ramp is flat at v_max
    ],
)
def test_hazards_scale_the_desired_speed(hazards, desired_mps):
    reward = valeo_reward(context(speed_mps=desired_mps, hazards=hazards))
    assert reward.terms["speed"] == pytest.approx(1.0)
    slower = valeo_reward(context(speed_mps=0.0, hazards=hazards))
    assert slower.terms["speed"] == pytest.approx(1.0 - desired_mps / 6.0)


@pytest.mark.parametrize(
    "kind, terminal",
    [
        (InfractionKind.COLLISION_VEHICLE, -5.0),
        (InfractionKind.COLLISION_PEDESTRIAN, -5.0),
        (InfractionKind.RED_LIGHT, -5.0),
        (InfractionKind.COLLISION_LAYOUT, -5.0),  # leaving the road is a collision in Roach
        (InfractionKind.VEHICLE_BLOCKED, -1.0),
        (InfractionKind.ROUTE_DEVIATION, -1.0),
    ],
)
def test_terminal_penalty(kind, terminal):
    # Ego at 4 m/s: collisions and red lights cost -1 - 4.
    reward = valeo_reward(context(speed_mps=4.0, infractions=crash(kind), terminated=True))
    assert reward.terms["terminal"] == pytest.approx(terminal)


def test_completing_the_route_is_not_penalised():
    reward = valeo_reward(context(terminated=True, route_completed=True))
    assert reward.terms["terminal"] == 0.0


def test_reward_hazards_are_centre_distances_as_in_roach():
    # Ego centre at (10, 1.75); a leader centred 12 m ahead with a 5 m bumper gap, a red stop
    # line 9 m ahead, a walker 3 m ahead and 4 m to the side.
    scene = snapshot(
        0,
        (10.0, EAST_LANE_Y),
        speed_mps=5.0,
        vehicles=boxes([(22.0, EAST_LANE_Y)], velocity_xy=[(3.0, 0.0)]),
        walkers=boxes([(13.0, EAST_LANE_Y + 4.0)], half_extent=(0.3, 0.3)),
        traffic_lights=stop_line(19.0, LightState.RED),
    )
    light = LightHazard("light0", "east", LightState.RED, 6.6, 0.5, index=0)
    leader = ActorHazard(0, "actor0", 5.2, 3.0)
    walker = ActorHazard(0, "actor0", 0.6, 0.0)
    hazards = reward_hazards(scene, light, None, leader, [walker])
    assert hazards.vehicle_m == pytest.approx(12.0)
    assert hazards.light_m == pytest.approx(9.0)
    assert hazards.walker_m == pytest.approx(5.0)
    assert hazards.leader_gap_m == pytest.approx(5.2)
    assert hazards.leader_closing_mps == pytest.approx(2.0)
    assert hazards.stop_sign_m is None
    green = LightHazard("light0", "east", LightState.GREEN, 6.6, 0.5, index=0)
    assert reward_hazards(scene, green, None, None, []).light_m is None


def test_steer_change_of_exactly_the_threshold_is_free():
    # Roach penalises a change of *more than* 0.01; 0.01 - 0.0 is exactly 0.01 in floats.
    reward = valeo_reward(context(steer=0.01, previous_steer=0.0))
    assert reward.terms["action"] == 0.0
    assert valeo_reward(context(steer=-0.011, previous_steer=0.0)).terms["action"] == pytest.approx(-0.1)


def test_terminal_infraction_in_a_step_that_does_not_end_costs_nothing():
    reward = valeo_reward(context(speed_mps=4.0, infractions=crash(InfractionKind.COLLISION_VEHICLE)))
    assert reward.terms["terminal"] == 0.0


def test_speed_debuff_is_paid_once_and_stop_signs_alone_do_not_end_the_episode():
    # A stop-sign run and a collision in one step: -1 - 4 m/s, not -1 - 2 * 4.
    both = crash(InfractionKind.COLLISION_VEHICLE) + crash(InfractionKind.STOP_SIGN)
    assert valeo_reward(context(speed_mps=4.0, infractions=both, terminated=True)).terms["terminal"] == -5.0
    # The route completed in the step the ego ran a stop sign: no terminal penalty at all.
    sign = crash(InfractionKind.STOP_SIGN)
    reward = valeo_reward(context(speed_mps=4.0, infractions=sign, terminated=True, route_completed=True))
    assert reward.terms["terminal"] == 0.0


def test_terminal_speed_debuff_is_the_ego_speed_now():
    # The infraction records 4 m/s; the ego is at 2.5 m/s after the step: -1 - 2.5.
    reward = valeo_reward(context(speed_mps=2.5, infractions=crash(InfractionKind.RED_LIGHT), terminated=True))
    assert reward.terms["terminal"] == pytest.approx(-3.5)
