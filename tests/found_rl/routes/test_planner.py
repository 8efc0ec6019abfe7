"""Dense route planning through the lane graph of a small signalised grid."""

import numpy as np
import pytest

from found_rl.actions import RoadOption
from found_rl.maps import build_network, read_network
from found_rl.routes import RoutePlanner, RouteSampling, RouteSpec
from found_rl.routes.generate import generate_routes, signalised_turns
from found_rl.scenario import parse_scenario


def planner_for(lanes: int) -> RoutePlanner:
    spec = {"type": "grid", "junctions": 3, "block_length_m": 70, "lanes": lanes}
    net = read_network(
        build_network(
            parse_scenario(
                {"map": {"generate": spec}, "routes": {"random_length_m": 50}}
            ).map
        )
    )
    return RoutePlanner.of_network(net)


@pytest.fixture(scope="module")
def one_lane() -> RoutePlanner:
    return planner_for(1)


@pytest.fixture(scope="module")
def two_lanes() -> RoutePlanner:
    return planner_for(2)


def lane_middle(planner: RoutePlanner, lane_id: str) -> np.ndarray:
    shape = planner.shape(lane_id)
    s = np.concatenate(
        [[0.0], np.cumsum(np.linalg.norm(np.diff(shape, axis=0), axis=1))]
    )
    mid = s[-1] / 2
    return planner.frame.to_carla_xy(
        np.array([np.interp(mid, s, shape[:, 0]), np.interp(mid, s, shape[:, 1])])
    )


def signalised_connection(planner: RoutePlanner, direction: str):
    for lane in planner.drivable_lanes:
        for connection in planner.drivable_connections(lane):
            four_way = len(connection.getJunction().getNeighboringNodes()) == 4
            if (
                connection.getDirection() == direction
                and four_way
                and connection.getTLSID()
            ):
                return connection
    raise LookupError(direction)


@pytest.mark.parametrize(
    ("direction", "command"),
    [("l", RoadOption.LEFT), ("r", RoadOption.RIGHT), ("s", RoadOption.STRAIGHT)],
)
def test_junction_turns_get_their_command(one_lane, direction, command):
    connection = signalised_connection(one_lane, direction)
    start, end = connection.getFromLane().getID(), connection.getToLane().getID()
    route = one_lane.plan(
        RouteSpec(
            "turn",
            "",
            np.stack([lane_middle(one_lane, start), lane_middle(one_lane, end)]),
        )
    )
    in_junction = np.array([lane.startswith(":") for lane in route.lane_ids])
    assert in_junction.any()
    assert set(route.commands[in_junction].tolist()) == {int(command)}
    assert set(route.commands[~in_junction].tolist()) == {int(RoadOption.LANEFOLLOW)}
    assert route.lane_ids[0] == start and route.lane_ids[-1] == end
    # Heading change over the route matches the turn (CARLA yaw grows clockwise = right).
    turn = (route.yaw_deg[-1] - route.yaw_deg[0] + 180.0) % 360.0 - 180.0
    assert turn == pytest.approx({"l": -90.0, "r": 90.0, "s": 0.0}[direction], abs=3.0)


def test_dense_route_is_evenly_spaced_and_starts_at_the_first_waypoint(one_lane):
    rng = np.random.default_rng(1)
    route = one_lane.random_route(rng, 300.0, "random-1")
    steps = np.linalg.norm(np.diff(route.xy, axis=0), axis=1)
    assert route.length_m == pytest.approx(300.0, abs=0.5)
    assert np.all(steps <= 1.0 + 1e-6) and np.median(steps) == pytest.approx(
        1.0, abs=0.05
    )
    assert (
        len(route.xy)
        == len(route.yaw_deg)
        == len(route.commands)
        == len(route.lane_ids)
    )
    # Yaw agrees with the direction of travel.
    direction = np.degrees(np.arctan2(np.diff(route.xy[:, 1]), np.diff(route.xy[:, 0])))
    difference = (direction - route.yaw_deg[:-1] + 180.0) % 360.0 - 180.0
    assert np.percentile(np.abs(difference), 95) < 10.0


def test_sparse_waypoints_plan_back_into_the_same_drive(one_lane):
    rng = np.random.default_rng(4)
    spans = one_lane.random_spans(rng, 400.0)
    wanted = one_lane.densify(spans, "x")
    picks = np.linspace(0, len(wanted.xy) - 1, 12).astype(int)
    planned = one_lane.plan(RouteSpec("x", "", wanted.xy[picks]))
    assert list(dict.fromkeys(planned.lane_ids)) == list(dict.fromkeys(wanted.lane_ids))
    assert planned.length_m == pytest.approx(wanted.length_m, abs=2.0)


def test_turning_left_from_the_right_lane_changes_lane_first(two_lanes):
    connection = signalised_connection(two_lanes, "l")
    from_edge = connection.getFromLane().getEdge()
    right_lane = next(lane for lane in from_edge.getLanes() if lane.allows("passenger"))
    assert right_lane is not connection.getFromLane()
    spec = RouteSpec(
        "lc",
        "",
        np.stack(
            [
                lane_middle(two_lanes, right_lane.getID()),
                lane_middle(two_lanes, connection.getToLane().getID()),
            ]
        ),
    )
    route = two_lanes.plan(spec)
    commands = route.commands.tolist()
    assert int(RoadOption.CHANGELANELEFT) in commands
    assert commands.index(int(RoadOption.CHANGELANELEFT)) < commands.index(
        int(RoadOption.LEFT)
    )


def test_off_network_waypoint_names_route_and_index(one_lane):
    good = lane_middle(one_lane, one_lane.drivable_lanes[0].getID())
    spec = RouteSpec("r42", "", np.stack([good, good + [5000.0, 0.0], good]))
    with pytest.raises(
        ValueError, match=r"route 'r42': waypoint 1 at \(.*\) is off the network"
    ):
        one_lane.plan(spec)


def test_generated_routes_turn_both_ways_at_lights(one_lane):
    routes = generate_routes(
        one_lane, np.random.default_rng(0), count=6, length_m=300.0
    )
    assert [r.route_id for r in routes] == [str(i) for i in range(6)]
    turns = set()
    for spec in routes:
        route = one_lane.plan(spec)
        assert route.length_m > 250.0
        turns |= {int(c) for c in route.commands}
    assert {int(RoadOption.LEFT), int(RoadOption.RIGHT)} <= turns


def test_generation_needs_signalised_junctions():
    spec = {
        "type": "grid",
        "junctions": 2,
        "block_length_m": 60,
        "traffic_lights": False,
    }
    net = read_network(
        build_network(
            parse_scenario(
                {"map": {"generate": spec}, "routes": {"random_length_m": 50}}
            ).map
        )
    )
    planner = RoutePlanner.of_network(net)
    assert (
        signalised_turns(planner, planner.random_spans(np.random.default_rng(0), 200.0))
        == set()
    )
    with pytest.raises(ValueError, match="signalised junctions"):
        generate_routes(
            planner, np.random.default_rng(0), count=2, length_m=150.0, max_tries=30
        )


def test_planned_routes_announce_a_turn_before_the_junction(one_lane):
    from found_rl.world import route_command

    connection = signalised_connection(one_lane, "l")
    start, end = connection.getFromLane().getID(), connection.getToLane().getID()
    spec = RouteSpec("turn", "", np.stack([lane_middle(one_lane, start), lane_middle(one_lane, end)]))
    route = one_lane.plan(spec)
    first_turn = int(np.flatnonzero(route.commands == int(RoadOption.LEFT))[0])
    assert (route.command_lookahead_m, route.command_lookahead_s) == (20.0, 3.0)
    assert route_command(route, first_turn - 15) == RoadOption.LEFT
    assert route_command(route, first_turn - 25) == RoadOption.LANEFOLLOW
    assert route_command(route, first_turn - 25, speed_mps=10.0) == RoadOption.LEFT
    late = RoutePlanner(one_lane.net, one_lane.frame, RouteSampling(command_lookahead_m=5.0, command_lookahead_s=0.0))
    assert route_command(late.plan(spec), first_turn - 15, speed_mps=10.0) == RoadOption.LANEFOLLOW


def test_neighboring_lanes_is_sumolibs_brute_force_search(two_lanes):
    """The same lanes, in the same order, at the same distances, as sumolib's own search."""
    import warnings

    rng = np.random.default_rng(0)
    (x0, y0, x1, y1) = two_lanes.net.getBoundary()
    points = rng.uniform([x0 - 10, y0 - 10], [x1 + 10, y1 + 10], (60, 2))
    found = 0
    for x, y in points:
        for radius in (0.5, 4.0, 30.0):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Module 'rtree' not available")
                expected = two_lanes.net.getNeighboringLanes(float(x), float(y), radius, includeJunctions=True)
            got = two_lanes.neighboring_lanes(float(x), float(y), radius)
            assert [(lane.getID(), d) for lane, d in got] == [(lane.getID(), d) for lane, d in expected]
            found += len(got)
    assert found > 100  # the points do reach lanes, junction lanes included
