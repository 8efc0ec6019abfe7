"""Pure geometry of the infraction rules: oriented boxes, stop-line crossings, the road area.

Everything takes arrays in CARLA's world frame (x east, y south, metres, yaw in degrees) and
returns arrays; nothing keeps state except the per-map :class:`DrivableArea` cache.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import shapely

from found_rl.hazards.geometry import REACH_SLACK
from found_rl.sim.snapshot import ActorBoxes, EgoState, MapGeometry, StopLines

STOP_LINE_REACH_M = 10.0
"""Stop lines whose first end is farther than this from the ego front are not tested."""


def box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """Corners of oriented boxes, counter-clockwise in the CARLA frame's screen view.

    Args:
        xy: ``(N, 2)`` centres, metres.
        yaw_deg: ``(N,)`` headings.
        half_extent: ``(N, 2)`` half-length and half-width.

    Returns:
        ``(N, 4, 2)`` corners: front-left, front-right, rear-right, rear-left (left/right as
        seen by the driver; y points south, so "left" is ``-y`` for a car heading east).
    """
    yaw = np.deg2rad(np.asarray(yaw_deg, dtype=np.float64))
    forward = np.stack([np.cos(yaw), np.sin(yaw)], axis=-1)
    right = np.stack([-np.sin(yaw), np.cos(yaw)], axis=-1)
    f = forward * half_extent[:, :1]
    r = right * half_extent[:, 1:2]
    return np.stack([xy + f - r, xy + f + r, xy - f + r, xy - f - r], axis=1)


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
    if len(others) == 0 or not _may_overlap_any(ego_xy, ego_half_extent, others):
        return _NO_INDICES
    delta = others.xy - ego_xy
    distance2 = np.einsum("ij,ij->i", delta, delta)
    ego_radius_m = math.hypot(ego_half_extent[0], ego_half_extent[1])
    # Quick reject, the common case: nobody within reach of even the largest box's circle.
    largest_radius_m = math.sqrt(2.0) * float(others.half_extent.max())
    if float(distance2.min()) >= (ego_radius_m + largest_radius_m) ** 2:
        return _NO_INDICES
    # Broad phase: circumscribed circles.
    reach = ego_radius_m + np.hypot(others.half_extent[:, 0], others.half_extent[:, 1])
    idx = np.flatnonzero(distance2 < reach * reach)
    if len(idx) == 0:
        return _NO_INDICES
    ego_yaw = math.radians(ego_yaw_deg)
    ego_axes = np.array([[math.cos(ego_yaw), math.sin(ego_yaw)], [-math.sin(ego_yaw), math.cos(ego_yaw)]])
    yaw = np.deg2rad(others.yaw_deg[idx])
    other_axes = np.stack(
        [np.stack([np.cos(yaw), np.sin(yaw)], -1), np.stack([-np.sin(yaw), np.cos(yaw)], -1)], axis=1
    )  # (K, 2 axes, 2)
    axes = np.concatenate([np.broadcast_to(ego_axes, other_axes.shape), other_axes], axis=1)  # (K, 4, 2)
    ego_radius = np.abs(axes @ ego_axes.T) @ ego_half_extent  # (K, 4)
    other_radius = np.einsum("kab,kb->ka", np.abs(np.einsum("kaj,kbj->kab", axes, other_axes)), others.half_extent[idx])
    centre_gap = np.abs(np.einsum("kaj,kj->ka", axes, delta[idx]))
    return idx[np.all(centre_gap < ego_radius + other_radius, axis=1)]


_NO_INDICES = np.zeros(0, dtype=np.int64)

def _may_overlap_any(ego_xy: np.ndarray, ego_half_extent: np.ndarray, others: ActorBoxes) -> bool:
    """``False`` only if the exact broad phase of :func:`overlapping_boxes` rejects every box.

    The usual step has a handful of actors and none within reach; a loop over Python floats
    decides that faster than one numpy call. The circle test is loosened by
    :data:`REACH_SLACK` (``math.hypot`` and ``np.hypot`` may differ in the last bit), and
    anything but plain float64 arrays, or a NaN, answers ``True`` (the exact path decides).
    """
    xy, half_extent = others.xy, others.half_extent
    if not (
        type(xy) is np.ndarray
        and type(half_extent) is np.ndarray
        and xy.dtype == _FLOAT64
        and half_extent.dtype == _FLOAT64
        and xy.shape == half_extent.shape == (len(others), 2)
        and getattr(ego_xy, "shape", None) == (2,)
    ):
        return True
    ego_x, ego_y = ego_xy.tolist()
    ego_radius_m = math.hypot(ego_half_extent[0], ego_half_extent[1])
    hypot, slack = math.hypot, 1.0 + REACH_SLACK
    for (x, y), (half_length, half_width) in zip(xy.tolist(), half_extent.tolist()):
        dx, dy = x - ego_x, y - ego_y
        reach = (ego_radius_m + hypot(half_length, half_width)) * slack
        if not dx * dx + dy * dy >= reach * reach:
            return True
    return False


_FLOAT64 = np.dtype(np.float64)


def segments_cross(p0: np.ndarray, p1: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """Whether the motion segment ``p0 -> p1`` properly crosses each of ``segments``.

    Touching an end point counts as crossing; sliding along a segment does not.

    Args:
        p0, p1: ``(2,)`` start and end of the motion.
        segments: ``(M, 2, 2)`` line segments.

    Returns:
        ``(M,)`` bool.
    """
    if len(segments) == 0:
        return np.zeros(0, dtype=bool)
    a, b = segments[:, 0], segments[:, 1]
    motion = p1 - p0

    def cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]

    side_p0 = cross(b - a, p0 - a)
    side_p1 = cross(b - a, p1 - a)
    side_a = cross(np.broadcast_to(motion, a.shape), a - p0)
    side_b = cross(np.broadcast_to(motion, b.shape), b - p0)
    return (side_p0 * side_p1 <= 0) & (side_p0 != side_p1) & (side_a * side_b <= 0)


def ego_corners(ego: EgoState, with_centre: bool = False) -> np.ndarray:
    """``(4, 2)`` corners of the ego box, ordered as :func:`box_corners` (scalar fast path);
    ``(5, 2)`` with the centre appended when ``with_centre``."""
    yaw = math.radians(ego.yaw_deg)
    cos, sin = math.cos(yaw), math.sin(yaw)
    half_length, half_width = ego.half_extent.tolist()  # Python floats: scalar maths is faster
    fx, fy = half_length * cos, half_length * sin
    rx, ry = -half_width * sin, half_width * cos
    x, y = ego.xy.tolist()
    corners = [
        [x + fx - rx, y + fy - ry],
        [x + fx + rx, y + fy + ry],
        [x - fx + rx, y - fy + ry],
        [x - fx - rx, y - fy - ry],
    ]
    if with_centre:
        corners.append([x, y])
    return np.array(corners)


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
    segments = stop_lines.segments
    if len(segments) == 0:
        return _NO_INDICES
    x0, y0 = front_before.tolist()
    x1, y1 = front_now.tolist()
    forward = []
    for i in _stop_lines_near(segments, x1, y1):
        (ax, ay), (bx, by) = segments[i].tolist()
        if not _segment_crosses(x0, y0, x1, y1, ax, ay, bx, by):
            continue
        direction = lane_direction(map_geometry, stop_lines.lane_ids[i])
        if direction is None or (x1 - x0) * direction[0] + (y1 - y0) * direction[1] > 0.0:
            forward.append(int(i))
    return np.asarray(forward, dtype=np.int64) if forward else _NO_INDICES


def _segment_crosses(x0: float, y0: float, x1: float, y1: float, ax: float, ay: float, bx: float, by: float) -> bool:
    """Scalar :func:`segments_cross` for one motion and one segment (same rules)."""
    side_p0 = (bx - ax) * (y0 - ay) - (by - ay) * (x0 - ax)
    side_p1 = (bx - ax) * (y1 - ay) - (by - ay) * (x1 - ax)
    side_a = (x1 - x0) * (ay - y0) - (y1 - y0) * (ax - x0)
    side_b = (x1 - x0) * (by - y0) - (y1 - y0) * (bx - x0)
    return side_p0 * side_p1 <= 0 and side_p0 != side_p1 and side_a * side_b <= 0


class _StopLineGrid:
    """Stop lines bucketed by their first end point in cells of ``STOP_LINE_REACH_M``.

    Backends hand over the same static segments array every step; bucketing it once turns the
    per-step search into a few dict lookups instead of array arithmetic.
    """

    def __init__(self, segments: np.ndarray) -> None:
        self._buckets: dict[tuple[int, int], list[int]] = {}
        for i, (x, y) in enumerate(segments[:, 0, :].tolist()):
            key = (math.floor(x / STOP_LINE_REACH_M), math.floor(y / STOP_LINE_REACH_M))
            self._buckets.setdefault(key, []).append(i)
        self._neighbourhoods: dict[tuple[int, int], tuple[int, ...]] = {}

    def near(self, x: float, y: float) -> tuple[int, ...]:
        """Lines whose first end may lie within ``STOP_LINE_REACH_M`` of ``(x, y)`` (a superset)."""
        key = (math.floor(x / STOP_LINE_REACH_M), math.floor(y / STOP_LINE_REACH_M))
        found = self._neighbourhoods.get(key)
        if found is None:  # the ego stays in a cell for many steps: gather its 3 x 3 cells once
            found = self._neighbourhoods[key] = self._gather(*key)
        return found

    def _gather(self, cx: int, cy: int) -> tuple[int, ...]:
        found: list[int] = []
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                found.extend(self._buckets.get((cx + dx, cy + dy), ()))
        return tuple(found)


_GRID_CACHE: dict[int, tuple[weakref.ref, _StopLineGrid | None]] = {}


def _stop_lines_near(segments: np.ndarray, x: float, y: float) -> list[int] | tuple[int, ...]:
    """Indices of stop lines that may be within reach of ``(x, y)``.

    An array seen for the second time gets a :class:`_StopLineGrid`; arrays built anew every
    step keep to one vectorised distance test.
    """
    entry = _GRID_CACHE.get(id(segments))
    if entry is not None and entry[0]() is segments:
        grid = entry[1]
        if grid is None:
            grid = _StopLineGrid(segments)
            _GRID_CACHE[id(segments)] = (entry[0], grid)
        return grid.near(x, y)
    if len(_GRID_CACHE) > 64:
        _GRID_CACHE.clear()
    _GRID_CACHE[id(segments)] = (weakref.ref(segments), None)
    offset = segments[:, 0, :] - (x, y)
    return np.flatnonzero(np.einsum("ij,ij->i", offset, offset) < STOP_LINE_REACH_M**2).tolist()


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
