"""The CaRL-style reward: route progress times soft-penalty factors, by hand."""

import pytest

from found_rl.events import Infraction, InfractionKind
from found_rl.infractions import InfractionReport
from found_rl.rewards import CarlConfig, Hazards, StepContext, carl_reward
from found_rl.route_progress import RouteProgress
from found_rl.testing import EAST_LANE_Y, snapshot

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
) -> StepContext:
    now = snapshot(1, (10.0, EAST_LANE_Y), speed_mps=speed_mps, yaw_deg=yaw_deg)
    before_speed = speed_mps if previous_speed_mps is None else previous_speed_mps
    before = snapshot(0, (9.5, EAST_LANE_Y), speed_mps=before_speed)
    progress = RouteProgress(10, 10.0, 0.1, DELTA, lateral_m, 0.0, lateral_m, 10.0)
    report = InfractionReport(infractions, False, outside_lanes, 0.0, 0.0, False)
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
