"""How closely a VLM advisor's answers match the expert, overall and per command (pure math).

- ``parse_rate``: share of answers that parse into an action (``vlm_server.answers``).
- ``mae_acc``, ``mae_steer``: mean absolute error against the expert's ``(acc, steer)``, over
  the parsed answers only (an unparsed answer has no value to compare; ``parse_rate`` counts it).
- ``class_agreement``: share of *all* samples whose answer falls in the expert's METHOD §3
  action class (30 classes, ``vlm_server.anchors.action_index``); an unparsed answer disagrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vlm_server.actions import RoadOption
from vlm_server.anchors import action_index

METRICS = ("parse_rate", "mae_acc", "mae_steer", "class_agreement")


def score(
    expert: Sequence[tuple[float, float]], predicted: Sequence[tuple[float, float] | None]
) -> dict[str, float]:
    """The four metrics plus ``samples`` and ``parsed`` counts; NaN MAEs when nothing parsed.

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(expert) != len(predicted) or not expert:
        raise ValueError(f"need as many predictions as expert actions (> 0), got {len(predicted)} and {len(expert)}")
    parsed = [(e, p) for e, p in zip(expert, predicted) if p is not None]
    errors = np.abs(np.array([p for _, p in parsed], dtype=np.float64) - np.array([e for e, _ in parsed]))
    agreeing = sum(action_index(*e) == action_index(*p) for e, p in parsed)
    return {
        "parse_rate": len(parsed) / len(expert),
        "mae_acc": float(errors[:, 0].mean()) if parsed else float("nan"),
        "mae_steer": float(errors[:, 1].mean()) if parsed else float("nan"),
        "class_agreement": agreeing / len(expert),
        "samples": len(expert),
        "parsed": len(parsed),
    }


def score_by_command(
    commands: Sequence[int], expert: Sequence[tuple[float, float]], predicted: Sequence[tuple[float, float] | None]
) -> dict[str, Any]:
    """``score`` over everything, plus ``per_command``: ``{command name: score}`` for each command present."""
    report: dict[str, Any] = score(expert, predicted)
    per_command = {}
    for command in sorted(set(commands)):
        chosen = [i for i, c in enumerate(commands) if c == command]
        per_command[command_name(command)] = score([expert[i] for i in chosen], [predicted[i] for i in chosen])
    report["per_command"] = per_command
    return report


def command_name(command: int) -> str:
    """``LANEFOLLOW`` for 4; the number itself for a value that is not a RoadOption."""
    try:
        return RoadOption(command).name
    except ValueError:
        return str(command)
