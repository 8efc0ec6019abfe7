"""Tracking the ego's progress along its dense route.

The ego is projected onto the route polyline within a window around its last position, so
progress is continuous (not quantised to the 1 m waypoint spacing), never jumps to a far
part of a route that loops back on itself, and only moves forward. From the projection come
route completion (leaderboard RC), the lateral and heading errors the rewards use, and the
deviation distance the route-deviation infraction uses.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from found_rl.hazards.geometry import FAST_PATH_LIMIT
from found_rl.route_cache import per_route
from found_rl.sim.snapshot import Route

BACKWARD_WINDOW = 5
"""Segments searched behind the current one (the ego may roll back a little)."""

FORWARD_WINDOW = 60
"""Segments searched ahead of the current one (about 60 m at 1 m spacing; 6 s at 36 km/h)."""

OVERLAP_TOLERANCE_M = 1.0
"""Two stretches of a route this close in distance to the ego count as equally near."""


_GRID_CELL_M = 3.0
"""Cell size of the per-route grid that finds the segments near the ego."""

_GRID_MARGIN_M = 0.01
"""Segments are filed in every cell their bounding box, grown by this, meets."""

_GRID_REACH_M = _GRID_CELL_M - 2 * _GRID_MARGIN_M
"""Every segment with a point this close to the ego is in the 3 x 3 cells around it (a point
within a cell of the ego lies in those cells; the margins absorb rounding)."""

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


def _earliest_nearest(dist2: np.ndarray) -> int:
    """Index of the nearest segment, preferring an earlier stretch of the route.

    Where a route passes the same place twice (out and back, a loop), both stretches are about
    equally near; the ego is on the earlier one. Segments within ``OVERLAP_TOLERANCE_M`` of
    the nearest form contiguous runs; the nearest segment of the first run wins.
    """
    best = int(dist2.argmin())
    limit = (math.sqrt(dist2[best].item()) + OVERLAP_TOLERANCE_M) ** 2
    near = dist2 <= limit
    first = int(near.argmax())
    if first == best:
        return best
    run_end = first
    while run_end + 1 < len(near) and near[run_end + 1]:
        run_end += 1
    if run_end >= best:
        return best
    return first + int(dist2[first : run_end + 1].argmin())


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
        rows: per segment ``(start x, start y, direction x, direction y, length)`` as Python
            floats, and ``arc_start_list``, ``yaw_list``: the per-step projection reads these
            (indexing numpy arrays costs more than the arithmetic).
        is_tame: all numbers finite and far from overflow (else the projection stays numpy).
    """

    start: np.ndarray
    direction: np.ndarray
    length_m: np.ndarray
    arc_start_m: np.ndarray
    yaw_rad: np.ndarray
    rows: list[tuple[float, float, float, float, float]] = field(init=False, repr=False)
    arc_start_list: list[float] = field(init=False, repr=False)
    yaw_list: list[float] = field(init=False, repr=False)
    is_tame: bool = field(init=False, repr=False)
    _cells: dict[tuple[int, int], tuple[int, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Python floats for the per-step loop: (start x, start y, direction x, direction y, length).
        rows = list(zip(*(column.tolist() for column in (*self.start.T, *self.direction.T, self.length_m))))
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "arc_start_list", self.arc_start_m.tolist())
        object.__setattr__(self, "yaw_list", self.yaw_rad.tolist())
        # Finite and far from overflow: the Python projection cannot meet a NaN or an infinity.
        extent = np.abs(np.concatenate([self.start.ravel(), self.length_m]))
        object.__setattr__(self, "is_tame", bool(np.all(extent < FAST_PATH_LIMIT)))
        object.__setattr__(self, "_cells", {})

    def indices_near(self, x: float, y: float) -> tuple[int, ...]:
        """Ascending indices of every segment with a point within :data:`_GRID_REACH_M` of
        ``(x, y)`` (and maybe a few more): those touching the 3 x 3 grid cells around it."""
        key = (math.floor(x / _GRID_CELL_M), math.floor(y / _GRID_CELL_M))
        found = self._cells.get(key)
        if found is None:  # the ego crosses a cell in several steps: gather each block once
            found = self._cells[key] = self._touching_block(*key)
        return found

    def _touching_block(self, cx: int, cy: int) -> tuple[int, ...]:
        """Segments whose bounding box, grown by a margin, meets cells ``cx-1..cx+1, cy-1..cy+1``."""
        end = self.start + self.direction * self.length_m[:, None]
        low, high = np.minimum(self.start, end) - _GRID_MARGIN_M, np.maximum(self.start, end) + _GRID_MARGIN_M
        block_low = np.array([(cx - 1) * _GRID_CELL_M, (cy - 1) * _GRID_CELL_M])
        block_high = block_low + 3 * _GRID_CELL_M
        touching = np.all((low <= block_high) & (high >= block_low), axis=1)
        return tuple(np.flatnonzero(touching).tolist())

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
        return _RouteSegments(xy[:-1].copy(), direction, length, arc_start, yaw)


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
        self._nearest_key: tuple[float, float, int, int, float, float] | None = None
        self._nearest_value = (0, 0.0, 0.0, 0.0, 0.0)
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
        hi = min(self._segment + FORWARD_WINDOW + 1, len(self._segments.rows))
        self.progress = self._project(x, y, ego_yaw_deg, lo, hi)
        return self.progress

    def _project(self, x: float, y: float, ego_yaw_deg: float, lo: int, hi: int) -> RouteProgress:
        best, along_m, distance2, rx, ry = self._nearest(x, y, lo, hi)
        seg = self._segments
        segment = lo + best
        # Progress never goes back: the furthest point reached counts (leaderboard RC).
        if segment >= self._segment:
            self._segment = segment
        # Python floats from here on: numpy scalar arithmetic is several times slower.
        arc_m = seg.arc_start_list[segment] + along_m
        previous_m = self._progress_m
        self._progress_m = max(self._progress_m, arc_m)
        length = self._length_m if self._length_m > 0 else 1.0
        distance_m = math.sqrt(distance2)
        # Lateral error is measured to the infinite line of the segment, as Roach does, so it
        # stays meaningful when the ego is level with a segment end.
        _, _, dx, dy, _ = seg.rows[segment]
        lateral_m = abs(rx * dy - ry * dx)
        heading_error = wrap_angle_rad(math.radians(ego_yaw_deg) - seg.yaw_list[segment])
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

    def _nearest(self, x: float, y: float, lo: int, hi: int) -> tuple[int, float, float, float, float]:
        """``(best, along_m, distance2, rx, ry)`` of the projection onto segments ``lo:hi``:
        the chosen segment (relative to ``lo``), the clamped distance along it, the squared
        distance to it and the ego's offset from its start.

        The same pose in the same window gives the same answer, so a standing ego (at a red
        light, in a queue) reuses the last one.
        """
        key = (x, y, lo, hi, math.copysign(1.0, x), math.copysign(1.0, y))  # equal floats but for -0.0
        if key == self._nearest_key:
            return self._nearest_value
        is_tame = self._segments.is_tame and abs(x) < FAST_PATH_LIMIT and abs(y) < FAST_PATH_LIMIT  # False for NaN
        value = self._nearest_fast(x, y, lo, hi) if is_tame else None
        if value is None:
            value = self._nearest_reference(np.array([x, y]), lo, hi)
        self._nearest_key, self._nearest_value = key, value
        return value

    def _nearest_fast(self, x: float, y: float, lo: int, hi: int) -> tuple[int, float, float, float, float] | None:
        """:meth:`_nearest_reference` on Python floats, for the segments near the ego only.

        Segments farther than ``dmin + OVERLAP_TOLERANCE_M`` cannot be the nearest nor in a
        run of near ones, so only those in the grid cells around the ego are measured; that
        is exact while ``dmin + OVERLAP_TOLERANCE_M`` stays inside the cells' guaranteed
        reach, else ``None`` (and the reference decides). The arithmetic is the reference's,
        operation for operation (``einsum`` over two columns adds the two products in order).
        """
        seg = self._segments
        indices = seg.indices_near(x, y)
        first, last = bisect.bisect_left(indices, lo), bisect.bisect_left(indices, hi)
        if first == last:
            return None
        rows = seg.rows
        near_indices = indices[first:last]
        dist2, projections = [], []
        for j in near_indices:
            start_x, start_y, direction_x, direction_y, length_m = rows[j]
            rel_x, rel_y = x - start_x, y - start_y
            along = rel_x * direction_x + rel_y * direction_y
            along = along if along > 0.0 else 0.0
            along = along if along < length_m else length_m
            offset_x, offset_y = rel_x - along * direction_x, rel_y - along * direction_y
            dist2.append(offset_x * offset_x + offset_y * offset_y)
            projections.append((along, rel_x, rel_y))
        best_m2 = min(dist2)
        if not math.sqrt(best_m2) + OVERLAP_TOLERANCE_M < _GRID_REACH_M - _GRID_MARGIN_M:  # also rejects NaN
            return None
        position = _earliest_nearest_sparse(near_indices, dist2, best_m2)
        along, rel_x, rel_y = projections[position]
        return near_indices[position] - lo, along, dist2[position], rel_x, rel_y

    def _nearest_reference(self, ego_xy: np.ndarray, lo: int, hi: int) -> tuple[int, float, float, float, float]:
        """The vectorised projection the fast path reproduces (and falls back to for NaNs)."""
        seg = self._segments
        rel = ego_xy - seg.start[lo:hi]
        along = np.minimum(np.maximum(np.einsum("ij,ij->i", rel, seg.direction[lo:hi]), 0.0), seg.length_m[lo:hi])
        offset = rel - along[:, None] * seg.direction[lo:hi]
        dist2 = np.einsum("ij,ij->i", offset, offset)
        best = _earliest_nearest(dist2)
        rx, ry = rel[best].tolist()
        return best, along[best].item(), dist2[best].item(), rx, ry


def _earliest_nearest_sparse(indices: tuple[int, ...], dist2: list[float], best_m2: float) -> int:
    """:func:`_earliest_nearest` given every segment within its tolerance of the nearest.

    ``indices`` (ascending) are the segments measured and ``dist2`` their squared distances;
    segments missing are known to lie beyond the tolerance, so they are neither nearest nor
    near. Returns a position in ``indices``.
    """
    limit = (math.sqrt(best_m2) + OVERLAP_TOLERANCE_M) ** 2
    near = [position for position, distance2 in enumerate(dist2) if distance2 <= limit]
    best = dist2.index(best_m2)  # the first minimum
    first = near[0]
    if first == best:
        return best
    # The run of near segments that starts at the first one: consecutive route indices.
    count = 1
    while count < len(near) and indices[near[count]] == indices[first] + count:
        count += 1
    if indices[near[count - 1]] >= indices[best]:
        return best
    run = [dist2[position] for position in near[:count]]
    return near[run.index(min(run))]


@per_route
def _route_segments(route: Route) -> _RouteSegments:
    """The segments of ``route`` (routes are static and shared by a whole episode)."""
    return _RouteSegments.from_route(route)
