"""Per-route arrays every hazard query needs, computed once per route object, and the ego's
place on the route (arc length along it, metres)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from found_rl.jit import kernel
from found_rl.routes.cache import per_route
from found_rl.world import Route, WorldSnapshot


@dataclass(frozen=True)
class RouteGeometry:
    """Per-route arrays every query needs, computed once per route object (C-contiguous
    float64, as the kernels take them).

    Attributes:
        arclength_m: ``(R,)`` arc length of each waypoint.
        xy: ``(R, 2)`` waypoints.
        direction: ``(R, 2)`` unit heading of each waypoint (from ``yaw_deg``).
    """

    arclength_m: np.ndarray
    xy: np.ndarray
    direction: np.ndarray


@per_route
def route_geometry(route: Route) -> RouteGeometry:
    xy = np.ascontiguousarray(np.asarray(route.xy, dtype=np.float64).reshape(-1, 2))
    steps = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
    yaw = np.deg2rad(np.asarray(route.yaw_deg, dtype=np.float64).reshape(-1))
    return RouteGeometry(
        arclength_m=np.concatenate([[0.0], np.cumsum(steps)]),
        xy=xy,
        direction=np.ascontiguousarray(np.stack([np.cos(yaw), np.sin(yaw)], axis=1)),
    )


def ego_arclength(snapshot: WorldSnapshot, route_index: int, geometry: RouteGeometry) -> float:
    """Arc length of the ego centre projected onto the route near ``route_index``."""
    ego_x, ego_y = snapshot.ego.xy.tolist()
    return arclength_at(geometry.xy, geometry.direction, geometry.arclength_m, route_index, ego_x, ego_y)


@kernel("float64(float64[:, ::1], float64[:, ::1], float64[::1], int64, float64, float64)")
def arclength_at(
    xy: np.ndarray, direction: np.ndarray, arclength_m: np.ndarray, route_index: int, x: float, y: float
) -> float:
    """Arc length of ``(x, y)`` projected on the line through waypoint ``route_index`` (clipped
    into range) along that waypoint's heading."""
    index = min(max(route_index, 0), len(arclength_m) - 1)
    along = (x - xy[index, 0]) * direction[index, 0] + (y - xy[index, 1]) * direction[index, 1]
    return arclength_m[index] + along


@kernel("int64(float64[:, ::1], float64, float64, int64, int64)")
def nearest_waypoint(xy: np.ndarray, x: float, y: float, low: int, high: int) -> int:
    """Index of the waypoint of ``xy[low:high]`` nearest ``(x, y)`` (the first of equals;
    ``low`` when the point is NaN)."""
    best, best_d2 = low, math.inf
    for k in range(low, high):
        dx, dy = xy[k, 0] - x, xy[k, 1] - y
        d2 = dx * dx + dy * dy
        if d2 < best_d2:
            best, best_d2 = k, d2
    return best
