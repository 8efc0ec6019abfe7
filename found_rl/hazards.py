"""Where the ego's route meets other road users and stop lines: pure geometry on a snapshot.

Shared by the state vector, rewards, infractions and the expert so they agree on what is
"ahead". Distances are arc lengths along the dense route (metres) measured from the ego's
front bumper; the ego is placed on the route by projecting its centre onto the segment at
its nearest waypoint. Frames are CARLA's (x east, y south, yaw clockwise, degrees).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from found_rl.sim.snapshot import ActorBoxes, LightState, Route, StopLines, WorldSnapshot


@dataclass(frozen=True)
class LightHazard:
    """The traffic light whose stop line the route crosses next.

    Attributes:
        light_id: id of the light.
        lane_id: incoming lane the crossed segment stops.
        state: its current state.
        distance_m: along the route from the ego's front bumper to the stop line; negative
            once the bumper is past the line (reported until the ego centre passes it).
        remaining_ratio: ``remaining_s / phase_s`` of the current state, or -1 if unknown.
        index: index of the crossed segment in ``snapshot.traffic_lights``.
    """

    light_id: str
    lane_id: str
    state: LightState
    distance_m: float
    remaining_ratio: float
    index: int = -1


@dataclass(frozen=True)
class StopSignHazard:
    """The stop-sign line the route crosses next (same distance convention as lights).

    Attributes:
        sign_id: id of the stop sign.
        lane_id: incoming lane the crossed segment stops.
        distance_m: along the route from the ego's front bumper to the line.
        index: index of the crossed segment in ``snapshot.stop_signs``.
    """

    sign_id: str
    lane_id: str
    distance_m: float
    index: int = -1


@dataclass(frozen=True)
class ActorHazard:
    """A vehicle or walker whose box overlaps the route corridor ahead.

    Attributes:
        index: index into ``snapshot.vehicles`` (or ``snapshot.walkers``).
        actor_id: its id.
        distance_m: gap along the route from the ego's front bumper to the nearest point of its
            box (negative when the box reaches back past the bumper).
        speed_along_route_mps: its velocity projected on the route direction at its position.
    """

    index: int
    actor_id: str
    distance_m: float
    speed_along_route_mps: float


def nearest_route_index(route: Route, xy: np.ndarray, hint: int | None = None, window: int = 50) -> int:
    """Index of the route waypoint nearest ``xy``.

    Args:
        route: the dense route.
        xy: ``(2,)`` point, metres.
        hint: last known index; when given only ``[hint - window, hint + window]`` is searched so a
            route that passes near itself cannot make the index jump.
        window: search half-width in waypoints.
    """
    count = len(route.xy)
    if count == 0:
        raise ValueError(f"route {route.route_id!r} has no waypoints")
    if hint is None:
        low, high = 0, count
    else:
        hint = min(max(int(hint), 0), count - 1)
        low, high = max(hint - window, 0), min(hint + window + 1, count)
    point = complex(float(xy[0]), float(xy[1]))
    return low + int(np.argmin(np.abs(_route_geometry(route).xy[low:high] - point)))


def affecting_light(snapshot: WorldSnapshot, route_index: int, horizon_m: float = 50.0) -> LightHazard | None:
    """The first traffic-light stop line the route crosses within ``horizon_m`` of the bumper."""
    crossing = _first_crossing(snapshot, snapshot.traffic_lights, route_index, horizon_m)
    if crossing is None:
        return None
    index, distance_m = crossing
    lights = snapshot.traffic_lights
    remaining_s, phase_s = float(lights.remaining_s[index]), float(lights.phase_s[index])
    is_known = math.isfinite(remaining_s) and math.isfinite(phase_s) and phase_s > 0
    return LightHazard(
        light_id=lights.ids[index],
        lane_id=lights.lane_ids[index],
        state=LightState(int(lights.states[index])),
        distance_m=distance_m,
        remaining_ratio=min(max(remaining_s / phase_s, 0.0), 1.0) if is_known else -1.0,
        index=index,
    )


def affecting_stop_sign(snapshot: WorldSnapshot, route_index: int, horizon_m: float = 20.0) -> StopSignHazard | None:
    """The first stop-sign line the route crosses within ``horizon_m`` of the bumper."""
    crossing = _first_crossing(snapshot, snapshot.stop_signs, route_index, horizon_m)
    if crossing is None:
        return None
    index, distance_m = crossing
    signs = snapshot.stop_signs
    return StopSignHazard(sign_id=signs.ids[index], lane_id=signs.lane_ids[index], distance_m=distance_m, index=index)


def leading_vehicle(snapshot: WorldSnapshot, route_index: int, horizon_m: float = 40.0) -> ActorHazard | None:
    """The nearest vehicle whose box overlaps the ego-wide route corridor ahead."""
    half_width_m = float(snapshot.ego.half_extent[1])
    hazards = _actors_in_corridor(snapshot, snapshot.vehicles, route_index, horizon_m, half_width_m)
    return hazards[0] if hazards else None


def walkers_in_path(
    snapshot: WorldSnapshot,
    route_index: int,
    horizon_m: float = 20.0,
    corridor_half_width_m: float = 2.5,
) -> list[ActorHazard]:
    """Walkers whose box overlaps the route corridor ahead, nearest first."""
    return _actors_in_corridor(snapshot, snapshot.walkers, route_index, horizon_m, corridor_half_width_m)


def route_arclength_m(route: Route) -> np.ndarray:
    """``(R,)`` arc length of each waypoint from the route start (cached per route object)."""
    return _route_geometry(route).arclength_m


@dataclass(frozen=True)
class _RouteGeometry:
    """Per-route arrays every query needs, computed once per route object.

    Points and directions are complex numbers ``x + iy``: numpy broadcasts ``(N, 1) - (1, K)``
    complex arrays many times faster than ``(N, 1, 2) - (1, K, 2)`` float ones.

    Attributes:
        arclength_m: ``(R,)`` arc length of each waypoint.
        xy: ``(R,)`` complex waypoints.
        direction: ``(R,)`` complex unit heading of each waypoint (from ``yaw_deg``).
    """

    arclength_m: np.ndarray
    xy: np.ndarray
    direction: np.ndarray


_route_cache: dict[int, tuple[weakref.ref, _RouteGeometry]] = {}


def _route_geometry(route: Route) -> _RouteGeometry:
    key = id(route)
    cached = _route_cache.get(key)
    if cached is not None and cached[0]() is route:
        return cached[1]
    xy = np.asarray(route.xy, dtype=np.float64).reshape(-1, 2)
    steps = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
    geometry = _RouteGeometry(
        arclength_m=np.concatenate([[0.0], np.cumsum(steps)]),
        xy=xy[:, 0] + 1j * xy[:, 1],
        direction=np.exp(1j * np.deg2rad(np.asarray(route.yaw_deg, dtype=np.float64))),
    )
    if len(_route_cache) > 64:  # routes are few; drop everything rather than track ages
        _route_cache.clear()
    _route_cache[key] = (weakref.ref(route), geometry)
    return geometry


def _ego_arclength(snapshot: WorldSnapshot, route_index: int, geometry: _RouteGeometry) -> float:
    """Arc length of the ego centre projected onto the route near ``route_index``."""
    route = snapshot.route
    index = min(max(int(route_index), 0), len(route.xy) - 1)
    offset = complex(float(snapshot.ego.xy[0]), float(snapshot.ego.xy[1])) - complex(geometry.xy[index])
    along = (offset * complex(geometry.direction[index]).conjugate()).real
    return float(geometry.arclength_m[index]) + along


def _window_end(arclength: np.ndarray, until_m: float) -> int:
    """One past the first waypoint at or beyond arc length ``until_m``."""
    return min(int(np.searchsorted(arclength, until_m)) + 1, len(arclength))


@dataclass(frozen=True)
class _RouteCrossings:
    """Every place a route crosses a set of stop lines, sorted along the route.

    Attributes:
        arclength_m: ``(X,)`` arc length of each crossing, ascending.
        line_index: ``(X,)`` index of the crossed segment in the stop-line arrays.
    """

    arclength_m: np.ndarray
    line_index: np.ndarray


_CROSSINGS_CACHE_SIZE = 32
_crossings_cache: dict[tuple[int, int], tuple[weakref.ref, bytes, _RouteCrossings]] = {}


def _route_crossings(route: Route, geometry: _RouteGeometry, segments: np.ndarray) -> _RouteCrossings:
    """Crossings of the whole route with ``segments``, cached by route and line geometry.

    Stop lines do not move, so for a backend that reports the same lines each step this is
    computed once per route; only the lights' states change from step to step.
    """
    segments = np.ascontiguousarray(segments, dtype=np.float64)
    key_bytes = segments.tobytes()
    key = (id(route), hash(key_bytes))
    cached = _crossings_cache.get(key)
    if cached is not None and cached[0]() is route and cached[1] == key_bytes:
        return cached[2]
    crossings = _intersect_route(geometry, segments)
    if len(_crossings_cache) >= _CROSSINGS_CACHE_SIZE:
        _crossings_cache.clear()
    _crossings_cache[key] = (weakref.ref(route), key_bytes, crossings)
    return crossings


def _intersect_route(geometry: _RouteGeometry, segments: np.ndarray) -> _RouteCrossings:
    """All route-segment x stop-line intersections (pure), with ``cross(a, b) = Im(conj(a) b)``.

    Route segment ``k`` is ``p0 + t r`` and line ``m`` is ``q0 + u q``; they cross when ``t`` and
    ``u`` both lie in ``[0, 1]``. Lines are processed in chunks to bound memory on long routes.
    """
    path = geometry.xy
    if len(path) < 2 or len(segments) == 0:
        return _RouteCrossings(np.zeros(0), np.zeros(0, np.intp))
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
    return _RouteCrossings(arclength[order], np.concatenate(index_parts)[order])


def _first_crossing(
    snapshot: WorldSnapshot, lines: StopLines, route_index: int, horizon_m: float
) -> tuple[int, float] | None:
    """``(segment index, distance from bumper)`` of the first stop line the route crosses.

    A line counts from when the ego centre is before it until ``horizon_m`` past the bumper.
    """
    route = snapshot.route
    if len(lines) == 0 or len(route.xy) < 2:
        return None
    geometry = _route_geometry(route)
    crossings = _route_crossings(route, geometry, lines.segments)
    s_ego = _ego_arclength(snapshot, route_index, geometry)
    s_front = s_ego + float(snapshot.ego.half_extent[0])
    first = int(np.searchsorted(crossings.arclength_m, s_ego))
    if first == len(crossings.arclength_m) or crossings.arclength_m[first] > s_front + horizon_m:
        return None
    return int(crossings.line_index[first]), float(crossings.arclength_m[first]) - s_front


_CORNER_SIGNS = np.array([1.0, 1.0, -1.0, -1.0, 0.0]) + 1j * np.array([1.0, -1.0, -1.0, 1.0, 0.0])
"""The four box corners and the centre as ``along + i across`` signs."""


def _actors_in_corridor(
    snapshot: WorldSnapshot,
    boxes: ActorBoxes,
    route_index: int,
    horizon_m: float,
    half_width_m: float,
) -> list[ActorHazard]:
    """Boxes overlapping the strip ``|lateral| <= half_width_m`` ahead of the bumper, nearest first.

    Each corner is placed on the route by its nearest waypoint in the searched stretch; a box
    overlaps the strip when its lateral offsets reach into ``[-half_width_m, half_width_m]``
    (corners on both sides count, so a box across the corridor is caught).
    """
    route = snapshot.route
    if len(boxes) == 0 or len(route.xy) < 2:
        return []
    ego_half_length = float(snapshot.ego.half_extent[0])
    half_extent = np.asarray(boxes.half_extent, dtype=np.float64).reshape(-1, 2)
    radii = np.hypot(half_extent[:, 0], half_extent[:, 1])
    box_xy = np.asarray(boxes.xy, dtype=np.float64).reshape(-1, 2)
    centres = box_xy[:, 0] + 1j * box_xy[:, 1]
    ego = complex(float(snapshot.ego.xy[0]), float(snapshot.ego.xy[1]))
    reach = horizon_m + ego_half_length + half_width_m + radii
    candidates = np.flatnonzero(np.abs(centres - ego) <= reach)
    if len(candidates) == 0:  # the common case: cull before any route geometry
        return []
    geometry = _route_geometry(route)
    arclength = geometry.arclength_m
    s_ego = _ego_arclength(snapshot, route_index, geometry)
    s_front = s_ego + ego_half_length
    start = min(max(int(route_index) - 2, 0), len(route.xy) - 1)
    end = _window_end(arclength, s_front + horizon_m + float(radii[candidates].max()) + 1.0)
    path, path_s, path_direction = geometry.xy[start:end], arclength[start:end], geometry.direction[start:end]

    # Corners and centre of each candidate: (n, 5) complex, rotated by the box heading.
    heading = np.exp(1j * np.deg2rad(np.asarray(boxes.yaw_deg, dtype=np.float64)[candidates]))
    local = half_extent[candidates, :1] * _CORNER_SIGNS.real + 1j * (half_extent[candidates, 1:] * _CORNER_SIGNS.imag)
    points = (centres[candidates, None] + local * heading[:, None]).ravel()
    delta = points[:, None] - path[None, :]
    nearest = np.argmin(delta.real**2 + delta.imag**2, axis=1)  # squared: no square roots
    direction = path_direction[nearest]
    in_route_frame = (points - path[nearest]) * direction.conj()  # along + i lateral (lateral > 0: right)
    along_m = (path_s[nearest] + in_route_frame.real).reshape(-1, 5)
    lateral_m = in_route_frame.imag.reshape(-1, 5)

    box_along, box_lateral = along_m[:, :4], lateral_m[:, :4]
    gap_m = box_along.min(axis=1) - s_front
    is_hazard = (
        (box_lateral.min(axis=1) <= half_width_m)
        & (box_lateral.max(axis=1) >= -half_width_m)
        & (box_along.max(axis=1) >= s_front)
        & (gap_m <= horizon_m)
    )
    if not is_hazard.any():
        return []
    centre_direction = direction.reshape(-1, 5)[:, 4]
    velocity = np.asarray(boxes.velocity_xy, dtype=np.float64).reshape(-1, 2)[candidates]
    speed_along = (velocity[:, 0] * centre_direction.real) + (velocity[:, 1] * centre_direction.imag)
    hazards = [
        ActorHazard(
            index=int(candidates[k]),
            actor_id=boxes.ids[candidates[k]],
            distance_m=float(gap_m[k]),
            speed_along_route_mps=float(speed_along[k]),
        )
        for k in np.flatnonzero(is_hazard)
    ]
    hazards.sort(key=lambda hazard: hazard.distance_m)
    return hazards
