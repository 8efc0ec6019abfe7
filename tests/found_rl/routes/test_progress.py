"""Route tracking on a straight route and an L-shaped one, checked against hand geometry."""

import math

import numpy as np
import pytest

from found_rl.actions import RoadOption
from found_rl.routes.progress import (
    BACKWARD_WINDOW,
    FORWARD_WINDOW,
    OVERLAP_TOLERANCE_M,
    RouteTracker,
    wrap_angle_rad,
)
from found_rl.world import Route
from tests.scenes import EAST_LANE_Y, l_route, straight_route


def test_driving_along_the_route_completes_it_and_counts_distance():
    route = straight_route(100.0)
    tracker = RouteTracker(route, np.array([0.0, EAST_LANE_Y]), 0.0)
    for x in np.arange(0.5, 100.01, 0.5):
        progress = tracker.update(np.array([x, EAST_LANE_Y]), 0.0)
    assert progress.completion == pytest.approx(1.0)
    assert progress.distance_driven_m == pytest.approx(100.0)
    assert progress.lateral_m == pytest.approx(0.0)


def test_progress_is_continuous_between_waypoints():
    tracker = RouteTracker(straight_route(100.0), np.array([0.0, EAST_LANE_Y]), 0.0)
    first = tracker.update(np.array([10.25, EAST_LANE_Y + 0.5]), 0.0)
    second = tracker.update(np.array([10.75, EAST_LANE_Y + 0.5]), 0.0)
    assert first.progress_m == pytest.approx(10.25)
    assert second.completion_delta == pytest.approx(0.005)
    assert second.lateral_m == pytest.approx(0.5)


def test_progress_never_goes_back_when_reversing():
    tracker = RouteTracker(straight_route(100.0), np.array([0.0, EAST_LANE_Y]), 0.0)
    tracker.update(np.array([20.0, EAST_LANE_Y]), 0.0)
    back = tracker.update(np.array([18.0, EAST_LANE_Y]), 0.0)
    assert back.progress_m == pytest.approx(20.0)
    assert back.completion_delta == 0.0
    assert back.distance_driven_m == pytest.approx(22.0)


def test_heading_error_and_lateral_after_the_turn():
    tracker = RouteTracker(l_route(), np.array([0.0, 0.0]), 0.0)
    for x in range(1, 50):
        tracker.update(np.array([float(x), 0.0]), 0.0)
    # 1 m right of the southbound leg (west of it in CARLA's frame: driver's right is -x
    # when heading south), heading 30 deg off.
    progress = tracker.update(np.array([49.0, 10.0]), 120.0)
    assert progress.lateral_m == pytest.approx(1.0)
    assert progress.heading_error_rad == pytest.approx(math.radians(30.0))
    assert progress.progress_m == pytest.approx(60.0)


def test_far_off_route_deviation_distance():
    tracker = RouteTracker(straight_route(100.0), np.array([0.0, EAST_LANE_Y]), 0.0)
    progress = tracker.update(np.array([5.0, EAST_LANE_Y + 35.0]), 90.0)
    assert progress.deviation_m == pytest.approx(35.0)


def test_loop_route_does_not_jump_ahead():
    # An out-and-back route: waypoint 10 and waypoint 30 are both at x = 10.
    out = np.stack([np.arange(0.0, 21.0), np.zeros(21)], axis=1)
    back = np.stack([np.arange(19.0, -1.0, -1.0), np.full(20, 0.5)], axis=1)
    xy = np.concatenate([out, back])
    route = Route("loop", xy, np.zeros(len(xy)), np.full(len(xy), 4, np.int8), ("a",) * len(xy), 40.5)
    tracker = RouteTracker(route, np.array([0.0, 0.0]), 0.0)
    progress = tracker.update(np.array([10.0, 0.3]), 0.0)
    assert progress.progress_m == pytest.approx(10.0)


@pytest.mark.parametrize("angle, wrapped", [(0.0, 0.0), (3 * math.pi / 2, -math.pi / 2), (-3.0, -3.0)])
def test_wrap_angle(angle, wrapped):
    assert wrap_angle_rad(angle) == pytest.approx(wrapped)


def test_route_needs_two_waypoints():
    route = Route("short", np.zeros((1, 2)), np.zeros(1), np.zeros(1, np.int8), ("a",), 0.0)
    with pytest.raises(ValueError, match="short"):
        RouteTracker(route, np.zeros(2), 0.0)


# --- the compiled projection against a plain numpy statement of it ----------------------------


def random_route(rng: np.random.Generator) -> Route:
    count = int(rng.integers(20, 200))
    if rng.random() < 0.3:  # out and back: two stretches within the overlap tolerance
        half = count // 2
        out = np.stack([np.arange(half, dtype=float), np.zeros(half)], axis=1)
        xy = np.concatenate([out, out[::-1] + [0.0, rng.uniform(0.3, 3.0)]])
    else:
        turn = np.cumsum(rng.normal(0.0, rng.choice([0.0, 0.05, 0.3]), count))
        spacing = rng.uniform(0.3, 2.0, count)[:, None]
        xy = np.cumsum(spacing * np.stack([np.cos(turn), np.sin(turn)], axis=1), axis=0)
    xy = xy + rng.uniform(-300.0, 300.0, 2)
    yaw = np.degrees(np.arctan2(*np.diff(xy, axis=0)[:, ::-1].T))
    commands = np.full(len(xy), int(RoadOption.LANEFOLLOW), dtype=np.int8)
    return Route("random", xy, np.append(yaw, yaw[-1]), commands, ("a",) * len(xy), 0.0)


def oracle_projection(xy: np.ndarray, point: np.ndarray, lo: int, hi: int) -> tuple[int, float, float]:
    """``(segment, along_m, distance_m)`` of ``point`` on segments ``lo:hi`` of the polyline
    ``xy``: the nearest segment, unless an earlier run of segments within the overlap
    tolerance of the nearest distance exists, whose own nearest segment then wins."""
    start, delta = xy[lo:hi], np.diff(xy, axis=0)[lo:hi]
    length = np.hypot(delta[:, 0], delta[:, 1])
    direction = delta / np.where(length > 1e-9, length, 1.0)[:, None] * (length > 1e-9)[:, None]
    along = np.clip(np.einsum("ij,ij->i", point - start, direction), 0.0, length)
    distance = np.hypot(*(point - start - along[:, None] * direction).T)
    best = int(distance.argmin())
    near = distance <= distance[best] + OVERLAP_TOLERANCE_M
    first = int(near.argmax())
    run_end = first
    while run_end + 1 < len(near) and near[run_end + 1]:
        run_end += 1
    if first < best and run_end < best:
        best = first + int(distance[first : run_end + 1].argmin())
    return lo + best, float(along[best]), float(distance[best])


@pytest.mark.parametrize("seed", range(3))
def test_projection_matches_a_numpy_oracle(seed):
    rng = np.random.default_rng(seed)
    for _ in range(15):
        route = random_route(rng)
        start = route.xy[0] + rng.normal(0.0, 0.5, 2)
        tracker = RouteTracker(route, start, 0.0)
        position = 0.0
        for _ in range(100):
            position = min(position + rng.uniform(-0.2, 1.5), len(route.xy) - 1.0)
            k = int(max(position, 0.0))
            xy = route.xy[k] + rng.normal(0.0, rng.choice([0.1, 1.0, 4.0]), 2)
            lo = max(tracker.progress.index - BACKWARD_WINDOW, 0)
            hi = min(tracker.progress.index + FORWARD_WINDOW + 1, len(route.xy) - 1)
            segment, along_m, distance_m = oracle_projection(route.xy, xy, lo, hi)
            before = tracker.progress
            progress = tracker.update(xy, 0.0)
            assert progress.index == max(segment, before.index)
            assert progress.deviation_m == pytest.approx(distance_m, abs=1e-9)
            arc_m = float(np.hypot(*np.diff(route.xy, axis=0).T)[:segment].sum()) + along_m
            assert progress.progress_m == pytest.approx(max(before.progress_m, arc_m), abs=1e-9)


def test_a_nan_pose_projects_onto_the_window_start_without_error():
    tracker = RouteTracker(straight_route(100.0), np.array([0.0, EAST_LANE_Y]), 0.0)
    progress = tracker.update(np.array([np.nan, EAST_LANE_Y]), 0.0)
    assert progress.index == 0 and math.isnan(progress.deviation_m)


# --- index, lateral error and the search window, on hand geometry -----------------------------


def test_index_never_decreases_when_reversing():
    tracker = RouteTracker(straight_route(100.0), np.array([0.0, EAST_LANE_Y]), 0.0)
    assert tracker.update(np.array([20.5, EAST_LANE_Y]), 0.0).index == 20  # on segment 20 -> 21
    assert tracker.update(np.array([18.5, EAST_LANE_Y]), 0.0).index == 20  # rolled back onto segment 18


def test_lateral_is_to_the_segment_line_and_deviation_to_the_route():
    # 2 m behind the route start and 0.5 m to the side: the line through segment 0 is 0.5 m
    # away, the route itself (its first point) sqrt(2^2 + 0.5^2) m.
    tracker = RouteTracker(straight_route(100.0), np.array([0.0, EAST_LANE_Y]), 0.0)
    progress = tracker.update(np.array([-2.0, EAST_LANE_Y + 0.5]), 0.0)
    assert progress.lateral_m == pytest.approx(0.5)
    assert progress.deviation_m == pytest.approx(math.sqrt(4.25))
    assert progress.progress_m == 0.0 and progress.index == 0


def out_and_back_route() -> Route:
    """East along y = 0 from x = 0 to 20, then west along y = 0.5 from x = 19 back to 0."""
    out = np.stack([np.arange(0.0, 21.0), np.zeros(21)], axis=1)
    back = np.stack([np.arange(19.0, -1.0, -1.0), np.full(20, 0.5)], axis=1)
    xy = np.concatenate([out, back])
    yaw = np.concatenate([np.zeros(21), np.full(20, 180.0)])
    return Route("out-and-back", xy, yaw, np.full(len(xy), 4, np.int8), ("a",) * len(xy), 40.118)


def test_on_the_way_back_the_outbound_leg_behind_is_not_searched():
    # Both legs are within OVERLAP_TOLERANCE_M, and the earlier one would win if it were in the
    # window; 14 segments past the turn it lies outside the 5 segments searched behind.
    tracker = RouteTracker(out_and_back_route(), np.array([0.0, 0.0]), 0.0)
    for x in np.arange(0.5, 20.01, 0.5):
        tracker.update(np.array([x, 0.0]), 0.0)
    for x in np.arange(19.5, 5.49, -0.5):
        progress = tracker.update(np.array([x, 0.5]), 180.0)
    # At x = 5.5 on the way back: segment 34 runs from (6, 0.5) to (5, 0.5).
    assert progress.index == 34
    assert progress.heading_error_rad == pytest.approx(0.0)
    assert progress.lateral_m == pytest.approx(0.0)
    assert progress.progress_m == pytest.approx(20.0 + math.hypot(1.0, 0.5) + 13.5)


def test_completion_is_measured_on_the_waypoints_not_the_declared_length():
    # The polyline is 100 m long; a route whose length_m says 120 m is still completed at its end.
    base = straight_route(100.0)
    route = Route("declared-longer", base.xy, base.yaw_deg, base.commands, base.lane_ids, 120.0)
    tracker = RouteTracker(route, np.array([0.0, EAST_LANE_Y]), 0.0)
    assert tracker.length_m == pytest.approx(100.0)
    assert tracker.update(np.array([50.0, EAST_LANE_Y]), 0.0).completion == pytest.approx(0.5)
    assert tracker.update(np.array([100.0, EAST_LANE_Y]), 0.0).completion == pytest.approx(1.0)
