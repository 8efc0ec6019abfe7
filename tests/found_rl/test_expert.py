"""Expert behaviour on hand-built situations: steering toward the route, stopping for hazards."""

import dataclasses
import math

import numpy as np
import pytest

from found_rl.actions import RoadOption
from found_rl.expert.control import ExpertConfig, expert_action
from found_rl.expert.observation import ExpertObservation

CONFIG = ExpertConfig()


def straight(length_m: float = 48.0, lateral_m: float = 0.0) -> tuple[tuple[float, float], ...]:
    return tuple((float(x), lateral_m) for x in np.arange(0.0, length_m, 2.0))


def arc(radius_m: float, turn_right: bool, length_m: float = 40.0) -> tuple[tuple[float, float], ...]:
    """Points on a circle tangent to the ego's heading, turning right (+y) or left."""
    sign = 1.0 if turn_right else -1.0
    angles = np.arange(0.0, length_m, 2.0) / radius_m
    return tuple((radius_m * math.sin(a), sign * radius_m * (1 - math.cos(a))) for a in angles)


def observe(speed: float = 6.0, route=None, **hazards) -> ExpertObservation:
    return ExpertObservation(
        speed_mps=speed, command=int(RoadOption.LANEFOLLOW), route_ego=route or straight(), **hazards
    )


def test_free_straight_road_accelerates_from_rest_without_steering():
    acc, steer = expert_action(observe(speed=0.0), CONFIG)
    assert acc > 0.5
    assert abs(steer) < 1e-6


def test_cruise_speed_is_held_not_exceeded():
    assert expert_action(observe(speed=CONFIG.cruise_speed_mps + 1.0), CONFIG)[0] < 0.0
    assert 0.0 <= expert_action(observe(speed=CONFIG.cruise_speed_mps), CONFIG)[0] < 0.3


@pytest.mark.parametrize(("turn_right", "sign"), [(True, 1.0), (False, -1.0)])
def test_steers_toward_a_curving_route(turn_right, sign):
    _, steer = expert_action(observe(route=arc(12.0, turn_right)), CONFIG)
    assert sign * steer > 0.05


@pytest.mark.parametrize(("offset_m", "sign"), [(1.5, 1.0), (-1.5, -1.0)])
def test_steers_back_onto_a_route_beside_the_ego(offset_m, sign):
    _, steer = expert_action(observe(route=straight(lateral_m=offset_m)), CONFIG)
    assert sign * steer > 0.05


def test_slows_before_a_sharp_corner():
    acc, _ = expert_action(
        observe(speed=7.0, route=straight(4.0) + tuple((4.0 + x, y) for x, y in arc(6.0, True)[1:])), CONFIG
    )
    assert acc < 0.0


@pytest.mark.parametrize("state", [1, 2])
def test_brakes_for_red_and_yellow_light_it_can_stop_for(state):
    acc, _ = expert_action(observe(speed=6.0, light_state=state, light_distance_m=8.0), CONFIG)
    assert acc < 0.0


def test_holds_brake_while_waiting_at_a_red_light():
    acc, _ = expert_action(observe(speed=0.0, light_state=1, light_distance_m=2.2), CONFIG)
    assert acc < 0.0


def test_ignores_green_light_and_passes_yellow_it_cannot_stop_for():
    assert expert_action(observe(speed=5.0, light_state=3, light_distance_m=5.0), CONFIG)[0] > 0.0
    assert expert_action(observe(speed=7.0, light_state=2, light_distance_m=1.0), CONFIG)[0] >= 0.0


def test_red_light_behind_the_stop_line_does_not_stop_the_car_in_the_junction():
    assert expert_action(observe(speed=5.0, light_state=1, light_distance_m=-3.0), CONFIG)[0] > 0.0


def test_follows_a_slow_leader_and_stops_behind_a_stopped_one():
    assert expert_action(observe(speed=6.0, leader_gap_m=6.0, leader_speed_mps=0.0), CONFIG)[0] < -0.5
    assert expert_action(observe(speed=0.0, leader_gap_m=4.0, leader_speed_mps=0.0), CONFIG)[0] < 0.0
    assert expert_action(observe(speed=5.0, leader_gap_m=40.0, leader_speed_mps=7.0), CONFIG)[0] > 0.0


def test_stops_for_a_walker_in_the_path_and_for_a_stop_sign():
    assert expert_action(observe(speed=5.0, walker_distance_m=8.0), CONFIG)[0] < -0.5
    assert expert_action(observe(speed=6.0, stop_sign_distance_m=8.0), CONFIG)[0] < 0.0


def test_stops_at_the_end_of_the_route():
    assert expert_action(observe(speed=6.0, remaining_route_m=3.0), CONFIG)[0] < 0.0


def test_observation_json_round_trip_and_errors():
    observation = observe(speed=3.0, leader_gap_m=10.0, leader_speed_mps=2.0, remaining_route_m=50.0)
    assert ExpertObservation.from_dict(observation.to_dict()) == observation
    infinite = observe()
    assert ExpertObservation.from_dict(infinite.to_dict()) == infinite
    with pytest.raises(ValueError, match="unknown fields"):
        ExpertObservation.from_dict({**observation.to_dict(), "sped": 1.0})
    with pytest.raises(ValueError, match="speed_mps"):
        ExpertObservation.from_dict({**observation.to_dict(), "speed_mps": "fast"})
    with pytest.raises(ValueError, match="route_ego"):
        ExpertObservation.from_dict({**observation.to_dict(), "route_ego": [[1.0]]})


# --- the whole driver on hand-built snapshots (tests.scenes's straight road) ---------

from found_rl.expert import ExpertDriver, ObserverConfig  # noqa: E402
from found_rl.world import LightState  # noqa: E402
from tests import scenes  # noqa: E402

LANE_Y = scenes.EAST_LANE_Y


def drive(snapshot) -> np.ndarray:
    return ExpertDriver().act(snapshot)


def test_driver_accelerates_on_a_free_road():
    acc, steer = drive(scenes.snapshot(0, (5.0, LANE_Y), speed_mps=2.0))
    assert acc > 0.3 and abs(steer) < 0.02


@pytest.mark.parametrize(("ego_y", "sign"), [(LANE_Y - 1.0, 1.0), (LANE_Y + 1.0, -1.0)])
def test_driver_steers_back_toward_the_route(ego_y, sign):
    # CARLA frame: y south. Left of the route (smaller y) -> steer right (positive).
    _, steer = drive(scenes.snapshot(0, (5.0, ego_y), speed_mps=5.0))
    assert sign * steer > 0.05


def test_driver_stops_for_a_red_light_and_goes_on_green():
    red = scenes.snapshot(
        0, (20.0, LANE_Y), speed_mps=6.0, traffic_lights=scenes.stop_line(30.0, LightState.RED)
    )
    green = scenes.snapshot(
        0, (20.0, LANE_Y), speed_mps=6.0, traffic_lights=scenes.stop_line(30.0, LightState.GREEN)
    )
    assert drive(red)[0] < 0.0
    assert drive(green)[0] > 0.0


def test_driver_brakes_behind_a_stopped_leader():
    leader = scenes.boxes([(20.0, LANE_Y)])
    assert drive(scenes.snapshot(0, (8.0, LANE_Y), speed_mps=6.0, vehicles=leader))[0] < -0.5


def test_driver_ignores_oncoming_traffic_in_the_other_lane():
    oncoming = scenes.boxes([(20.0, -LANE_Y)], yaw_deg=[180.0], velocity_xy=[(-6.0, 0.0)])
    assert drive(scenes.snapshot(0, (8.0, LANE_Y), speed_mps=5.0, vehicles=oncoming))[0] > 0.0


def test_driver_stops_for_a_walker_crossing_ahead():
    walker = scenes.boxes([(17.0, LANE_Y)], half_extent=(0.3, 0.3), velocity_xy=[(0.0, -1.0)])
    assert drive(scenes.snapshot(0, (8.0, LANE_Y), speed_mps=5.0, walkers=walker))[0] < -0.5


def test_driver_stops_at_a_stop_sign_once_then_goes():
    sign = scenes.stop_line(20.0, LightState.RED, light_id="stop0")
    driver, route = ExpertDriver(), scenes.straight_route()
    approaching = scenes.snapshot(0, (12.0, LANE_Y), speed_mps=5.0, stop_signs=sign, route=route)
    assert driver.act(approaching)[0] < 0.0
    stopped = scenes.snapshot(1, (16.0, LANE_Y), speed_mps=0.0, stop_signs=sign, route=route)
    driver.act(stopped)  # the stop is served here
    assert (
        driver.act(scenes.snapshot(2, (16.0, LANE_Y), speed_mps=0.0, stop_signs=sign, route=route))[0] > 0.0
    )


PREDICTING = ObserverConfig(predict_crossing=True)
BLIND = ObserverConfig(predict_crossing=False, yield_at_unsignalised_junctions=False)


def test_predicting_driver_brakes_for_a_car_about_to_cut_across_its_path():
    # A car 6 m to the left (north), driving south at 6 m/s: in 1 s it is in the ego's lane.
    crossing = scenes.boxes([(18.0, LANE_Y - 6.0)], yaw_deg=[90.0], velocity_xy=[(0.0, 6.0)])
    scene = scenes.snapshot(0, (8.0, LANE_Y), speed_mps=5.0, vehicles=crossing)
    assert ExpertDriver(observer_config=PREDICTING).act(scene)[0] < 0.0
    assert ExpertDriver().act(scene)[0] < 0.0  # prediction is on by default
    assert ExpertDriver(observer_config=BLIND).act(scene)[0] > 0.0  # and can be switched off


def test_a_car_that_reports_speed_but_never_moves_is_not_predicted_to_cut_in():
    ghost = scenes.boxes([(18.0, LANE_Y - 6.0)], yaw_deg=[90.0], velocity_xy=[(0.0, 6.0)])
    driver, route = ExpertDriver(observer_config=PREDICTING), scenes.straight_route()
    driver.act(scenes.snapshot(0, (8.0, LANE_Y), speed_mps=5.0, vehicles=ghost, route=route))
    later = scenes.snapshot(1, (8.5, LANE_Y), speed_mps=5.0, vehicles=ghost, route=route)
    assert driver.act(later)[0] > 0.0


def test_yielding_driver_gives_way_at_a_junction_without_lights():
    base = scenes.straight_route()
    # Waypoints from x = 20 m on lie on a junction-internal lane (SUMO ids start with ':').
    lane_ids = tuple(":J0_0_0" if x >= 20.0 else "east" for x in base.xy[:, 0])
    route = dataclasses.replace(base, lane_ids=lane_ids)
    crossing = scenes.boxes([(22.0, LANE_Y - 12.0)], yaw_deg=[90.0], velocity_xy=[(0.0, 6.0)])
    scene = scenes.snapshot(0, (10.0, LANE_Y), speed_mps=5.0, vehicles=crossing, route=route)
    yielding = ExpertDriver(observer_config=ObserverConfig(yield_at_unsignalised_junctions=True))
    assert yielding.act(scene)[0] < 0.0
    assert yielding.last_observation.yield_distance_m == pytest.approx(
        20.0 - 10.0 - scenes.EGO_HALF_EXTENT[0]
    )
    assert ExpertDriver().act(scene)[0] < 0.0  # yielding is on by default
    assert ExpertDriver(observer_config=BLIND).act(scene)[0] > 0.0  # and can be switched off
