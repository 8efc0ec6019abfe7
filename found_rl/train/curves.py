"""Learning curves from run folders: read, align over seeds, summarise, draw.

Runs of one variant evaluate at the same scheduled marks (every ``evaluation.every_env_steps``),
but each reaches a mark at its own env-step count: FAST's lock-steps add several env steps at
once, and padded (ended) clips add none, so two seeds cross the 8,000 mark at 8,001 and 8,003.
Curves are therefore aligned on the *mark* each row records (rows of older runs without one
fall back to their env-step count); the summary is the mean and the min–max spread over runs
at each mark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from found_rl.atomic import replaced_atomically
from found_rl.errors import MissingPathError
from found_rl.train.run_folder import RunFolder, read_jsonl


@dataclass
class RunCurve:
    run_dir: Path
    marks: np.ndarray
    """the scheduled evaluation marks (env steps), ascending"""
    env_steps: np.ndarray
    """the env-step count each evaluation actually ran at"""
    values: dict[str, np.ndarray]
    unseen: np.ndarray
    """per evaluation: whether its headline was a town training never drove"""
    headline_towns: int = 1
    """how many towns the last evaluation's headline averaged (a suite's unseen towns)"""


@dataclass
class CurveGroup:
    label: str
    runs: list[RunCurve] = field(default_factory=list)

    def aligned(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """``(marks, values)``: the marks every run evaluated at, and ``(runs, marks)`` values."""
        marks = self.runs[0].marks
        for curve in self.runs[1:]:
            marks = np.intersect1d(marks, curve.marks)
        values = np.stack([
            curve.values[metric][np.searchsorted(curve.marks, marks)] for curve in self.runs
        ]) if len(marks) else np.zeros((len(self.runs), 0))
        return marks, values


def read_curve(run_dir: Path) -> RunCurve:
    """The evaluations of one run folder.

    Raises:
        FileNotFoundError: the folder has no ``evaluations.jsonl``.
        ValueError: it has no evaluation yet.
    """
    path = RunFolder(run_dir).evaluations_jsonl
    if not path.is_file():
        raise MissingPathError(f"{run_dir}: no evaluations.jsonl; is it a found-rl train run folder?")
    rows = evaluation_rows(path)
    if not rows:
        raise ValueError(f"{path}: holds no evaluation yet")
    keys = ("route_completion", "driving_score", "infraction_penalty")
    return RunCurve(
        run_dir,
        marks=np.array([mark_of(r) for r in rows], np.int64),
        env_steps=np.array([r["env_steps"] for r in rows], np.int64),
        values={k: np.array([float(r[k]) for r in rows]) for k in keys},
        unseen=np.array([bool(r.get("eval_town_unseen", False)) for r in rows]),
        headline_towns=_headline_towns(rows[-1]),
    )


def _headline_towns(row: dict[str, Any]) -> int:
    """Towns in a row's headline: its unseen towns, or its seen ones when none is unseen."""
    towns = row.get("towns") or {}
    unseen = sum(1 for town in towns.values() if town.get("unseen"))
    return max(1, unseen if row.get("eval_town_unseen") else len(towns) - unseen)


def mark_of(row: dict[str, Any]) -> int:
    """The scheduled mark of an evaluation row (its env-step count in runs that predate marks)."""
    return int(row.get("mark", row["env_steps"]))


def evaluation_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of an ``evaluations.jsonl`` by mark; of two rows at one mark the later one counts
    (a resumed run repeats the evaluations after its checkpoint)."""
    by_mark = {mark_of(row): row for row in read_jsonl(path)}
    return [by_mark[mark] for mark in sorted(by_mark)]


def load_curves(specs: list[str]) -> dict[str, CurveGroup]:
    """Group ``[LABEL=]RUN_DIR`` specs by label (runs without one share the label ``runs``)."""
    groups: dict[str, CurveGroup] = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = "runs", spec
        groups.setdefault(label, CurveGroup(label)).runs.append(read_curve(Path(path)))
    return groups


def steps_to_threshold(marks: np.ndarray, values: np.ndarray, threshold: float) -> int | None:
    """First mark at which the mean over runs reaches ``threshold``; ``None`` if never."""
    if values.size == 0:
        return None
    reached = np.flatnonzero(values.mean(axis=0) >= threshold)
    return int(marks[reached[0]]) if reached.size else None


def plot_curves(
    groups: dict[str, CurveGroup], out: Path, metrics: tuple[str, ...], title: str = ""
) -> None:
    """Draw one panel per metric: per group the mean over runs and the min–max band."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4), squeeze=False)
    first_run = next(iter(groups.values())).runs[0].run_dir
    references_path = RunFolder(first_run).references
    references = json.loads(references_path.read_text()) if references_path.is_file() else {}
    for axis, metric in zip(axes[0], metrics):
        for group in groups.values():
            marks, values = group.aligned(metric)
            if not len(marks):
                continue
            mean = values.mean(axis=0)
            where = "seen routes"
            if all(curve.unseen.all() for curve in group.runs):
                towns = max(curve.headline_towns for curve in group.runs)
                where = "unseen town" if towns == 1 else f"{towns} unseen towns"
            line = axis.plot(marks, mean, marker="o", markersize=3,
                             label=f"{group.label} (n={len(group.runs)}, {where})")[0]
            if len(group.runs) > 1:
                axis.fill_between(marks, values.min(axis=0), values.max(axis=0), color=line.get_color(), alpha=0.2)
        for name, scores in references.items():
            axis.axhline(scores[metric], linestyle="--", linewidth=1, color="grey")
            axis.annotate(name, (axis.get_xlim()[0], scores[metric]), fontsize=8, color="grey",
                          xytext=(2, 2), textcoords="offset points")
        axis.set_xlabel("env steps (scheduled evaluation mark)")
        axis.set_ylabel(metric.replace("_", " "))
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
        axis.legend(loc="best")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    with replaced_atomically(out) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    plt.close(figure)
