"""Route points ahead of the ego, in the ego's frame.

The expert steers by them, the VLM's prompt names one (its next target) and the policy's state
vector carries a few: what the CARLA leaderboard gives every agent as its route, in the frame in
which steering is a smooth function of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from found_rl.routes.cache import per_route
from found_rl.world import Route


def world_to_ego(points_xy: np.ndarray, ego_xy: np.ndarray, ego_yaw_deg: float) -> np.ndarray:
    """World points ``(N, 2)`` to the ego frame (x forward, y right; CARLA frame, metres)."""
    yaw = math.radians(ego_yaw_deg)
    cos, sin = math.cos(yaw), math.sin(yaw)
    delta = np.asarray(points_xy, dtype=np.float64) - np.asarray(ego_xy, dtype=np.float64)
    forward = delta[:, 0] * cos + delta[:, 1] * sin
    right = -delta[:, 0] * sin + delta[:, 1] * cos
    return np.stack([forward, right], axis=1)


@per_route
def route_arc_m(route: Route) -> np.ndarray:
    """``(R,)`` arc length of each waypoint from the route's start, metres."""
    xy = np.asarray(route.xy, dtype=np.float64)
    steps = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
    return np.concatenate([[0.0], np.cumsum(steps)])


def route_points_ego(
    route: Route, arc_m: Sequence[float] | np.ndarray, ego_xy: np.ndarray, ego_yaw_deg: float
) -> np.ndarray:
    """``(K, 2)`` route points at arc lengths ``arc_m`` from the route's start, in the ego frame.

    Arc lengths past either end give that end's waypoint: a route about to end points at its end.
    """
    arcs = route_arc_m(route)
    wanted = np.asarray(arc_m, dtype=np.float64)
    xs = np.interp(wanted, arcs, route.xy[:, 0])
    ys = np.interp(wanted, arcs, route.xy[:, 1])
    return world_to_ego(np.stack([xs, ys], axis=1), ego_xy, ego_yaw_deg)
