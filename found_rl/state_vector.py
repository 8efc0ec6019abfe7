"""The policy's 18-number measurement vector: Roach's ten ``input_states`` (ARCHITECTURE §4)
and four route points ahead in the ego frame (TransFuser's and TCP's target point, four deep).

The route is in the BEV too, but at the ``cpu`` network's 0.8 m a pixel a corner of 4 m radius
is a few pixels, while the road leaves 0.3 m of slack; in the ego frame the points are exact,
and steering is close to a linear function of them (the expert's Stanley law reads the same).
"""

from __future__ import annotations

import math

import numpy as np

from found_rl.hazards import LightHazard, StopSignHazard
from found_rl.routes.ahead import route_points_ego
from found_rl.world import LightState, WorldSnapshot

ROUTE_POINT_ARCS_M = (2.0, 5.0, 10.0, 20.0)
"""How far ahead of the ego's projection on its route, along the route, each point lies."""
ROUTE_POINT_SCALE_M = 10.0
"""Route points enter the state in units of 10 m (values of order one for the network)."""

ROUTE_POINT_NAMES = tuple(
    f"route_{arc:g}m_{axis}" for arc in ROUTE_POINT_ARCS_M for axis in ("forward", "right")
)
STATE_NAMES = (
    "throttle",
    "steer",
    "brake",
    "gear_over_5",
    "velocity_forward_mps",
    "velocity_right_mps",
    "light_state",
    "light_distance_ratio",
    "light_remaining_ratio",
    "at_stop_sign",
    *ROUTE_POINT_NAMES,
)
"""Meaning of each entry, in order."""
STATE_SIZE = len(STATE_NAMES)
ROACH_STATE_SIZE = STATE_SIZE - len(ROUTE_POINT_NAMES)
"""The state's length before the route points (policies saved then read ten numbers)."""

LIGHT_DISTANCE_OFFSET_M = 5.0
LIGHT_DISTANCE_RANGE_M = 5.0
AT_STOP_SIGN_DISTANCE_M = 10.0
"""Roach: the stop-sign flag is set within 10 m of a stop line the ego has not yet served."""


def state_vector(
    snapshot: WorldSnapshot,
    light: LightHazard | None,
    stop_sign: StopSignHazard | None,
    route_progress_m: float,
) -> np.ndarray:
    """The ``(18,)`` float32 state, ordered as :data:`STATE_NAMES`.

    Args:
        snapshot: the world now.
        light: the affecting traffic light (:func:`found_rl.hazards.affecting_light`), if any.
        stop_sign: the next stop sign the ego has not yet stopped at, if any (the caller tracks
            which signs are served); the flag is 1 within 10 m of it.
        route_progress_m: the ego's arc length along ``snapshot.route``
            (:attr:`~found_rl.routes.progress.RouteProgress.progress_m`).

    Returns:
        throttle, steer, brake, gear/5, ego-frame v_x (forward) and v_y (right) in m/s, light
        state (0 none, 1 red, 2 yellow, 3 green), ``clip(d - 5, 0, 5) / 5`` for a red or yellow
        light else -1, remaining-phase ratio of the light else -1, at-stop-sign flag, then
        (forward, right) / 10 m of the route points :data:`ROUTE_POINT_ARCS_M` ahead.
    """
    ego = snapshot.ego
    yaw = math.radians(ego.yaw_deg)
    cos, sin = math.cos(yaw), math.sin(yaw)
    velocity_x, velocity_y = float(ego.velocity_xy[0]), float(ego.velocity_xy[1])
    forward_mps = velocity_x * cos + velocity_y * sin
    right_mps = -velocity_x * sin + velocity_y * cos

    light_code, distance_ratio, remaining_ratio = 0.0, -1.0, -1.0
    if light is not None:
        light_code = float(int(light.state))
        remaining_ratio = float(light.remaining_ratio)
        if light.state in (LightState.RED, LightState.YELLOW):
            distance_ratio = min(max(light.distance_m - LIGHT_DISTANCE_OFFSET_M, 0.0), LIGHT_DISTANCE_RANGE_M)
            distance_ratio /= LIGHT_DISTANCE_RANGE_M
    at_stop_sign = float(stop_sign is not None and stop_sign.distance_m <= AT_STOP_SIGN_DISTANCE_M)
    arcs = route_progress_m + np.asarray(ROUTE_POINT_ARCS_M)
    route_points = route_points_ego(snapshot.route, arcs, ego.xy, ego.yaw_deg) / ROUTE_POINT_SCALE_M

    measurements = np.array(
        [
            ego.throttle,
            ego.steer,
            ego.brake,
            ego.gear / 5.0,
            forward_mps,
            right_mps,
            light_code,
            distance_ratio,
            remaining_ratio,
            at_stop_sign,
        ],
        dtype=np.float32,
    )
    return np.concatenate([measurements, route_points.astype(np.float32).reshape(-1)])
