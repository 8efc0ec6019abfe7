"""Tracking the ego's progress along its dense route.

The ego is projected onto the route polyline within a window around its last position, so
progress is continuous (not quantised to the 1 m waypoint spacing), never jumps to a far
part of a route that loops back on itself, and only moves forward. From the projection come
route completion (leaderboard RC), the lateral and heading errors the rewards use, and the
deviation distance the route-deviation infraction uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from found_rl.jit import kernel
from found_rl.routes.cache import per_route
from found_rl.world import Route

BACKWARD_WINDOW = 5
"""Segments searched behind the current one (the ego may roll back a little)."""

FORWARD_WINDOW = 60
"""Segments searched ahead of the current one (about 60 m at 1 m spacing; 6 s at 36 km/h)."""

OVERLAP_TOLERANCE_M = 1.0
"""Two stretches of a route this close in distance to the ego count as equally near."""


class RouteProgress(NamedTuple):
    """Where the ego stands relative to its route after one step (a NamedTuple: one is built
    every step, and tuples build several times faster than frozen dataclasses).

    Attributes:
        index: route waypoint at the start of the segment the ego projects onto; never
            decreases during an episode.
        progress_m: furthest arc length reached along the route, metres.
        completion: ``progress_m`` over the length of the route's polyline, in ``[0, 1]``
            (leaderboard RC; the polyline, not ``route.length_m``, so the end is reachable).
        completion_delta: increase of ``completion`` in this step (>= 0).
        lateral_m: unsigned distance from the ego centre to the line through the nearest
            route segment (Roach's lateral distance), metres.
        heading_error_rad: ego yaw minus route yaw at the projection, wrapped to ``[-pi, pi]``.
        deviation_m: distance from the ego centre to the nearest point of the searched route
            stretch, metres (``lateral_m`` except level with a segment end or past the route).
        distance_driven_m: path length the ego centre has moved since reset, metres.
    """

    index: int
    progress_m: float
    completion: float
    completion_delta: float
    lateral_m: float
    heading_error_rad: float
    deviation_m: float
    distance_driven_m: float


def wrap_angle_rad(angle_rad: float) -> float:
    """Wrap an angle to ``[-pi, pi]``."""
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi


@dataclass(frozen=True)
class _RouteSegments:
    """Per-segment geometry of a route, precomputed once per route object.

    Attributes:
        start: ``(S, 2)`` segment start points.
        direction: ``(S, 2)`` unit directions (zero for degenerate segments).
        length_m: ``(S,)`` segment lengths.
        arc_start_m: ``(S,)`` arc length at each segment start.
        yaw_rad: ``(S,)`` segment headings (CARLA frame: atan2(dy, dx)).
    """

    start: np.ndarray
    direction: np.ndarray
    length_m: np.ndarray
    arc_start_m: np.ndarray
    yaw_rad: np.ndarray

    @staticmethod
    def from_route(route: Route) -> _RouteSegments:
        xy = np.asarray(route.xy, dtype=np.float64)
        if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) < 2:
            raise ValueError(
                f"route {route.route_id!r}: expected at least 2 waypoints of shape (R, 2), "
                f"got array of shape {xy.shape}"
            )
        delta = np.diff(xy, axis=0)
        length = np.hypot(delta[:, 0], delta[:, 1])
        safe = np.where(length > 1e-9, length, 1.0)
        direction = np.where(length[:, None] > 1e-9, delta / safe[:, None], 0.0)
        arc_start = np.concatenate(([0.0], np.cumsum(length)[:-1]))
        yaw = np.arctan2(delta[:, 1], delta[:, 0])
        return _RouteSegments(np.ascontiguousarray(xy[:-1]), np.ascontiguousarray(direction), length, arc_start, yaw)


@per_route
def _route_segments(route: Route) -> _RouteSegments:
    """The segments of ``route`` (routes are static and shared by a whole episode)."""
    return _RouteSegments.from_route(route)


@kernel(
    "Tuple((int64, float64, float64, float64, float64))"
    "(float64[:, ::1], float64[:, ::1], float64[::1], float64, float64, int64, int64, float64)"
)
def project_onto_segments(
    start: np.ndarray,
    direction: np.ndarray,
    length_m: np.ndarray,
    x: float,
    y: float,
    lo: int,
    hi: int,
    overlap_tolerance_m: float,
) -> tuple[int, float, float, float, float]:
    """``(segment, along_m, distance2, rx, ry)``: the projection of ``(x, y)`` onto segments
    ``lo:hi`` (the chosen segment, the clamped distance along it, the squared distance to it,
    the point's offset from its start).

    Where a route passes the same place twice (out and back, a loop), both stretches are about
    equally near and the ego is on the earlier one: segments within ``overlap_tolerance_m`` of
    the nearest form contiguous runs, and the nearest segment of the first run wins. A NaN
    point projects onto segment ``lo``.
    """
    count = hi - lo
    if lo < 0 or count <= 0 or hi > len(length_m):
        raise IndexError("project_onto_segments: lo:hi must be a non-empty range of segments")
    dist2 = np.empty(count)
    best = 0
    for k in range(count):
        j = lo + k
        rel_x, rel_y = x - start[j, 0], y - start[j, 1]
        along = min(max(rel_x * direction[j, 0] + rel_y * direction[j, 1], 0.0), length_m[j])
        offset_x, offset_y = rel_x - along * direction[j, 0], rel_y - along * direction[j, 1]
        dist2[k] = offset_x * offset_x + offset_y * offset_y
        if dist2[k] < dist2[best]:
            best = k
    limit = (math.sqrt(dist2[best]) + overlap_tolerance_m) ** 2
    first = 0
    while first < count and not dist2[first] <= limit:
        first += 1
    if first < best:
        run_end = first
        while run_end + 1 < count and dist2[run_end + 1] <= limit:
            run_end += 1
        if run_end < best:  # an earlier stretch as near as the nearest: its own nearest segment
            best = first
            for k in range(first + 1, run_end + 1):
                if dist2[k] < dist2[best]:
                    best = k
    j = lo + best
    rel_x, rel_y = x - start[j, 0], y - start[j, 1]
    along = min(max(rel_x * direction[j, 0] + rel_y * direction[j, 1], 0.0), length_m[j])
    return j, along, dist2[best], rel_x, rel_y


class RouteTracker:
    """Follows one ego along one route for one episode.

    Args:
        route: the episode's dense route.
        start_xy: ego position at reset (the first projection searches the whole route).
        start_yaw_deg: ego heading at reset.
    """

    def __init__(self, route: Route, start_xy: np.ndarray, start_yaw_deg: float) -> None:
        self.route = route
        self._segments = _route_segments(route)
        self._length_m = float(self._segments.length_m.sum())
        self._segment = 0
        self._progress_m = 0.0
        self._distance_m = 0.0
        self._last_x, self._last_y = np.asarray(start_xy, dtype=np.float64).tolist()
        self.progress = self._project(self._last_x, self._last_y, start_yaw_deg, 0, len(self._segments.length_m))

    @property
    def length_m(self) -> float:
        """Route length from the waypoints (the polyline's own length)."""
        return self._length_m

    def update(self, ego_xy: np.ndarray, ego_yaw_deg: float) -> RouteProgress:
        """Advance the tracker to the ego's new pose and return the new progress."""
        x, y = np.asarray(ego_xy, dtype=np.float64).tolist()  # floats: the caller's array may change
        self._distance_m += math.hypot(x - self._last_x, y - self._last_y)
        self._last_x, self._last_y = x, y
        lo = max(self._segment - BACKWARD_WINDOW, 0)
        hi = min(self._segment + FORWARD_WINDOW + 1, len(self._segments.length_m))
        self.progress = self._project(x, y, ego_yaw_deg, lo, hi)
        return self.progress

    def _project(self, x: float, y: float, ego_yaw_deg: float, lo: int, hi: int) -> RouteProgress:
        seg = self._segments
        segment, along_m, distance2, rx, ry = project_onto_segments(
            seg.start, seg.direction, seg.length_m, x, y, lo, hi, OVERLAP_TOLERANCE_M
        )
        # Progress never goes back: the furthest point reached counts (leaderboard RC).
        if segment >= self._segment:
            self._segment = segment
        arc_m = float(seg.arc_start_m[segment]) + along_m
        previous_m = self._progress_m
        self._progress_m = max(self._progress_m, arc_m)
        length = self._length_m if self._length_m > 0 else 1.0
        distance_m = math.sqrt(distance2)
        # Lateral error is measured to the infinite line of the segment, as Roach does, so it
        # stays meaningful when the ego is level with a segment end.
        dx, dy = seg.direction[segment].tolist()
        lateral_m = abs(rx * dy - ry * dx)
        heading_error = wrap_angle_rad(math.radians(ego_yaw_deg) - float(seg.yaw_rad[segment]))
        return RouteProgress(
            self._segment,
            self._progress_m,
            min(self._progress_m / length, 1.0),
            (self._progress_m - previous_m) / length,
            lateral_m,
            heading_error,
            distance_m,
            self._distance_m,
        )
