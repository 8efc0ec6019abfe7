"""Where the ego's route meets other road users and stop lines: pure geometry on a snapshot.

Shared by the state vector, rewards, infractions and the expert so they agree on what is
"ahead". Distances are arc lengths along the dense route (metres) measured from the ego's
front bumper; the ego is placed on the route by projecting its centre onto the segment at
its nearest waypoint. Frames are CARLA's (x east, y south, yaw clockwise, degrees).

This module holds the public queries; ``results`` the answers they give, ``geometry`` the
per-route arrays and the ego's arc length, ``crossings`` where a route meets stop lines, and
``corridor`` which road users overlap the strip ahead.
"""

from __future__ import annotations

import math

import numpy as np

from found_rl.hazards.corridor import actors_in_corridor
from found_rl.hazards.crossings import first_crossing
from found_rl.hazards.geometry import nearest_waypoint, route_geometry
from found_rl.hazards.results import ActorHazard, LightHazard, StopSignHazard
from found_rl.world import LightState, Route, WorldSnapshot

__all__ = [
    "ActorHazard",
    "LightHazard",
    "StopSignHazard",
    "affecting_light",
    "affecting_stop_sign",
    "leading_vehicle",
    "nearest_route_index",
    "route_arclength_m",
    "walkers_in_path",
]


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
    return nearest_waypoint(route_geometry(route).xy, float(xy[0]), float(xy[1]), low, high)


def affecting_light(snapshot: WorldSnapshot, route_index: int, horizon_m: float = 50.0) -> LightHazard | None:
    """The first traffic-light stop line the route crosses within ``horizon_m`` of the bumper."""
    crossing = first_crossing(snapshot, snapshot.traffic_lights, route_index, horizon_m)
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
    crossing = first_crossing(snapshot, snapshot.stop_signs, route_index, horizon_m)
    if crossing is None:
        return None
    index, distance_m = crossing
    signs = snapshot.stop_signs
    return StopSignHazard(sign_id=signs.ids[index], lane_id=signs.lane_ids[index], distance_m=distance_m, index=index)


def leading_vehicle(snapshot: WorldSnapshot, route_index: int, horizon_m: float = 40.0) -> ActorHazard | None:
    """The nearest vehicle whose box overlaps the ego-wide route corridor ahead."""
    half_width_m = float(snapshot.ego.half_extent[1])
    hazards = actors_in_corridor(snapshot, snapshot.vehicles, route_index, horizon_m, half_width_m)
    return hazards[0] if hazards else None


def walkers_in_path(
    snapshot: WorldSnapshot,
    route_index: int,
    horizon_m: float = 20.0,
    corridor_half_width_m: float = 2.5,
) -> list[ActorHazard]:
    """Walkers whose box overlaps the route corridor ahead, nearest first."""
    return actors_in_corridor(snapshot, snapshot.walkers, route_index, horizon_m, corridor_half_width_m)


def route_arclength_m(route: Route) -> np.ndarray:
    """``(R,)`` arc length of each waypoint from the route start (cached per route object)."""
    return route_geometry(route).arclength_m
