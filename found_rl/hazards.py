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
    delta = route.xy[low:high] - np.asarray(xy, dtype=np.float64)[:2]
    return low + int(np.argmin(np.einsum("ij,ij->i", delta, delta)))


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

    Attributes:
        arclength_m: ``(R,)`` arc length of each waypoint.
        direction: ``(R, 2)`` unit heading of each waypoint (from ``yaw_deg``).
    """

    arclength_m: np.ndarray
    direction: np.ndarray


_route_cache: dict[int, tuple[weakref.ref, _RouteGeometry]] = {}


def _route_geometry(route: Route) -> _RouteGeometry:
    key = id(route)
    cached = _route_cache.get(key)
    if cached is not None and cached[0]() is route:
        return cached[1]
    steps = np.hypot(*np.diff(route.xy, axis=0).T) if len(route.xy) > 1 else np.zeros(0)
    yaw = np.deg2rad(np.asarray(route.yaw_deg, dtype=np.float64))
    geometry = _RouteGeometry(
        arclength_m=np.concatenate([[0.0], np.cumsum(steps)]),
        direction=np.stack([np.cos(yaw), np.sin(yaw)], axis=1),
    )
    if len(_route_cache) > 64:  # routes are few; drop everything rather than track ages
        _route_cache.clear()
    _route_cache[key] = (weakref.ref(route), geometry)
    return geometry


def _ego_arclength(snapshot: WorldSnapshot, route_index: int, geometry: _RouteGeometry) -> float:
    """Arc length of the ego centre projected onto the route near ``route_index``."""
    route = snapshot.route
    index = min(max(int(route_index), 0), len(route.xy) - 1)
    ego_x, ego_y = float(snapshot.ego.xy[0]), float(snapshot.ego.xy[1])
    route_x, route_y = route.xy[index]
    direction_x, direction_y = geometry.direction[index]
    along = (ego_x - route_x) * direction_x + (ego_y - route_y) * direction_y
    return float(geometry.arclength_m[index] + along)


def _window_end(arclength: np.ndarray, until_m: float) -> int:
    """One past the first waypoint at or beyond arc length ``until_m``."""
    return min(int(np.searchsorted(arclength, until_m)) + 1, len(arclength))


_STOP_LINE_REACH_MARGIN_M = 12.0
"""Slack on the stop-line cull: half the longest stop line (several lanes) plus rounding."""


def _first_crossing(
    snapshot: WorldSnapshot, lines: StopLines, route_index: int, horizon_m: float
) -> tuple[int, float] | None:
    """``(segment index, distance from bumper)`` of the first stop line the route crosses."""
    route = snapshot.route
    if len(lines) == 0 or len(route.xy) < 2:
        return None
    geometry = _route_geometry(route)
    arclength = geometry.arclength_m
    s_ego = _ego_arclength(snapshot, route_index, geometry)
    s_front = s_ego + float(snapshot.ego.half_extent[0])
    start = min(max(int(route_index) - 1, 0), len(route.xy) - 2)
    end = _window_end(arclength, s_front + horizon_m)
    path = route.xy[start:end]
    if len(path) < 2:
        return None
    segments = np.asarray(lines.segments, dtype=np.float64)
    # Cheap cull: only lines whose midpoint is within reach of the searched route stretch.
    to_midpoint = (segments[:, 0] + segments[:, 1]) * 0.5 - snapshot.ego.xy[:2]
    reach = (s_front + horizon_m - s_ego) + _STOP_LINE_REACH_MARGIN_M
    near = np.flatnonzero(np.einsum("ij,ij->i", to_midpoint, to_midpoint) <= reach * reach)
    if len(near) == 0:
        return None
    p0, p1 = path[:-1, None, :], path[1:, None, :]  # (K, 1, 2)
    q0, q1 = segments[near, 0][None], segments[near, 1][None]  # (1, M, 2)
    r, q = p1 - p0, q1 - q0
    denominator = r[..., 0] * q[..., 1] - r[..., 1] * q[..., 0]
    offset = q0 - p0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (offset[..., 0] * q[..., 1] - offset[..., 1] * q[..., 0]) / denominator
        u = (offset[..., 0] * r[..., 1] - offset[..., 1] * r[..., 0]) / denominator
    crosses = (denominator != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
    if not crosses.any():
        return None
    segment_index, line_index = np.nonzero(crosses)
    # Route segment k spans arc lengths arclength[start + k] .. arclength[start + k + 1].
    segment_start = arclength[start + segment_index]
    segment_length = arclength[start + segment_index + 1] - segment_start
    s_cross = segment_start + t[segment_index, line_index] * segment_length
    is_ahead = (s_cross >= s_ego) & (s_cross <= s_front + horizon_m)
    if not is_ahead.any():
        return None
    best = np.flatnonzero(is_ahead)[np.argmin(s_cross[is_ahead])]
    return int(near[line_index[best]]), float(s_cross[best] - s_front)


_CORNER_SIGNS = np.array([[1.0, 1.0, -1.0, -1.0, 0.0], [1.0, -1.0, -1.0, 1.0, 0.0]])
"""(along, across) signs of the four box corners and the centre."""


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
    geometry = _route_geometry(route)
    arclength = geometry.arclength_m
    s_ego = _ego_arclength(snapshot, route_index, geometry)
    ego_half_length = float(snapshot.ego.half_extent[0])
    s_front = s_ego + ego_half_length
    half_extent = np.asarray(boxes.half_extent, dtype=np.float64)
    radii = np.hypot(half_extent[:, 0], half_extent[:, 1])
    to_box = np.asarray(boxes.xy, dtype=np.float64) - snapshot.ego.xy[:2]
    reach = horizon_m + ego_half_length + half_width_m + radii
    candidates = np.flatnonzero(np.einsum("ij,ij->i", to_box, to_box) <= reach * reach)
    if len(candidates) == 0:
        return []
    start = min(max(int(route_index) - 2, 0), len(route.xy) - 1)
    end = _window_end(arclength, s_front + horizon_m + float(radii[candidates].max()) + 1.0)
    path, path_s, path_direction = route.xy[start:end], arclength[start:end], geometry.direction[start:end]

    # Corners and centre of each candidate, via complex rotation: (n, 5) complex -> (5n, 2).
    heading = np.exp(1j * np.deg2rad(np.asarray(boxes.yaw_deg, dtype=np.float64)[candidates]))
    local = half_extent[candidates, :1] * _CORNER_SIGNS[0] + 1j * (half_extent[candidates, 1:] * _CORNER_SIGNS[1])
    centres = np.ascontiguousarray(boxes.xy[candidates], dtype=np.float64).view(np.complex128)
    points = np.ascontiguousarray(centres + local * heading[:, None]).view(np.float64).reshape(-1, 2)
    delta = points[:, None, :] - path[None, :, :]
    nearest = np.argmin(np.einsum("ijk,ijk->ij", delta, delta), axis=1)
    offset = points - path[nearest]
    direction = path_direction[nearest]
    along_m = (path_s[nearest] + np.einsum("ij,ij->i", offset, direction)).reshape(-1, 5)
    lateral_m = (offset[:, 1] * direction[:, 0] - offset[:, 0] * direction[:, 1]).reshape(-1, 5)

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
    centre_direction = direction.reshape(-1, 5, 2)[:, 4]
    speed_along = np.einsum("ij,ij->i", boxes.velocity_xy[candidates], centre_direction)
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
