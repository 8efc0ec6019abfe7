"""The CaRL-style reward: route progress times soft-penalty factors, by hand."""

import dataclasses
import math

import pytest

from found_rl.events import Infraction, InfractionKind
from found_rl.infractions import InfractionReport
from found_rl.rewards import CarlConfig, Hazards, StepContext, carl_reward
from found_rl.routes.progress import RouteProgress
from found_rl.world import MapGeometry
from tests.scenes import EAST_LANE_Y, snapshot, straight_road

DELTA = 0.01  # route fraction gained in the step


def context(
    speed_mps: float = 5.0,
    previous_speed_mps: float | None = None,
    yaw_deg: float = 0.0,
    lateral_m: float = 0.0,
    hazards: Hazards | None = None,
    outside_lanes: bool = False,
    infractions: tuple[Infraction, ...] = (),
    terminated: bool = False,
    route_completed: bool = False,
    map_geometry: MapGeometry | None = None,
) -> StepContext:
    now = snapshot(1, (10.0, EAST_LANE_Y), speed_mps=speed_mps, yaw_deg=yaw_deg, map_geometry=map_geometry)
    before_speed = speed_mps if previous_speed_mps is None else previous_speed_mps
    before = snapshot(0, (9.5, EAST_LANE_Y), speed_mps=before_speed, map_geometry=map_geometry)
    progress = RouteProgress(10, 10.0, 0.1, DELTA, lateral_m, 0.0, lateral_m, 10.0)
    report = InfractionReport(infractions, False, outside_lanes, 0.0, 0.0, route_completed)
    return StepContext(now, before, progress, report, hazards or Hazards(), terminated)


def test_clean_progress_is_the_reward():
    reward = carl_reward(context())
    assert reward.total == pytest.approx(DELTA)


@pytest.mark.parametrize(
    "kwargs, factor, value",
    [
        ({"speed_mps": 8.33 + 2.23 / 2}, "speed", 0.5),
        ({"speed_mps": 20.0}, "speed", 0.0),
        ({"lateral_m": 0.875}, "centre", 0.5),
        ({"hazards": Hazards(leader_gap_m=5.0, leader_closing_mps=5.0)}, "ttc", 0.5),  # TTC 1 s
        ({"hazards": Hazards(leader_gap_m=5.0, leader_closing_mps=-1.0)}, "ttc", 1.0),  # opening
        ({"previous_speed_mps": 5.5, "speed_mps": 5.0}, "comfort", 0.5),  # -5 m/s^2
        ({"previous_speed_mps": 5.0, "speed_mps": 5.2}, "comfort", 1.0),  # +2 m/s^2
        ({"yaw_deg": 10.0}, "comfort", 0.5),  # 1.75 rad/s yaw rate
        # 0.6 rad/s yaw rate is within bounds, but at 8.3 m/s the lateral acceleration is
        # 4.98 m/s^2 > 4.89; at 8.0 m/s it is 4.8 m/s^2.
        ({"speed_mps": 8.3, "yaw_deg": math.degrees(0.06)}, "comfort", 0.5),
        ({"speed_mps": 8.0, "yaw_deg": math.degrees(0.06)}, "comfort", 1.0),
        ({"hazards": Hazards(leader_gap_m=4.0, leader_closing_mps=2.0)}, "ttc", 1.0),  # TTC exactly 2 s
        ({"hazards": Hazards(leader_gap_m=4.0, leader_closing_mps=0.0)}, "ttc", 1.0),  # not closing
        ({"outside_lanes": True}, "lanes", 0.0),
    ],
)
def test_soft_penalties_scale_progress(kwargs, factor, value):
    reward = carl_reward(context(**kwargs))
    assert reward.terms[factor] == pytest.approx(value)
    assert reward.total == pytest.approx(DELTA * value)


def test_terminal_reward_is_configurable_and_zero_by_default():
    crash = (Infraction(InfractionKind.COLLISION_VEHICLE, 1, (10.0, EAST_LANE_Y)),)
    assert carl_reward(context(infractions=crash, terminated=True)).terms["terminal"] == 0.0
    config = CarlConfig(terminal_reward=-1.0)
    assert carl_reward(context(infractions=crash, terminated=True), config).total == pytest.approx(DELTA - 1.0)


def test_factors_multiply():
    # Half over the speed tolerance (0.5) and half a lane off centre (0.5): 0.25 of the progress.
    reward = carl_reward(context(speed_mps=8.33 + 2.23 / 2, lateral_m=0.875))
    assert reward.total == pytest.approx(DELTA * 0.25)


def east_lane_map(**lane_fields) -> MapGeometry:
    """The test road with the route's lane ("east") rebuilt with ``lane_fields``."""
    road = straight_road()
    east = dataclasses.replace(road.lanes["east"], **lane_fields)
    return dataclasses.replace(road, map_id=f"carl-{lane_fields}", lanes={**road.lanes, "east": east})


@pytest.mark.parametrize(
    ("map_geometry", "lateral_m", "centre"),
    [
        (east_lane_map(is_junction=True), 0.875, 1.0),  # no centre penalty inside junctions
        (east_lane_map(width_m=5.0), 1.25, 0.5),  # half of a 5 m lane's 2.5 m half-width
        (east_lane_map(width_m=5.0), 3.0, 0.0),  # beyond the half-width: bottoms out
    ],
)
def test_centre_factor_uses_the_route_lane(map_geometry, lateral_m, centre):
    reward = carl_reward(context(lateral_m=lateral_m, map_geometry=map_geometry))
    assert reward.terms["centre"] == pytest.approx(centre)
    assert reward.total == pytest.approx(DELTA * centre)


def test_centre_factor_without_the_route_lane_uses_the_configured_half_width():
    road = straight_road()
    no_east = dataclasses.replace(road, map_id="carl-no-east", lanes={"west": road.lanes["west"]})
    config = CarlConfig(lane_half_width_m=3.5, centre_softener=0.5)
    reward = carl_reward(context(lateral_m=1.75, map_geometry=no_east), config)
    assert reward.terms["centre"] == pytest.approx(1.0 - 0.5 * 0.5)


def test_completing_the_route_earns_no_terminal_reward():
    config = CarlConfig(terminal_reward=-1.0)
    reward = carl_reward(context(terminated=True, route_completed=True), config)
    assert reward.terms["terminal"] == 0.0
    assert reward.total == pytest.approx(DELTA)
