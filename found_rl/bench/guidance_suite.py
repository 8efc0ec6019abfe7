"""The final policies of ``bench guidance`` driven on every route of their evaluation suite.

The training curves drive the first route of each suite town at every mark (an evaluation
beside training has to stay short), so one route decides a sixth of a seed's score. Once a run
has finished, its ``policy.pt`` is driven once more on all the suite's routes
(``found-rl eval --suite``, one repetition), into ``RUN/final_suite/``; constant throttle is
driven on the same routes once per benchmark, into ``OUT/reference-throttle/final_suite/``. The
report gives both beside the curves' final mark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FINAL_SUITE = "final_suite"
"""Folder inside a run folder (or the throttle reference's) holding its all-routes evaluation."""
THROTTLE_REFERENCE = "reference-throttle"
"""Folder under ``--out`` for constant throttle's all-routes evaluation."""


def suite_of(config: Mapping[str, Any]) -> Path | None:
    """The evaluation suite a run's stored config names (``evaluation.suite``), if any."""
    suite = (config.get("evaluation") or {}).get("suite")
    return None if suite is None else Path(suite)


def read_suite_scores(folder: Path) -> dict[str, Any] | None:
    """The route-weighted ``route_completion``, ``driving_score`` and number of ``routes`` in
    ``folder/final_suite/suite.json``, or ``None`` when it was not evaluated (yet)."""
    path = folder / FINAL_SUITE / "suite.json"
    if not path.is_file():
        return None
    suite = json.loads(path.read_text())["suite"]
    return {
        "route_completion": float(suite["route_completion"]["mean"]),
        "driving_score": float(suite["driving_score"]["mean"]),
        "routes": int(suite["routes"]),
    }


def evaluate_on_suite(agent: str, suite: Path, folder: Path) -> tuple[int, Path]:
    """Drive ``agent`` on every route of ``suite`` into ``folder/final_suite`` (resumed if partly there).

    Returns:
        The child's exit code and the log its output went to (``folder.final_suite.log``).
    """
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "found_rl", "eval", "--suite", str(suite), "--agent", agent,
               "--repetitions", "1", "--out", str(folder / FINAL_SUITE), "--no-progress"]
    log_path = folder.parent / f"{folder.name}.{FINAL_SUITE}.log"
    with open(log_path, "a") as log:
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode, log_path


def summarise_suite(scores: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Mean and min–max over seeds of one variant's all-routes scores (:func:`read_suite_scores`
    of each seed); ``None`` unless every seed has them."""
    present = [s for s in scores if s is not None]
    if not present or len(present) != len(scores):
        return None
    rc = [s["route_completion"] for s in present]
    return {
        "route_completion": sum(rc) / len(rc), "route_completion_min": min(rc), "route_completion_max": max(rc),
        "driving_score": sum(s["driving_score"] for s in present) / len(present), "routes": present[0]["routes"],
    }
