"""Every infraction rule on a scripted scene whose answer is known by hand.

The road is straight (``tests/scenes.py``): the ego drives east in the lane at y = +1.75;
the road spans y in [-3.5, 3.5]; the ego box is 4.8 m x 2.0 m.
"""

from collections.abc import Sequence

import numpy as np
import pytest
import shapely

from found_rl.events import InfractionKind
from found_rl.infractions import (
    InfractionConfig,
    InfractionMonitor,
    InfractionReport,
    box_corners,
    boxes_overlap,
    crossed_stop_lines,
    ego_corners,
    segments_cross,
)
from found_rl.routes.progress import RouteTracker
from found_rl.world import ActorBoxes, LightState, StopLines, WorldSnapshot
from tests.scenes import EAST_LANE_Y, boxes, snapshot, stop_line

Y = EAST_LANE_Y


def drive(scenes: Sequence[WorldSnapshot], config: InfractionConfig | None = None) -> list[InfractionReport]:
    """Run the monitor over ``scenes`` (the first is the reset); one report per later scene."""
    monitor = InfractionMonitor(config)
    tracker = RouteTracker(scenes[0].route, scenes[0].ego.xy, scenes[0].ego.yaw_deg)
    monitor.reset(scenes[0])
    reports = []
    for scene in scenes[1:]:
        reports.append(monitor.step(scene, tracker.update(scene.ego.xy, scene.ego.yaw_deg)))
    return reports


def kinds(report: InfractionReport) -> list[InfractionKind]:
    return [i.kind for i in report.infractions]


# ------------------------------------------------------------------------------- geometry


def test_box_corners_of_a_car_heading_south():
    corners = box_corners(np.array([[0.0, 0.0]]), np.array([90.0]), np.array([[2.0, 1.0]]))[0]
    # Heading south (+y): front-left is east (+x) of the nose in CARLA's left-handed frame.
    np.testing.assert_allclose(corners, [[1, 2], [-1, 2], [-1, -2], [1, -2]], atol=1e-12)


@pytest.mark.parametrize(
    "xy, yaw_deg, overlaps",
    [
        ((4.7, 0.0), 0.0, True),  # nose to tail, 0.1 m overlap
        ((4.9, 0.0), 0.0, False),  # 0.1 m apart
        ((0.0, 1.9), 0.0, True),  # side by side, 0.1 m overlap
        # A box at -45 deg whose long side faces the ego's front-right corner (2.4, 1.0) from
        # 1.1 m / 0.9 m along the diagonal: only the other box's own axis separates them.
        ((2.4 + 1.1 / 2**0.5, 1.0 + 1.1 / 2**0.5), -45.0, False),
        ((2.4 + 0.9 / 2**0.5, 1.0 + 0.9 / 2**0.5), -45.0, True),
        ((0.0, 0.0), 90.0, True),  # crossing at the centre
    ],
)
def test_oriented_box_overlap(xy, yaw_deg, overlaps):
    other = boxes([xy], [yaw_deg], half_extent=(2.4, 1.0))
    result = boxes_overlap(np.zeros(2), 0.0, np.array([2.4, 1.0]), other)
    assert result.tolist() == [overlaps]


@pytest.mark.parametrize("x_m, overlaps", [(16.0, True), (17.5, False)])
def test_long_boxes_far_away_are_still_checked(x_m, overlaps):
    # A 30 m trailer whose centre is beyond the usual quick-reject reach.
    other = boxes([(x_m, 0.0)], half_extent=(15.0, 1.3))
    result = boxes_overlap(np.zeros(2), 0.0, np.array([2.4, 1.0]), other)
    assert result.tolist() == [overlaps]


def test_box_overlap_agrees_with_shapely_polygons():
    rng = np.random.default_rng(0)
    centres = rng.uniform(-6.0, 6.0, size=(500, 2))
    yaws = rng.uniform(-180.0, 180.0, size=500)
    half = rng.uniform(0.2, 2.5, size=(500, 2))
    others = ActorBoxes(tuple(map(str, range(500))), centres, yaws, half, np.zeros((500, 2)))
    ego_half = np.array([2.4, 1.0])
    ego = shapely.Polygon(box_corners(np.zeros((1, 2)), np.zeros(1), ego_half[None])[0])
    polygons = [shapely.Polygon(c) for c in box_corners(centres, yaws, half)]
    expected = [ego.intersection(p).area > 1e-9 for p in polygons]
    assert boxes_overlap(np.zeros(2), 0.0, ego_half, others).tolist() == expected


def test_ego_corners_match_box_corners():
    scene = snapshot(0, (3.0, -2.0), yaw_deg=33.0)
    expected = box_corners(scene.ego.xy[None], np.array([33.0]), scene.ego.half_extent[None])[0]
    np.testing.assert_allclose(ego_corners(scene.ego), expected)


def test_segments_cross_counts_touching_but_not_near_misses():
    lines = np.array([[[1.0, -1.0], [1.0, 1.0]], [[1.0, 2.0], [1.0, 3.0]], [[2.0, -1.0], [2.0, 1.0]]])
    assert segments_cross(np.array([0.0, 0.0]), np.array([1.0, 0.0]), lines).tolist() == [True, False, False]


# ----------------------------------------------------------------------------- collisions


def test_vehicle_driving_into_the_ego_is_one_collision():
    scenes = [
        snapshot(step, (10.0, Y), vehicles=boxes([(x, Y)], [180.0], velocity_xy=[(-5.0, 0.0)], prefix="car"))
        for step, x in enumerate([20.0, 15.0, 14.7, 14.5, 14.3])
    ]
    reports = drive(scenes)
    assert [kinds(r) for r in reports] == [[], [InfractionKind.COLLISION_VEHICLE], [], []]
    assert reports[1].infractions[0].actor_id == "car0"
    assert reports[1].is_terminal


def test_a_standing_ego_hit_from_behind_still_collides_and_the_record_says_so():
    """found-rl counts it (docs/architecture.md, "Collisions while the ego stands")."""
    scenes = [
        snapshot(step, (10.0, Y), vehicles=boxes([(x, Y)], velocity_xy=[(5.0, 0.0)], prefix="car"))
        for step, x in enumerate([0.0, 5.5])
    ]
    (report,) = drive(scenes)
    assert kinds(report) == [InfractionKind.COLLISION_VEHICLE]
    assert report.infractions[0].detail == "collision with vehicle car0 at 0.0 m/s, hit from behind while stopped"
    # Driving into a car ahead while standing still cannot happen; a moving ego hit from behind is
    # an ordinary collision.
    ahead = [snapshot(s, (10.0, Y), vehicles=boxes([(x, Y)], [180.0], prefix="car")) for s, x in ((0, 20.0), (1, 14.5))]
    assert drive(ahead)[0].infractions[0].detail == "collision with vehicle car0 at 0.0 m/s"
    moving = [
        snapshot(s, (10.0 + s, Y), speed_mps=3.0, vehicles=boxes([(x, Y)], prefix="car"))
        for s, x in ((0, 0.0), (1, 7.0))
    ]
    assert drive(moving)[0].infractions[0].detail == "collision with vehicle car0 at 3.0 m/s"


def test_walker_collision_is_a_pedestrian_collision():
    walker = boxes([(13.0, Y)], half_extent=(0.3, 0.3), prefix="ped")
    scenes = [snapshot(0, (10.0, Y), speed_mps=3.0), snapshot(1, (10.3, Y), speed_mps=3.0, walkers=walker)]
    (report,) = drive(scenes)
    assert kinds(report) == [InfractionKind.COLLISION_PEDESTRIAN]
    assert report.infractions[0].speed_mps == pytest.approx(3.0)


# ----------------------------------------------------------------------- lights and signs


# Red lights follow the CARLA leaderboard's RunningRedLightTest: the run is decided by the segment
# from 0.8 half-lengths behind the ego's centre to 1 m behind its rear bumper (here 1.92 m to
# 3.4 m behind the centre, the ego being 4.8 m long) crossing the middle 80 % of a red stop line.
# The line is at x = 50 across the east lane.


def drive_east(centres_x: Sequence[float], states: Sequence[LightState], y: float = Y) -> list[InfractionReport]:
    """The ego driving east through centres ``centres_x`` while the light shows ``states``."""
    scenes = [
        snapshot(step, (x, y), speed_mps=8.0, traffic_lights=stop_line(50.0, state))
        for step, (x, state) in enumerate(zip(centres_x, states))
    ]
    return drive(scenes)


def red_light_steps(reports: list[InfractionReport]) -> list[int]:
    """Steps (1-based, as reports follow the reset) that report a red-light run."""
    return [step for step, report in enumerate(reports, 1) if InfractionKind.RED_LIGHT in kinds(report)]


@pytest.mark.parametrize("state, expected", [(LightState.RED, [5]), (LightState.YELLOW, []), (LightState.GREEN, [])])
def test_the_tail_crossing_the_line_decides_a_red_light_run(state, expected):
    centres = [47.0 + k for k in range(10)]  # the tail reaches x = 50 at centre 51.92: step 5 (x = 52)
    reports = drive_east(centres, [state] * len(centres))
    assert red_light_steps(reports) == expected
    if expected:
        report = reports[expected[0] - 1]
        assert report.is_terminal and report.infractions[0].actor_id == "light0"


def test_stopping_half_a_metre_past_the_line_on_red_is_no_run():
    # The front bumper (2.4 m ahead of the centre) stops at x = 50.5 and stays there on red.
    centres = [46.0, 47.0, 47.8, 48.1] + [48.1] * 20
    assert red_light_steps(drive_east(centres, [LightState.RED] * len(centres))) == []


def test_entering_on_yellow_and_crossing_with_the_tail_on_red_is_a_run():
    centres = [46.0 + k for k in range(10)]  # front crosses at centre 47.6 (yellow), tail at 51.92 (red)
    states = [LightState.YELLOW] * 4 + [LightState.RED] * 6
    assert red_light_steps(drive_east(centres, states)) == [6]


def test_clearing_the_line_with_the_tail_before_red_is_no_run():
    centres = [46.0 + k for k in range(12)]  # the far tail end passes x = 50 at centre 53.4
    states = [LightState.YELLOW] * 8 + [LightState.RED] * 4
    assert red_light_steps(drive_east(centres, states)) == []


def test_a_tail_standing_across_a_red_line_is_one_run():
    centres = [48.0, 50.0, 52.0] + [52.5] * 10  # stands with the tail across x = 50
    states = [LightState.GREEN] * 4 + [LightState.RED] * 9
    assert red_light_steps(drive_east(centres, states)) == [4]


def test_a_fast_tail_jumping_the_line_between_snapshots_is_caught():
    # 45 m/s: the tail segment lies before the line at one snapshot and past it at the next.
    centres = [45.0, 49.0, 53.5, 58.0]
    assert red_light_steps(drive_east(centres, [LightState.RED] * 4)) == [2]


def test_a_tail_beside_the_line_in_the_next_lane_is_no_run():
    centres = [47.0 + k for k in range(10)]
    assert red_light_steps(drive_east(centres, [LightState.RED] * 10, y=Y - 3.5)) == []


def test_crossing_a_red_line_against_its_lane_is_not_a_red_light():
    # Driving west (wrong way) through the east lane's stop line: the tail crosses it too.
    light = stop_line(50.0, LightState.RED)
    scenes = [snapshot(step, (58.0 - k, Y), yaw_deg=180.0, traffic_lights=light) for step, k in enumerate(range(12))]
    assert red_light_steps(drive(scenes)) == []


def test_stop_sign_needs_a_stop_in_the_zone():
    sign = stop_line(50.0, LightState.RED, light_id="stop0")
    # Roll through: no stop.
    rolling = [snapshot(i, (45.0 + i, Y), speed_mps=10.0, stop_signs=sign) for i in range(5)]
    assert [k for r in drive(rolling) for k in kinds(r)] == [InfractionKind.STOP_SIGN]
    # Stop 1 m before the line (front at 49.0), then go.
    xs = [44.0, 45.0, 46.0, 46.6, 46.6, 47.0, 48.0, 49.0]
    stopping = [snapshot(i, (x, Y), speed_mps=0.0 if 3 <= i <= 4 else 5.0, stop_signs=sign) for i, x in enumerate(xs)]
    assert all(not r.infractions for r in drive(stopping))


# ------------------------------------------------------------------------- road and route


def test_leaving_the_road_polygon_is_a_layout_infraction_once():
    # Drift south; the ego's right side (y + 1.0) passes the road edge at y = 3.5.
    ys = [Y, 2.5, 2.7, 3.0, 3.2, 2.0, 3.2]
    scenes = [snapshot(i, (10.0 + i, y), speed_mps=5.0) for i, y in enumerate(ys)]
    reports = drive(scenes)
    # Corner 3.7 (0.2 out: tolerated), 4.0 (0.5 out), 4.2, back on road, out again.
    assert [r.is_offroad for r in reports] == [False, False, True, True, False, True]
    assert [len(r.infractions) for r in reports] == [0, 0, 1, 0, 0, 1]
    assert kinds(reports[2]) == [InfractionKind.COLLISION_LAYOUT]


def test_ninety_seconds_standing_is_blocked():
    scenes = [snapshot(i, (10.0, Y)) for i in range(902)]
    reports = drive(scenes)
    blocked_steps = [r.infractions[0].step for r in reports if r.infractions]
    assert blocked_steps == [900]
    assert reports[898].standing_s == pytest.approx(89.9)


def test_creeping_resets_the_blocked_timer():
    scenes = [snapshot(i, (10.0, Y), speed_mps=0.5 if i == 500 else 0.0) for i in range(1000)]
    assert not any(r.infractions for r in drive(scenes))


def test_driving_far_off_route_is_a_deviation():
    ys = [Y, -10.0, -25.0, -31.0, -40.0]
    scenes = [snapshot(i, (10.0, y), yaw_deg=-90.0, speed_mps=5.0, lane_id=None) for i, y in enumerate(ys)]
    reports = drive(scenes)
    deviations = [i for i, r in enumerate(reports) if InfractionKind.ROUTE_DEVIATION in kinds(r)]
    assert deviations == [2]


def test_completing_the_route_terminates():
    scenes = [snapshot(i, (x, Y), speed_mps=5.0) for i, x in enumerate(np.arange(0.0, 100.1, 2.0))]
    reports = drive(scenes)
    assert reports[-1].route_completed and reports[-1].is_terminal
    assert not reports[-2].route_completed  # 98 m of 100 m: below 99 %
    assert not any(r.infractions for r in reports)


def test_distance_in_the_oncoming_lane_counts_as_outside_route_lanes():
    ys = [Y, Y, -Y, -Y, -Y, Y]
    lanes = ["east", "east", "west", "west", "west", "east"]
    scenes = [snapshot(i, (10.0 + 2 * i, y), lane_id=lane) for i, (y, lane) in enumerate(zip(ys, lanes, strict=True))]
    reports = drive(scenes)
    assert [r.is_outside_route_lanes for r in reports] == [False, True, True, True, False]
    # Steps into, along and along the west lane: hypot(2, 3.5) + 2 + 2.
    assert reports[-1].outside_lane_m == pytest.approx(np.hypot(2.0, 3.5) + 4.0)
    assert not any(r.infractions for r in reports)


def test_step_before_reset_is_an_error():
    scene = snapshot(0, (0.0, Y))
    tracker = RouteTracker(scene.route, scene.ego.xy, 0.0)
    with pytest.raises(RuntimeError, match="reset"):
        InfractionMonitor().step(scene, tracker.progress)


def test_spawning_with_a_corner_off_the_road_is_no_infraction():
    # The road ends at x = -20: the ego's rear hangs 1.4 m over its end at reset.
    scenes = [snapshot(i, (-19.0 + 0.5 * i, Y), speed_mps=5.0) for i in range(6)]
    reports = drive(scenes)
    assert not any(r.infractions for r in reports)
    assert [r.is_offroad for r in reports] == [True, True, False, False, False]


def oracle_segments_cross(p0: np.ndarray, p1: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """The crossing rule in vectorised numpy."""
    a, b = segments[:, 0], segments[:, 1]

    def cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]

    side_p0, side_p1 = cross(b - a, p0 - a), cross(b - a, p1 - a)
    side_a, side_b = cross(p1 - p0, a - p0), cross(p1 - p0, b - p0)
    return (side_p0 * side_p1 <= 0) & (side_p0 != side_p1) & (side_a * side_b <= 0)


def test_stop_line_crossings_match_a_numpy_oracle():
    rng = np.random.default_rng(3)
    starts = rng.uniform(-40.0, 40.0, size=(30, 2))
    segments = np.stack([starts, starts + rng.uniform(-3.0, 3.0, size=(30, 2))], axis=1)
    lines = StopLines(
        ids=tuple(f"l{i}" for i in range(30)),
        lane_ids=("unknown",) * 30,
        segments=segments,
        states=np.ones(30, np.int8),
        remaining_s=np.full(30, np.inf),
        phase_s=np.full(30, np.inf),
    )
    road = snapshot(0, (0.0, 0.0)).map
    crossings = 0
    for _ in range(300):
        p0 = segments[rng.integers(30)].mean(axis=0) + rng.normal(0.0, 1.5, size=2)  # near a line
        p1 = p0 + rng.uniform(-4.0, 4.0, size=2)
        expected = oracle_segments_cross(p0, p1, segments)
        assert segments_cross(p0, p1, segments).tolist() == expected.tolist()
        assert crossed_stop_lines(p0, p1, lines, road).tolist() == np.flatnonzero(expected).tolist()
        crossings += int(expected.sum())
    assert crossings > 30


# ----------------------------------------------------------------------- the road area


def test_ego_outside_matches_outside_distance_of_the_corners():
    from found_rl.infractions import drivable_area
    from tests.scenes import straight_road

    area = drivable_area(straight_road(200.0))
    rng = np.random.default_rng(1)
    outside = 0
    for _ in range(300):
        xy = (float(rng.uniform(-10.0, 210.0)), float(rng.normal(Y, 6.0)))
        scene = snapshot(0, xy, yaw_deg=float(rng.uniform(-180.0, 180.0)))
        expected = area.outside_distance_m(ego_corners(scene.ego, with_centre=True)).tolist()
        assert area.ego_outside_m(scene.ego) == expected
        outside += max(expected) > 0.0
    assert 20 < outside < 280  # both branches are exercised


# ------------------------------------------------------------------ audited rule boundaries


def test_standing_exactly_at_the_blocked_speed_is_moving():
    # "Below 0.1 m/s" counts as standing; 0.1 m/s itself does not.
    scenes = [snapshot(i, (10.0 + 0.01 * i, Y), speed_mps=0.1) for i in range(902)]
    reports = drive(scenes)
    assert not any(r.infractions for r in reports)
    assert reports[-1].standing_s == 0.0


def test_stopping_before_the_stop_zone_does_not_count():
    # Stop with the front 8 m before the line (zone: 5 m), then roll through without stopping.
    sign = stop_line(50.0, LightState.RED, light_id="stop0")
    xs = [36.0, 38.0, 39.6, 39.6, 42.0, 44.0, 46.0, 48.0]
    scenes = [snapshot(i, (x, Y), speed_mps=0.0 if i in (2, 3) else 5.0, stop_signs=sign) for i, x in enumerate(xs)]
    reports = drive(scenes)
    assert [k for r in reports for k in kinds(r)] == [InfractionKind.STOP_SIGN]
    assert kinds(reports[-1]) == [InfractionKind.STOP_SIGN]  # front 49.0 -> 50.4


def test_stop_sign_stop_counts_once():
    # Two visits to the same sign: the stop before the first crossing does not excuse the second.
    sign = stop_line(50.0, LightState.RED, light_id="stop0")
    xs = [45.0, 46.6, 46.6, 48.0, 49.0, 46.0, 46.5, 47.0, 48.0]
    speeds = [5.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    scenes = [
        snapshot(i, (x, Y), speed_mps=v, stop_signs=sign) for i, (x, v) in enumerate(zip(xs, speeds, strict=True))
    ]
    reports = drive(scenes)
    assert [i for i, r in enumerate(reports) if r.infractions] == [7]
    assert kinds(reports[7]) == [InfractionKind.STOP_SIGN]


@pytest.mark.parametrize(
    ("y", "lane_id", "outside"),
    [
        (Y - 2.2, "west", False),  # 2.2 m off: within the half-width 1.75 + 0.5 m margin
        (Y - 2.3, "west", True),  # 2.3 m off, in the oncoming lane
        (Y - 2.3, None, True),  # 2.3 m off, on no lane
    ],
)
def test_outside_route_lanes_allows_the_margin(y, lane_id, outside):
    scenes = [snapshot(0, (10.0, Y)), snapshot(1, (12.0, y), lane_id=lane_id)]
    (report,) = drive(scenes)
    assert report.is_outside_route_lanes is outside
    assert report.outside_lane_m == pytest.approx(np.hypot(2.0, Y - y) if outside else 0.0)


def test_same_direction_neighbour_lane_is_not_outside_the_route_lanes():
    # The route's lane "east" gets a same-direction neighbour "east_left" where "west" was.
    import dataclasses

    from tests.scenes import straight_road

    road = straight_road()
    east = dataclasses.replace(road.lanes["east"], left_neighbor="east_left")
    left = dataclasses.replace(
        road.lanes["east"], lane_id="east_left", centerline=road.lanes["east"].centerline - (0, 3.5)
    )
    two_lanes = dataclasses.replace(road, map_id="two-east-lanes", lanes={"east": east, "east_left": left})
    lanes = ["east", "east_left", "west"]
    scenes = [
        snapshot(i, (10.0 + 2 * i, Y - 3.5 * (i > 0)), lane_id=lane, map_geometry=two_lanes)
        for i, lane in enumerate(lanes)
    ]
    reports = drive(scenes)
    assert [r.is_outside_route_lanes for r in reports] == [False, True]
