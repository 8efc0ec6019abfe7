"""The run folders of ``found-rl bench guidance``: which to train on, and what each recorded.

A run counts only once its training loop wrote ``finished.json`` (it used up its budget): a run
stopped by Ctrl-C, a failure or a kill leaves ``policy.pt`` but no record, and is resumed from
its checkpoint (or started again, when it stopped before its first one). What the report says
about a run comes from the run folder itself, its ``config.yaml`` and ``evaluations.jsonl``,
never from the flags of the benchmark that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from found_rl.bench.guidance_suite import read_suite_scores
from found_rl.errors import UserError
from found_rl.train.curves import mark_of
from found_rl.train.run_folder import RunFolder, read_jsonl

RunState = Literal["finished", "resume", "restart", "start"]


def run_dir(out: Path, variant: str, seed: int) -> Path:
    return out / f"{variant}-s{seed}"


def run_state(folder: RunFolder, budget: int) -> RunState:
    """What the benchmark does with a run folder for an env-step ``budget``.

    ``finished``: it used up this budget; ``resume``: it has a checkpoint (stopped, or finished
    for another budget); ``restart``: it stopped before its first checkpoint; ``start``: no run.
    """
    record = folder.finished_record()
    if record is not None and (record.get("budget") or {}).get("env_steps") == budget:
        return "finished"
    if folder.checkpoint.is_file():
        return "resume"
    return "restart" if folder.config.exists() else "start"


def _budget(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config.get("budget") or {})


@dataclass(frozen=True)
class RunRecord:
    """One run of the benchmark, as its own folder records it."""

    variant: str
    run_dir: str
    seed: int
    """``seed`` of the run's config.yaml"""
    finished: bool
    """the loop wrote ``finished.json``: the run used up its budget"""
    budget_env_steps: int | None
    budget_wall_time_s: float | None
    advisor: str | None
    """``advisor.spawn`` (or the ``urls``) of the run's config; ``None`` without an advisor"""
    advisor_options: dict[str, Any]
    asked: tuple[str, ...]
    """what the run asks its advisor for: ``actions`` (VMR, AWAG, advisor BC) and/or ``CLIP bonus``"""
    label_mode: str | None
    label_rate: float | str | None
    """as config.yaml holds it (``label_rate: auto`` is replaced by the rate its probe chose)"""
    evaluations: int
    final_mark: int | None
    repeatable: bool
    """no advisor went down for good: the run repeats from its seed (``evaluations.jsonl``'s last row)"""
    not_repeatable_from: int | None
    """the lock-step from which it stopped repeating"""
    label_coverage: float | None
    """share of the stored transitions that carry a label, at the last evaluation"""
    budget_coverage: float | None
    """share of the label budget the advisor answered, at the last evaluation"""
    final_suite: dict[str, Any] | None = None
    """the final policy on every route of its suite (``RUN/final_suite``), once evaluated"""


def read_run(variant: str, path: Path) -> tuple[RunRecord, list[dict[str, Any]]]:
    """A run folder's record and its evaluation rows (by mark).

    Raises:
        UserError: the folder holds no run (no config.yaml), or a file in it is malformed.
    """
    folder = RunFolder(path)
    try:
        config = folder.stored_config()
    except FileNotFoundError:
        raise UserError(f"--out: {path} holds no run (no {folder.config.name})") from None
    rows = sorted(read_jsonl(folder.evaluations_jsonl), key=mark_of)
    last = rows[-1] if rows else {}
    advisor = config.get("advisor") or {}
    budget = _budget(config)
    record = RunRecord(
        variant=variant, run_dir=str(path), seed=int(config.get("seed", 0)),
        finished=folder.finished_record() is not None,
        budget_env_steps=budget.get("env_steps"), budget_wall_time_s=budget.get("wall_time_s"),
        advisor=advisor.get("spawn") or (", ".join(advisor.get("urls") or []) or None),
        advisor_options=dict(advisor.get("spawn_options") or {}), asked=_asked(config),
        label_mode=advisor.get("label_mode"), label_rate=advisor.get("label_rate"),
        evaluations=len(rows), final_mark=int(mark_of(last)) if rows else None,
        repeatable=all(r.get("repeatable", True) is not False for r in rows),
        not_repeatable_from=last.get("not_repeatable_from"),
        label_coverage=last.get("label_coverage"), budget_coverage=last.get("budget_coverage"),
        final_suite=read_suite_scores(path),
    )
    return record, rows


def _asked(config: Mapping[str, Any]) -> tuple[str, ...]:
    """What a run's switched-on guidance terms read from its advisor (a run served by the expert
    for its CLIP bonus alone never sees the expert's actions)."""
    guidance = config.get("guidance") or {}

    def enabled(term: str) -> bool:
        return bool((guidance.get(term) or {}).get("enabled"))

    actions = ["actions"] if any(enabled(term) for term in ("vmr", "awag", "advisor_bc")) else []
    return (*actions, *(["CLIP bonus"] if enabled("clip_bonus") else []))


def common_marks(runs: Sequence[Sequence[dict[str, Any]]]) -> list[int]:
    """The evaluation marks every run evaluated at, ascending."""
    sets = [{int(mark_of(r)) for r in rows} for rows in runs]
    return sorted(set.intersection(*sets)) if sets else []


def unequal_seeds(counts: Mapping[str, int], allow: bool) -> dict[str, int] | None:
    """``counts`` (finished runs per variant) when they differ and ``allow``; ``None`` when equal.

    Raises:
        UserError: they differ and ``allow`` is false: the mean of 1 seed beside the mean of 3
            is no comparison.
    """
    if len(set(counts.values())) <= 1:
        return None
    if not allow:
        listed = ", ".join(f"{name} {count}" for name, count in counts.items())
        raise UserError(f"bench guidance: the variants have unequal numbers of finished seeds ({listed}); "
                        "finish the missing runs (run the benchmark again without --report-only), or pass "
                        "--allow-unequal-seeds to report them anyway, flagged")
    return dict(counts)


def common_budget(records: Sequence[RunRecord]) -> int | None:
    """The env-step budget every run was trained for (``None``: a wall-time budget).

    Raises:
        UserError: the runs were trained for different budgets (named per run).
    """
    budgets = {(r.budget_env_steps, r.budget_wall_time_s) for r in records}
    if len(budgets) > 1:
        listed = ", ".join(f"{Path(r.run_dir).name} {r.budget_env_steps} env steps / {r.budget_wall_time_s} s"
                           for r in records)
        raise UserError(f"bench guidance: the runs were trained for different budgets ({listed}); "
                        "run the benchmark without --report-only to bring them to one --budget")
    return next(iter(budgets))[0] if budgets else None
