"""The lane-graph route planner on hand-built lanes (known lengths, turns and lane changes)."""

from __future__ import annotations

import numpy as np
import pytest

from found_rl.actions import RoadOption
from found_rl.routes.leaderboard import RouteSpec
from found_rl.routes.town_planner import TownRoutePlanner
from found_rl.world import Lane, MapGeometry


def line(a, b, n: int = 21) -> np.ndarray:
    return np.linspace(a, b, n, dtype=np.float64)


def arc(centre, radius, start_deg, end_deg, n: int = 19) -> np.ndarray:
    angles = np.radians(np.linspace(start_deg, end_deg, n))
    return np.column_stack([centre[0] + radius * np.cos(angles), centre[1] + radius * np.sin(angles)])


def town() -> MapGeometry:
    """Two eastbound lanes (y = 0 is the driver's left of y = 3.5 in CARLA's y-south frame) up
    to x = 50, then a junction at x = 50..60 going straight, right (south, +y) or left (north)."""
    lanes = {
        "in_left": Lane(
            "in_left", line((0, 0), (50, 0)), 3.5, successors=("straight", "left"), right_neighbor="in_right"
        ),
        "in_right": Lane("in_right", line((0, 3.5), (50, 3.5)), 3.5, successors=("right",), left_neighbor="in_left"),
        "straight": Lane("straight", line((50, 0), (60, 0)), 3.5, is_junction=True, successors=("out_east",)),
        # Clockwise seen from above (east → south) is a right turn in CARLA's frame.
        "right": Lane("right", arc((50, 13.5), 10, -90, 0), 3.5, is_junction=True, successors=("out_south",)),
        "left": Lane("left", arc((50, -10), 10, 90, 0), 3.5, is_junction=True, successors=("out_north",)),
        "out_east": Lane("out_east", line((60, 0), (100, 0)), 3.5),
        "out_south": Lane("out_south", line((60, 13.5), (60, 60)), 3.5),
        "out_north": Lane("out_north", line((60, -10), (60, -60)), 3.5),
    }  # fmt: skip
    return MapGeometry("hand", (), (), (), lanes=lanes)


def spec(*points, route_id="r") -> RouteSpec:
    return RouteSpec(route_id, "", np.asarray(points, dtype=np.float64))


@pytest.mark.parametrize(
    ("end", "turn"),
    [((80, 0), RoadOption.STRAIGHT), ((60, 40), RoadOption.RIGHT), ((60, -40), RoadOption.LEFT)],
)
def test_junction_lanes_carry_the_turn(end, turn):
    route = TownRoutePlanner(town()).plan(spec((10, 0), end))
    junction = [c for c, lane in zip(route.commands.tolist(), route.lane_ids) if lane in ("straight", "right", "left")]
    assert junction and set(junction) == {turn}
    np.testing.assert_allclose(route.xy[[0, -1]], [(10, 0), end], atol=1e-6)


def test_lane_change_to_reach_a_turn_is_labelled_and_happens_halfway():
    # Start in the left lane; the right turn leaves from the right lane.
    route = TownRoutePlanner(town()).plan(spec((10, 0), (60, 40)))
    lanes = list(dict.fromkeys(route.lane_ids))
    assert lanes == ["in_left", "in_right", "right", "out_south"]
    changed = route.commands[np.asarray(route.lane_ids) == "in_right"]
    assert set(changed.tolist()) == {RoadOption.CHANGELANERIGHT}
    first_right = route.lane_ids.index("in_right")
    assert route.xy[first_right, 0] == pytest.approx(30.0, abs=1.5)  # halfway along 10..50
    assert route.length_m == pytest.approx(40 + np.hypot(0, 3.5) + np.pi * 5 + 26.5, rel=0.05)


def test_straight_route_length_and_spacing():
    route = TownRoutePlanner(town()).plan(spec((10, 0), (80, 0)))
    assert route.length_m == pytest.approx(70.0)
    assert np.diff(route.xy[:, 0]).max() <= 1.0 + 1e-9 and set(route.lane_ids) == {"in_left", "straight", "out_east"}


def test_off_map_and_unreachable_waypoints_are_named():
    planner = TownRoutePlanner(town())
    with pytest.raises(ValueError, match=r"route 'x': waypoint 1 at \(30\.0, 20\.0\) is off the town's map"):
        planner.plan(spec((10, 0), (30, 20), route_id="x"))
    with pytest.raises(ValueError, match=r"route 'y': no drivable path from waypoint 0 to waypoint 1"):
        planner.plan(spec((80, 0), (10, 0), route_id="y"))  # nothing leads back west


def test_random_routes_have_the_asked_length():
    planner = TownRoutePlanner(town())
    for seed in range(5):
        route = planner.random_route(np.random.default_rng(seed), 40.0, f"random-{seed}")
        assert route.length_m == pytest.approx(40.0, abs=0.5)


def test_a_two_arm_junction_is_a_bend_not_a_turn():
    lanes = {
        "a": Lane("a", line((0, 0), (40, 0)), 3.5, successors=("bend",)),
        "bend": Lane("bend", arc((40, 10), 10, -90, 0), 3.5, is_junction=True, successors=("b",)),
        "b": Lane("b", line((50, 10), (50, 50)), 3.5),
    }
    route = TownRoutePlanner(MapGeometry("bend", (), (), (), lanes=lanes)).plan(spec((5, 0), (50, 40)))
    assert set(route.commands.tolist()) == {RoadOption.LANEFOLLOW}
