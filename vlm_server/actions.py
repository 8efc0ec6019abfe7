"""The one driving-action convention shared by every part of found-rl (ARCHITECTURE §3).

It lives in ``vlm_server`` because that package may not import ``found_rl`` while both the
advisor (VLM answer parsing, CLIP action descriptions) and the driving env need it;
``found_rl.actions`` re-exports it.

Action: ``(acc, steer)`` in ``[-1, 1]²``. ``acc >= 0`` is throttle, ``acc < 0`` is brake;
``steer > 0`` turns right (CARLA's sign).
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import NamedTuple

ACTION_DIM = 2
ACC_INDEX = 0
STEER_INDEX = 1


class RoadOption(IntEnum):
    """High-level route command, with CARLA's ``RoadOption`` values."""

    VOID = -1
    LEFT = 1
    RIGHT = 2
    STRAIGHT = 3
    LANEFOLLOW = 4
    CHANGELANELEFT = 5
    CHANGELANERIGHT = 6


class Controls(NamedTuple):
    """Vehicle controls as CARLA's ``VehicleControl`` takes them."""

    throttle: float
    steer: float
    brake: float


def action_to_controls(acc: float, steer: float) -> Controls:
    """Split a policy action into throttle and brake (clipped to their ranges)."""
    if not (math.isfinite(acc) and math.isfinite(steer)):
        raise ValueError(f"action must be finite, got acc={acc}, steer={steer}")
    acc = min(1.0, max(-1.0, float(acc)))
    steer = min(1.0, max(-1.0, float(steer)))
    return Controls(throttle=max(acc, 0.0), steer=steer, brake=max(-acc, 0.0))


def controls_to_action(throttle: float, steer: float, brake: float) -> tuple[float, float]:
    """Map ``{throttle, steer, brake}`` (e.g. a VLM answer) back to ``(acc, steer)``.

    ``acc = throttle`` if throttle dominates, ``-brake`` if brake does, else 0.
    """
    for name, value in (("throttle", throttle), ("steer", steer), ("brake", brake)):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
    throttle = min(1.0, max(0.0, float(throttle)))
    brake = min(1.0, max(0.0, float(brake)))
    steer = min(1.0, max(-1.0, float(steer)))
    if throttle > brake:
        acc = throttle
    elif brake > 0.0:
        acc = -brake
    else:
        acc = 0.0
    return acc, steer
