"""Driving-action convention, re-exported from ``vlm_server.actions`` where it is defined once."""

from vlm_server.actions import (
    ACC_INDEX,
    ACTION_DIM,
    STEER_INDEX,
    Controls,
    RoadOption,
    action_to_controls,
    controls_to_action,
)

__all__ = [
    "ACC_INDEX",
    "ACTION_DIM",
    "STEER_INDEX",
    "Controls",
    "RoadOption",
    "action_to_controls",
    "controls_to_action",
]
