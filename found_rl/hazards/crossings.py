"""Where a route crosses stop lines (traffic lights, stop signs), cached per route and line set."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from found_rl.hazards.geometry import RouteGeometry, ego_arclength, route_geometry
from found_rl.world import Route, StopLines, WorldSnapshot


@dataclass(frozen=True)
class RouteCrossings:
    """Every place a route crosses a set of stop lines, sorted along the route.

    Attributes:
        arclength_m: ``(X,)`` arc length of each crossing, ascending.
        line_index: ``(X,)`` index of the crossed segment in the stop-line arrays.
    """

    arclength_m: np.ndarray
    line_index: np.ndarray


_CROSSINGS_CACHE_SIZE = 32
_crossings_cache: dict[tuple[int, int], tuple[weakref.ref, bytes, RouteCrossings]] = {}


def route_crossings(route: Route, geometry: RouteGeometry, segments: np.ndarray) -> RouteCrossings:
    """Crossings of the whole route with ``segments``, cached by route and line geometry.

    Stop lines do not move, so for a backend that reports the same lines each step this is
    computed once per route; only the lights' states change from step to step.
    """
    segments = np.ascontiguousarray(segments, dtype=np.float64)
    key_bytes = segments.tobytes()
    last = _last_crossings[0]
    if last is not None and last[0]() is route and last[1] == key_bytes:  # the usual repeat
        return last[2]
    key = (id(route), hash(key_bytes))
    cached = _crossings_cache.get(key)
    if cached is None or cached[0]() is not route or cached[1] != key_bytes:
        crossings = intersect_route(geometry, segments)
        if len(_crossings_cache) >= _CROSSINGS_CACHE_SIZE:
            _crossings_cache.clear()
        cached = _crossings_cache[key] = (weakref.ref(route), key_bytes, crossings)
    _last_crossings[0] = cached
    return cached[2]


_last_crossings: list[tuple[weakref.ref, bytes, RouteCrossings] | None] = [None]
"""The entry found last: the same route meets the same lines step after step, and comparing
their bytes with it spares hashing them."""


def intersect_route(geometry: RouteGeometry, segments: np.ndarray) -> RouteCrossings:
    """All route-segment x stop-line intersections (pure), with ``cross(a, b) = Im(conj(a) b)``.

    Route segment ``k`` is ``p0 + t r`` and line ``m`` is ``q0 + u q``; they cross when ``t`` and
    ``u`` both lie in ``[0, 1]``. Lines are processed in chunks to bound memory on long routes.
    """
    path = geometry.xy[:, 0] + 1j * geometry.xy[:, 1]
    if len(path) < 2 or len(segments) == 0:
        return RouteCrossings(np.zeros(0), np.zeros(0, np.intp))
    p0, r = path[:-1, None], np.diff(path)[:, None]  # (K, 1)
    line_start = segments[:, 0, 0] + 1j * segments[:, 0, 1]
    line_vector = (segments[:, 1, 0] + 1j * segments[:, 1, 1]) - line_start
    arclength_parts, index_parts = [], []
    chunk = max(1, 200_000 // len(p0))
    for first in range(0, len(segments), chunk):
        q0, q = line_start[None, first : first + chunk], line_vector[None, first : first + chunk]
        denominator = (r.conj() * q).imag
        offset_conj = (q0 - p0).conj()
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (offset_conj * q).imag / denominator
            u = (offset_conj * r).imag / denominator
        crosses = (denominator != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
        segment_index, line_index = np.nonzero(crosses)
        # Route segment k spans arc lengths arclength[k] .. arclength[k + 1].
        segment_start = geometry.arclength_m[segment_index]
        segment_length = geometry.arclength_m[segment_index + 1] - segment_start
        arclength_parts.append(segment_start + t[segment_index, line_index] * segment_length)
        index_parts.append(line_index + first)
    arclength = np.concatenate(arclength_parts)
    order = np.argsort(arclength, kind="stable")
    return RouteCrossings(arclength[order], np.concatenate(index_parts)[order])


def first_crossing(
    snapshot: WorldSnapshot, lines: StopLines, route_index: int, horizon_m: float
) -> tuple[int, float] | None:
    """``(segment index, distance from bumper)`` of the first stop line the route crosses.

    A line counts from when the ego centre is before it until ``horizon_m`` past the bumper.
    """
    route = snapshot.route
    if len(lines) == 0 or len(route.xy) < 2:
        return None
    geometry = route_geometry(route)
    crossings = route_crossings(route, geometry, lines.segments)
    s_ego = ego_arclength(snapshot, route_index, geometry)
    s_front = s_ego + float(snapshot.ego.half_extent[0])
    arclength = crossings.arclength_m
    first = int(np.searchsorted(arclength, s_ego))  # a NaN s_ego sorts last: no crossing
    if first == len(arclength) or not arclength[first] <= s_front + horizon_m:
        return None
    return int(crossings.line_index[first]), float(arclength[first]) - s_front
