"""VLM prompt text and tolerant parsing of its ``{"throttle", "steer", "brake"}`` answer.

Parsing is by key name, never by position (the public code took the first three numbers,
so a reordered answer silently swapped steer and brake). Values are clipped to their ranges
by ``controls_to_action``; an answer without all three keys is an error, not a zero action.
An answer writes its controls to ``ANSWER_DECIMALS`` places (``answer_controls``), and an
action's METHOD §3 class is taken after that rounding (``answer_class``), whether the action is
the expert's or a model's answer: an expert steer of 0.049 is written 0.05, and a model that
writes it back exactly must agree with the expert's class.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from vlm_server.actions import Controls, action_to_controls, controls_to_action
from vlm_server.anchors import COMMAND_PHRASES, action_index, command_index

PROMPT_TEMPLATE = (
    "You are a driving agent in a simulated environment.\n"
    "Current speed: {speed_mps:.1f} m/s.\n"
    "{target_line}"
    'Navigation command: "{command}".\n'
    "Based on the visual input and state information, predict the next action.\n"
    "Return the action in the following JSON format:\n"
    '{{"throttle": float, "steer": float, "brake": float}}'
)
KEYS = ("throttle", "steer", "brake")
ANSWER_DECIMALS = 2
"""Decimal places of each control in a training answer (``found_rl.dataset.text.chat_answer``)."""
_OBJECT = re.compile(r"\{[^{}]*\}")
_NUMBER = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_KEY_VALUE = {
    key: re.compile(rf"[\"']?{key}[\"']?\s*[:=]\s*[\"']?{_NUMBER}", re.IGNORECASE)
    for key in KEYS
}


class ParsedAnswer(NamedTuple):
    """``action = (acc, steer)`` or None with the reason in ``error``."""

    action: tuple[float, float] | None
    error: str | None


def build_prompt(
    command: int, speed_mps: float, state: Mapping[str, Any] | None = None
) -> str:
    """The advisor prompt; ``state["target_ego_xy"]`` (next route target, ego frame) is optional."""
    target_line = ""
    target = (state or {}).get("target_ego_xy")
    if isinstance(target, (list, tuple)) and len(target) == 2:
        target_line = (
            f"Forward vector: ({float(target[0]):.2f}, {float(target[1]):.2f}).\n"
        )
    return PROMPT_TEMPLATE.format(
        speed_mps=speed_mps,
        target_line=target_line,
        command=COMMAND_PHRASES[command_index(command)],
    )


def answer_controls(acc: float, steer: float) -> Controls:
    """The controls an answer writes for action ``(acc, steer)``: clipped, rounded to ``ANSWER_DECIMALS``."""
    return Controls(*(round(value, ANSWER_DECIMALS) for value in action_to_controls(acc, steer)))


def answer_class(action: tuple[float, float]) -> int:
    """METHOD §3 class index (``anchors.action_index``) of ``action`` as an answer writes it.

    The one quantisation for both sides of a class comparison: the expert's action and a
    parsed answer both pass through ``answer_controls`` (idempotent on a two-decimal answer),
    so a model that writes its training target back exactly always agrees.
    """
    return action_index(*controls_to_action(*answer_controls(*action)))


def parse_answer(text: str) -> ParsedAnswer:
    """JSON object first, then ``key: number`` pairs anywhere in the text."""
    values = _from_json(text) or _from_key_values(text)
    if values is None:
        return ParsedAnswer(None, f"unparseable answer (need keys {', '.join(KEYS)})")
    if not all(math.isfinite(v) for v in values.values()):
        return ParsedAnswer(None, "answer has non-finite numbers")
    return ParsedAnswer(
        controls_to_action(values["throttle"], values["steer"], values["brake"]), None
    )


def _from_json(text: str) -> dict[str, float] | None:
    for match in _OBJECT.finditer(text):
        try:
            obj = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        lowered = {str(k).lower(): v for k, v in obj.items()}
        try:
            return {key: float(lowered[key]) for key in KEYS}
        except (KeyError, TypeError, ValueError):
            continue
    return None


def _from_key_values(text: str) -> dict[str, float] | None:
    values = {}
    for key, pattern in _KEY_VALUE.items():
        match = pattern.search(text)
        if match is None:
            return None
        values[key] = float(match.group(1))
    return values
