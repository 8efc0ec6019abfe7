"""route_command: a manoeuvre is announced a distance or a time before it starts."""

import numpy as np
import pytest

from found_rl.actions import RoadOption
from found_rl.world import Route, route_command

FOLLOW, LEFT, CHANGE = int(RoadOption.LANEFOLLOW), int(RoadOption.LEFT), int(RoadOption.CHANGELANERIGHT)


def route(lookahead_m: float = 20.0, lookahead_s: float = 3.0) -> Route:
    """100 m at 1 m spacing: a left turn on waypoints 60-69, a lane change on 90-92."""
    commands = np.full(101, FOLLOW, dtype=np.int8)
    commands[60:70] = LEFT
    commands[90:93] = CHANGE
    xy = np.stack([np.arange(101.0), np.zeros(101)], axis=1)
    lanes = ("a",) * 101
    return Route("r", xy, np.zeros(101), commands, lanes, 100.0, lookahead_m, lookahead_s)


@pytest.mark.parametrize(
    ("index", "speed_mps", "expected"),
    [
        (30, 0.0, FOLLOW),  # 30 m before the junction, standing
        (39, 0.0, FOLLOW),  # 21 m before
        (40, 0.0, LEFT),  # 20 m before: announced
        (30, 10.0, LEFT),  # 30 m before at 10 m/s: 3 s ahead
        (29, 10.0, FOLLOW),  # 31 m
        (65, 0.0, LEFT),  # inside the turn
        (70, 0.0, CHANGE),  # just after it, the lane change 20 m ahead is next
        (69, 0.0, LEFT),
        (95, 0.0, FOLLOW),  # nothing left ahead
        (-5, 0.0, FOLLOW),  # clipped into range
        (500, 0.0, FOLLOW),
    ],
)
def test_the_next_manoeuvre_is_announced_by_distance_or_time(index, speed_mps, expected):
    assert route_command(route(), index, speed_mps) == RoadOption(expected)


def test_without_look_ahead_the_command_is_the_waypoint_s_own():
    plain = route(0.0, 0.0)
    assert [route_command(plain, i, 20.0) for i in (59, 60, 69, 70)] == [
        RoadOption.LANEFOLLOW, RoadOption.LEFT, RoadOption.LEFT, RoadOption.LANEFOLLOW,
    ]
    assert route_command(route(5.0, 0.0), 55, 30.0) == RoadOption.LEFT
    assert route_command(route(5.0, 0.0), 54, 30.0) == RoadOption.LANEFOLLOW
