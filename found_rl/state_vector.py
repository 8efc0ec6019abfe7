"""The policy's 10-number measurement vector (ARCHITECTURE §4, Roach's ``input_states``)."""

from __future__ import annotations

import math

import numpy as np

from found_rl.hazards import LightHazard, StopSignHazard
from found_rl.world import LightState, WorldSnapshot

STATE_SIZE = 10
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
)
"""Meaning of each entry, in order."""

LIGHT_DISTANCE_OFFSET_M = 5.0
LIGHT_DISTANCE_RANGE_M = 5.0
AT_STOP_SIGN_DISTANCE_M = 10.0
"""Roach: the stop-sign flag is set within 10 m of a stop line the ego has not yet served."""


def state_vector(
    snapshot: WorldSnapshot,
    light: LightHazard | None,
    stop_sign: StopSignHazard | None = None,
) -> np.ndarray:
    """The ``(10,)`` float32 state, ordered as :data:`STATE_NAMES`.

    Args:
        snapshot: the world now.
        light: the affecting traffic light (:func:`found_rl.hazards.affecting_light`), if any.
        stop_sign: the next stop sign the ego has not yet stopped at, if any (the caller tracks
            which signs are served); the flag is 1 within 10 m of it.

    Returns:
        throttle, steer, brake, gear/5, ego-frame v_x (forward) and v_y (right) in m/s, light
        state (0 none, 1 red, 2 yellow, 3 green), ``clip(d - 5, 0, 5) / 5`` for a red or yellow
        light else -1, remaining-phase ratio of the light else -1, at-stop-sign flag.
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

    return np.array(
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
