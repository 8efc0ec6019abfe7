"""Pure geometry of the infraction rules: oriented boxes, stop-line crossings, the road area.

Everything takes arrays in CARLA's world frame (x east, y south, metres, yaw in degrees) and
returns arrays; nothing keeps state except the per-map :class:`DrivableArea` cache.
"""

from __future__ import annotations

import math

import numpy as np
import shapely

from found_rl.boxes import box_corners
from found_rl.jit import helper, kernel
from found_rl.world import ActorBoxes, EgoState, MapGeometry, StopLines


def boxes_overlap(
    ego_xy: np.ndarray, ego_yaw_deg: float, ego_half_extent: np.ndarray, others: ActorBoxes
) -> np.ndarray:
    """Which of ``others`` overlap the ego box (separating-axis test; touching is no overlap).

    Returns:
        ``(N,)`` bool.
    """
    mask = np.zeros(len(others), dtype=bool)
    mask[overlapping_boxes(ego_xy, ego_yaw_deg, ego_half_extent, others)] = True
    return mask


def overlapping_boxes(
    ego_xy: np.ndarray, ego_yaw_deg: float, ego_half_extent: np.ndarray, others: ActorBoxes
) -> np.ndarray:
    """Indices of the ``others`` that overlap the ego box, ascending (see :func:`boxes_overlap`)."""
    if len(others) == 0:
        return _NO_INDICES
    ego_x, ego_y = np.asarray(ego_xy, dtype=np.float64).tolist()
    half_length, half_width = np.asarray(ego_half_extent, dtype=np.float64).tolist()
    count = len(others)
    return overlapping_box_indices(
        ego_x,
        ego_y,
        float(ego_yaw_deg),
        half_length,
        half_width,
        np.ascontiguousarray(others.xy, dtype=np.float64).reshape(count, 2),
        np.ascontiguousarray(others.yaw_deg, dtype=np.float64).reshape(count),
        np.ascontiguousarray(others.half_extent, dtype=np.float64).reshape(count, 2),
    )


@kernel("int64[::1](float64, float64, float64, float64, float64, float64[:, ::1], float64[::1], float64[:, ::1])")
def overlapping_box_indices(
    ego_x: float,
    ego_y: float,
    ego_yaw_deg: float,
    ego_half_length: float,
    ego_half_width: float,
    xy: np.ndarray,
    yaw_deg: np.ndarray,
    half_extent: np.ndarray,
) -> np.ndarray:
    """Ascending indices of the boxes overlapping the ego box.

    Circumscribed circles reject most boxes; the separating-axis test on the four box axes
    (the ego's two, the other box's two) decides the rest: the boxes overlap when, on every
    axis, the centres are closer than the sum of the two boxes' projected half-extents.
    """
    yaw = math.radians(ego_yaw_deg)
    ego_cos, ego_sin = math.cos(yaw), math.sin(yaw)
    ego_radius = math.hypot(ego_half_length, ego_half_width)
    found = np.empty(len(xy), np.int64)
    count = 0
    for k in range(len(xy)):
        dx, dy = xy[k, 0] - ego_x, xy[k, 1] - ego_y
        reach = ego_radius + math.hypot(half_extent[k, 0], half_extent[k, 1])
        if not dx * dx + dy * dy < reach * reach:
            continue
        other = math.radians(yaw_deg[k])
        cos, sin = math.cos(other), math.sin(other)
        is_separated = False
        # Axes: ego forward, ego right, other forward, other right (right = (-sin, cos)).
        for axis_x, axis_y in ((ego_cos, ego_sin), (-ego_sin, ego_cos), (cos, sin), (-sin, cos)):
            ego_reach = (
                abs(axis_x * ego_cos + axis_y * ego_sin) * ego_half_length
                + abs(-axis_x * ego_sin + axis_y * ego_cos) * ego_half_width
            )
            other_reach = (
                abs(axis_x * cos + axis_y * sin) * half_extent[k, 0]
                + abs(-axis_x * sin + axis_y * cos) * half_extent[k, 1]
            )
            if not abs(axis_x * dx + axis_y * dy) < ego_reach + other_reach:
                is_separated = True
                break
        if not is_separated:
            found[count] = k
            count += 1
    return found[:count].copy()


_NO_INDICES = np.zeros(0, dtype=np.int64)


def segments_cross(p0: np.ndarray, p1: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """Whether the segment ``p0 -> p1`` properly crosses each of ``segments``.

    Touching an end point counts as crossing; sliding along a segment does not.

    Args:
        p0, p1: ``(2,)`` start and end of the motion.
        segments: ``(M, 2, 2)`` line segments.

    Returns:
        ``(M,)`` bool.
    """
    mask = np.zeros(len(segments), dtype=bool)
    mask[crossed_segments(p0, p1, segments)] = True
    return mask


def crossed_segments(p0: np.ndarray, p1: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """Ascending indices of the ``segments`` that ``p0 -> p1`` crosses (see :func:`segments_cross`)."""
    if len(segments) == 0:
        return _NO_INDICES
    x0, y0 = np.asarray(p0, dtype=np.float64).tolist()
    x1, y1 = np.asarray(p1, dtype=np.float64).tolist()
    lines = np.ascontiguousarray(segments, dtype=np.float64).reshape(-1, 4)
    return crossing_indices(x0, y0, x1, y1, lines)


@helper
def _crosses(x0: float, y0: float, x1: float, y1: float, ax: float, ay: float, bx: float, by: float) -> bool:
    """Whether ``(x0, y0) -> (x1, y1)`` crosses ``(ax, ay) -> (bx, by)``: the ends of each lie
    on opposite sides of (or on) the other, and the moving point does not stay on the line's
    side (``side_p0 != side_p1``: sliding along the line is no crossing)."""
    side_p0 = (bx - ax) * (y0 - ay) - (by - ay) * (x0 - ax)
    side_p1 = (bx - ax) * (y1 - ay) - (by - ay) * (x1 - ax)
    side_a = (x1 - x0) * (ay - y0) - (y1 - y0) * (ax - x0)
    side_b = (x1 - x0) * (by - y0) - (y1 - y0) * (bx - x0)
    return side_p0 * side_p1 <= 0 and side_p0 != side_p1 and side_a * side_b <= 0


@kernel("int64[::1](float64, float64, float64, float64, float64[:, ::1])")
def crossing_indices(x0: float, y0: float, x1: float, y1: float, lines: np.ndarray) -> np.ndarray:
    """Ascending indices of the ``lines`` (rows ``ax, ay, bx, by``) that ``(x0, y0) -> (x1, y1)``
    crosses (see :func:`_crosses`)."""
    found = np.empty(len(lines), np.int64)
    count = 0
    for i in range(len(lines)):
        if _crosses(x0, y0, x1, y1, lines[i, 0], lines[i, 1], lines[i, 2], lines[i, 3]):
            found[count] = i
            count += 1
    return found[:count].copy()


def ego_corners(ego: EgoState, with_centre: bool = False) -> np.ndarray:
    """``(4, 2)`` corners of the ego box, ordered as :func:`box_corners`; ``(5, 2)`` with the
    centre appended when ``with_centre``."""
    xy = np.asarray(ego.xy, dtype=np.float64).reshape(1, 2)
    corners = box_corners(xy, np.array([ego.yaw_deg], dtype=np.float64), np.asarray(ego.half_extent).reshape(1, 2))[0]
    return np.concatenate([corners, xy]) if with_centre else corners


def ego_front_xy(ego: EgoState) -> np.ndarray:
    """Centre of the ego's front bumper, ``(2,)`` metres."""
    yaw = math.radians(ego.yaw_deg)
    x, y = ego.xy.tolist()
    half_length = float(ego.half_extent[0])
    return np.array([x + half_length * math.cos(yaw), y + half_length * math.sin(yaw)])


class DrivableArea:
    """The union of a map's road polygons, prepared for fast point queries.

    Built once per map (:func:`drivable_area` caches it by ``map_id``).
    """

    def __init__(self, map_geometry: MapGeometry) -> None:
        polygons = [shapely.Polygon(p) for p in map_geometry.road_polygons if len(p) >= 3]
        polygons = [p if p.is_valid else shapely.make_valid(p) for p in polygons]
        self.geometry = shapely.union_all(polygons) if polygons else None
        if self.geometry is not None:
            shapely.prepare(self.geometry)

    def outside_distance_m(self, points_xy: np.ndarray) -> np.ndarray:
        """Distance of each point outside the drivable area (0 inside or on the border).

        Args:
            points_xy: ``(P, 2)`` metres.

        Returns:
            ``(P,)`` metres; all zeros when the map has no road polygons.
        """
        distance = np.zeros(len(points_xy))
        if self.geometry is None:
            return distance
        # shapely.lib directly: the public wrapper only re-prepares the (prepared) geometry.
        inside = shapely.lib.intersects_xy(self.geometry, points_xy[:, 0], points_xy[:, 1])
        if inside.all():
            return distance
        outside = ~inside
        distance[outside] = shapely.distance(self.geometry, shapely.points(points_xy[outside]))
        return distance

    def ego_outside_m(self, ego: EgoState) -> list[float]:
        """How far each ego corner, then its centre, lies off the drivable area (0 on it)."""
        return self.outside_distance_m(ego_corners(ego, with_centre=True)).tolist()


_DRIVABLE_CACHE: dict[str, DrivableArea] = {}


def drivable_area(map_geometry: MapGeometry) -> DrivableArea:
    """The :class:`DrivableArea` of a map, built on first use and cached by ``map_id``."""
    area = _DRIVABLE_CACHE.get(map_geometry.map_id)
    if area is None:
        area = _DRIVABLE_CACHE[map_geometry.map_id] = DrivableArea(map_geometry)
    return area


def lane_direction(map_geometry: MapGeometry, lane_id: str) -> np.ndarray | None:
    """Unit driving direction at the end of a lane (where its stop line is), if known."""
    lane = map_geometry.lanes.get(lane_id)
    if lane is None or len(lane.centerline) < 2:
        return None
    delta = np.asarray(lane.centerline[-1], dtype=np.float64) - lane.centerline[-2]
    norm = math.hypot(delta[0], delta[1])
    return delta / norm if norm > 1e-9 else None


def crossed_stop_lines(
    front_before: np.ndarray, front_now: np.ndarray, stop_lines: StopLines, map_geometry: MapGeometry
) -> np.ndarray:
    """Indices of ``stop_lines`` the ego front crossed in its driving direction this step.

    A crossing against the lane's direction (driving out of a junction into an incoming lane)
    is not a crossing of that lane's stop line.
    """
    crossed = crossed_segments(front_before, front_now, stop_lines.segments)
    motion = np.asarray(front_now, dtype=np.float64) - front_before
    return _along_lanes(crossed, motion, stop_lines, map_geometry)


def _along_lanes(
    indices: np.ndarray, heading: np.ndarray, stop_lines: StopLines, map_geometry: MapGeometry
) -> np.ndarray:
    """The ``indices`` of stop lines whose lane runs along ``heading`` (or is unknown)."""
    if not len(indices):
        return _NO_INDICES
    kept = []
    for i in indices.tolist():
        direction = lane_direction(map_geometry, stop_lines.lane_ids[i])
        if direction is None or float(heading @ direction) > 0.0:
            kept.append(i)
    return np.asarray(kept, dtype=np.int64)


RED_LIGHT_TAIL_NEAR = 0.8
"""The leaderboard's tail segment starts this fraction of the half-length behind the centre
(``RunningRedLightTest``: ``-0.8 * extent.x``)..."""

RED_LIGHT_TAIL_BEYOND_M = 1.0
"""... and ends this far behind the rear bumper (``-extent.x - 1``)."""

RED_LIGHT_LINE_FRACTION = 0.8
"""Share of a stop line's length, about its middle, that counts (the leaderboard's stop line
is 0.4 lane widths either side of the lane centre)."""


def ego_tail_segment(ego: EgoState) -> tuple[tuple[float, float], tuple[float, float]]:
    """The leaderboard's tail segment of the ego: ``(near, far)`` points behind its centre."""
    yaw = math.radians(ego.yaw_deg)
    cos, sin = math.cos(yaw), math.sin(yaw)
    x, y = ego.xy.tolist()
    half_length = float(ego.half_extent[0])
    near_m, far_m = RED_LIGHT_TAIL_NEAR * half_length, half_length + RED_LIGHT_TAIL_BEYOND_M
    return (x - near_m * cos, y - near_m * sin), (x - far_m * cos, y - far_m * sin)


def tail_crossed_lines(
    tail_near_before: tuple[float, float], ego: EgoState, stop_lines: StopLines, map_geometry: MapGeometry
) -> np.ndarray:
    """Indices of ``stop_lines`` the ego's tail is crossing, CARLA leaderboard style.

    The leaderboard's ``RunningRedLightTest`` fires while the segment from just behind the
    ego's centre to a metre behind its rear bumper crosses the middle 80 % of a stop line whose
    lane runs the way the ego faces. A run is decided by the rear, not the front: stopping with
    the bumper over the line is no run, and entering on yellow but crossing with the tail on
    red is. At 10 Hz a fast ego's tail segment can jump a line between two snapshots, so the
    motion of the segment's near end over the step (from ``tail_near_before``) counts as well.
    """
    if len(stop_lines) == 0:
        return _NO_INDICES
    (near_x, near_y), (far_x, far_y) = ego_tail_segment(ego)
    crossed = tail_crossing_indices(
        tail_near_before[0],
        tail_near_before[1],
        near_x,
        near_y,
        far_x,
        far_y,
        np.ascontiguousarray(stop_lines.segments, dtype=np.float64).reshape(-1, 4),
        RED_LIGHT_LINE_FRACTION,
    )
    yaw = math.radians(ego.yaw_deg)
    return _along_lanes(crossed, np.array([math.cos(yaw), math.sin(yaw)]), stop_lines, map_geometry)


@kernel("int64[::1](float64, float64, float64, float64, float64, float64, float64[:, ::1], float64)")
def tail_crossing_indices(
    before_x: float,
    before_y: float,
    near_x: float,
    near_y: float,
    far_x: float,
    far_y: float,
    lines: np.ndarray,
    fraction: float,
) -> np.ndarray:
    """Ascending indices of the ``lines`` (rows ``ax, ay, bx, by``), shrunk to ``fraction`` of
    their length about their middle, that the tail segment ``far -> near`` or the near end's
    motion ``before -> near`` crosses."""
    found = np.empty(len(lines), np.int64)
    count = 0
    for i in range(len(lines)):
        middle_x, middle_y = 0.5 * (lines[i, 0] + lines[i, 2]), 0.5 * (lines[i, 1] + lines[i, 3])
        ax, ay = middle_x + fraction * (lines[i, 0] - middle_x), middle_y + fraction * (lines[i, 1] - middle_y)
        bx, by = middle_x + fraction * (lines[i, 2] - middle_x), middle_y + fraction * (lines[i, 3] - middle_y)
        if _crosses(far_x, far_y, near_x, near_y, ax, ay, bx, by) or _crosses(
            before_x, before_y, near_x, near_y, ax, ay, bx, by
        ):
            found[count] = i
            count += 1
    return found[:count].copy()


def stop_zone_mask(
    front_xy: np.ndarray, heading: np.ndarray, stop_lines: StopLines, map_geometry: MapGeometry, zone_m: float
) -> np.ndarray:
    """Which stop lines have the ego front within ``zone_m`` before them, on their lane.

    Args:
        front_xy: ``(2,)`` ego front centre.
        heading: ``(2,)`` unit ego heading (used when a stop line's lane is unknown).
        stop_lines: the stop lines to test.
        map_geometry: for the lanes' driving directions.
        zone_m: depth of the zone before each line.

    Returns:
        ``(M,)`` bool.
    """
    mask = np.zeros(len(stop_lines), dtype=bool)
    for i in range(len(stop_lines)):
        a, b = stop_lines.segments[i]
        direction = lane_direction(map_geometry, stop_lines.lane_ids[i])
        if direction is None:
            direction = heading
        to_line = (a + b) / 2.0 - front_xy
        ahead_m = float(to_line @ direction)
        across_m = abs(float(to_line[0] * direction[1] - to_line[1] * direction[0]))
        half_width_m = 0.5 * float(np.hypot(*(b - a)))
        mask[i] = 0.0 <= ahead_m <= zone_m and across_m <= half_width_m
    return mask


def route_lane_family(route_lane_ids: tuple[str, ...], map_geometry: MapGeometry) -> frozenset[str]:
    """The route's lanes plus every same-direction lane beside them (reachable by lane change)."""
    family = set(route_lane_ids)
    frontier = list(family)
    while frontier:
        lane = map_geometry.lanes.get(frontier.pop())
        if lane is None:
            continue
        for neighbour in (lane.left_neighbor, lane.right_neighbor):
            if neighbour is not None and neighbour not in family:
                family.add(neighbour)
                frontier.append(neighbour)
    return frozenset(family)
