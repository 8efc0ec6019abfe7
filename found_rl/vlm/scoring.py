"""How closely a VLM advisor's answers match the expert, overall and per command (pure math).

- ``parse_rate``: share of answers that parse into an action (``vlm_server.answers``).
- ``mae_acc``, ``mae_steer``: mean absolute error against the expert's ``(acc, steer)``, over
  the parsed answers only (an unparsed answer has no value to compare; ``parse_rate`` counts it).
- ``class_agreement``: share of *all* samples whose answer falls in the expert's METHOD §3
  action class (30 classes); an unparsed answer disagrees. Both classes are taken after the
  answer's two-decimal rounding (``vlm_server.answers.answer_class``), the expert's included.

A report also scores image-blind baselines (``found_rl.vlm.baselines``) on the same samples,
with the same three numbers (``BASELINE_METRICS``), overall and in every breakdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from found_rl.vlm.baselines import BaselineAnswer
from vlm_server.actions import RoadOption
from vlm_server.answers import answer_class

METRICS = ("parse_rate", "mae_acc", "mae_steer", "class_agreement")
BASELINE_METRICS = ("class_agreement", "mae_acc", "mae_steer")


def score(
    expert: Sequence[tuple[float, float]],
    predicted: Sequence[tuple[float, float] | None],
    predicted_classes: Sequence[int | None] | None = None,
) -> dict[str, float]:
    """The four metrics plus ``samples`` and ``parsed`` counts; NaN MAEs when nothing parsed.

    Args:
        predicted_classes: the class each answer names, when it names one apart from its action
            (a baseline's majority class); by default each parsed action's ``answer_class``.

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(expert) != len(predicted) or not expert:
        raise ValueError(f"need as many predictions as expert actions (> 0), got {len(predicted)} and {len(expert)}")
    if predicted_classes is None:
        predicted_classes = [None if p is None else answer_class(p) for p in predicted]
    parsed = [(e, p) for e, p in zip(expert, predicted) if p is not None]
    errors = np.abs(np.array([p for _, p in parsed], dtype=np.float64) - np.array([e for e, _ in parsed]))
    agreeing = sum(c is not None and answer_class(e) == c for e, c in zip(expert, predicted_classes))
    return {
        "parse_rate": len(parsed) / len(expert),
        "mae_acc": float(errors[:, 0].mean()) if parsed else float("nan"),
        "mae_steer": float(errors[:, 1].mean()) if parsed else float("nan"),
        "class_agreement": agreeing / len(expert),
        "samples": len(expert),
        "parsed": len(parsed),
    }


def score_with_baselines(
    expert: Sequence[tuple[float, float]],
    predicted: Sequence[tuple[float, float] | None],
    baselines: dict[str, Sequence[BaselineAnswer]],
) -> dict[str, Any]:
    """``score`` of the model plus ``baselines``: ``{name: {class_agreement, mae_acc, mae_steer}}``."""
    report: dict[str, Any] = score(expert, predicted)
    report["baselines"] = {}
    for name, answers in baselines.items():
        scored = score(expert, [a.action for a in answers], [a.action_class for a in answers])
        report["baselines"][name] = {metric: scored[metric] for metric in BASELINE_METRICS}
    return report


def score_report(
    expert: Sequence[tuple[float, float]],
    predicted: Sequence[tuple[float, float] | None],
    breakdowns: dict[str, Sequence[str]],
    baselines: dict[str, Sequence[BaselineAnswer]] | None = None,
) -> dict[str, Any]:
    """``score_with_baselines`` over everything, and per group of each breakdown.

    Args:
        breakdowns: ``{report key: group name of each sample}``, e.g. ``{"per_command": [...]}``;
            each key becomes ``{group: scores}`` over the groups present, sorted by name.
    """
    baselines = baselines or {}
    report = score_with_baselines(expert, predicted, baselines)
    for key, groups in breakdowns.items():
        report[key] = {}
        for group in sorted(set(groups)):
            chosen = [i for i, g in enumerate(groups) if g == group]
            report[key][group] = score_with_baselines(
                [expert[i] for i in chosen],
                [predicted[i] for i in chosen],
                {name: [answers[i] for i in chosen] for name, answers in baselines.items()},
            )
    return report


def score_by_command(
    commands: Sequence[int], expert: Sequence[tuple[float, float]], predicted: Sequence[tuple[float, float] | None]
) -> dict[str, Any]:
    """``score`` over everything, plus ``per_command``: ``{command name: score}`` for each command present."""
    return score_report(expert, predicted, {"per_command": [command_name(c) for c in commands]})


def command_name(command: int) -> str:
    """``LANEFOLLOW`` for 4; the number itself for a value that is not a RoadOption."""
    try:
        return RoadOption(command).name
    except ValueError:
        return str(command)
