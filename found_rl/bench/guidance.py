"""``found-rl bench guidance``: does guidance help, and does the Q-filter survive a bad advisor?

Every variant trains the quickstart config (or ``--scenario``) for the same env-step budget,
over ``--seeds`` seeds, each run a real ``found-rl train`` run folder under ``--out``:

* ``plain``: SAC, no advisor, no guidance;
* ``guided``: SAC + VMR + AWAG, the privileged expert served through the real advisor server;
* ``noisy``: the same, with the server corrupting the expert's answers (Gaussian σ 0.5 on both
  components, 20 % uniformly random answers: ``ExpertAdvisor``'s noise options);
* ``vmr``, ``awag``: one term alone; ``clip``: the CLIP bonus from ``--clip-checkpoint``;
* ``vlm``: VMR + AWAG with the VLM advisor of ``--vlm-model`` served by ``found-rl serve
  --advisor hf`` (it reads the RGB BEV and the prompt only: nothing privileged at inference);
  AWAG imitates by log π at c = 0.5, which takes an imperfect teacher's errors in better than
  the mode's squared error the expert is imitated with (docs/benchmarks.md#guidance).

All variants collect their warm-up with uniform random actions, so the curves differ by the
guidance alone. Runs are scheduled ``--jobs`` at a time. A run counts only once its training
loop recorded that it used up its budget (``finished.json``); any other run under ``--out`` is
resumed with ``found-rl train --resume`` (or started again when it stopped before its first
checkpoint), so a benchmark stopped at any point is finished by running it again. Runs that
fail (or exit without using up their budget) are listed each with its run folder, exit code and
log, and the command exits 4: a child's failure, reported as such, not as a bug of the benchmark.

The report reads each run's own folder (its ``config.yaml`` and ``evaluations.jsonl``, never
the benchmark's flags) and aligns every variant on one set of marks, the evaluation marks every
run of every variant reached. It gives, per variant, the mean and min–max spread over seeds of
route completion and driving score at each mark, the env steps at which the mean route
completion first reaches 0.8, the scores at the last common mark, label coverage and latency,
beside the reference policies; per run, its budget, label rate, whether it stayed repeatable and
how much of its label budget the advisor answered; and a PNG of the curves. Each finished run's
final policy, and constant throttle once, are then driven on every route of the evaluation
suite (``RUN/final_suite/``; ``--no-final-suite`` skips it): the curves' final mark rests on
one route a town, the all-routes column on all of them (:mod:`found_rl.bench.guidance_suite`).
Variants with unequal numbers of finished seeds are refused unless ``--allow-unequal-seeds``,
which flags them.

Targets (issue 11): guided reaches mean RC 0.8 in at most half the env steps plain SAC needs
(or plain never does); the noisy advisor's final RC is no worse than plain's (within 0.05). The
noisy verdict is given only when the advisor answered: every noisy run's budget coverage above
``NOISY_COVERAGE_BOUND``; otherwise the report says there is no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from found_rl.argtypes import int_at_least
from found_rl.bench.guidance_runs import (
    RunRecord,
    common_budget,
    common_marks,
    read_run,
    run_dir,
    run_state,
    unequal_seeds,
)
from found_rl.bench.guidance_suite import (
    THROTTLE_REFERENCE,
    evaluate_on_suite,
    read_suite_scores,
    suite_of,
    summarise_suite,
)
from found_rl.errors import ChildRunsFailed, ChildRunsInterrupted, FailedChildRun, UserError
from found_rl.train.curves import mark_of, steps_to_threshold

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
VARIANTS = ("plain", "guided", "noisy", "vmr", "awag", "clip", "vlm")
DEFAULT_VARIANTS = ("plain", "guided", "noisy")
IMPERFECT_TEACHER_AWAG = ("guidance.awag.loss=log_prob", "guidance.awag.coef=0.5")
"""AWAG for a teacher that errs: log π, whose Gaussian widens over an inconsistent teacher, where
the mode's squared error follows every answer the Q-filter lets through."""
RC_THRESHOLD = 0.8
NOISE = {"noise_std": 0.5, "random_fraction": 0.2}
NOISY_WITHIN = 0.05
NOISY_COVERAGE_BOUND = 0.9
"""The noisy verdict needs every noisy run's advisor to have answered more than this share of its
label budget (``budget_coverage``): a final RC without labels says nothing about bad labels."""


def variant_overrides(
    variant: str, seed: int, clip_checkpoint: Path | None, vlm_model: Path | None = None
) -> list[str]:
    """``--set`` pairs that turn the scenario's default run into ``variant``.

    Raises:
        UserError: an unknown variant (the allowed ones named), ``clip`` without a checkpoint, or
            ``vlm`` without a model folder.
    """
    if variant not in VARIANTS:
        raise UserError(f"--variants: unknown variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    off = ["guidance.vmr.enabled=false", "guidance.awag.enabled=false"]
    expert = ["advisor.spawn=expert"]
    if variant == "plain":
        return ["advisor=none", *off]
    if variant == "guided":
        return expert
    if variant == "noisy":
        options = json.dumps({**NOISE, "noise_seed": seed})
        return [*expert, f"advisor.spawn_options={options}"]
    if variant in ("vmr", "awag"):
        other = "awag" if variant == "vmr" else "vmr"
        return [*expert, f"guidance.{other}.enabled=false"]
    if variant == "vlm":  # the served VLM reads the RGB BEV and the prompt: nothing privileged
        if vlm_model is None:
            raise UserError("--variants vlm: needs --vlm-model DIR (a VLM advisor, e.g. from `found-rl vlm finetune`)")
        options = json.dumps({"model": str(vlm_model.resolve()), "max_new_tokens": 16})
        return ["advisor.spawn=hf", f"advisor.spawn_options={options}", *IMPERFECT_TEACHER_AWAG]
    if clip_checkpoint is None:
        raise UserError("--variants clip: needs --clip-checkpoint PATH (a fine-tuned CLIP reward model)")
    return [*off, "advisor.spawn=expert", "advisor.clip=openclip",
            f"advisor.clip_options={json.dumps({'checkpoint': str(clip_checkpoint.resolve())})}",
            "guidance.clip_bonus.enabled=true"]


@dataclass(frozen=True)
class VariantSummary:
    """One variant over its seeds."""

    variant: str
    seeds: int
    marks: list[int]
    rc_mean: list[float]
    rc_min: list[float]
    rc_max: list[float]
    ds_mean: list[float]
    ds_min: list[float]
    ds_max: list[float]
    steps_to_rc80: int | None
    final_rc: float
    final_ds: float
    label_coverage: float | None
    label_latency_steps: float | None
    budget_coverage_min: float | None
    """the lowest share of its label budget the advisor answered, over seeds (``None``: no advisor)"""
    eval_town_unseen: bool
    """every evaluation of every seed had a town training never drove as its headline"""
    repeatable: bool = True
    """no seed's advisor went down for good (the run repeats from its seed; ``evaluations.jsonl``'s ``repeatable``)"""
    towns: dict[str, str] = field(default_factory=dict)
    """per evaluation town of the final evaluations: ``unseen``, or what saw it (``seen: training: ...``)"""
    all_routes: dict[str, Any] | None = None
    """the final policies on every route of the suite, over seeds (:func:`summarise_suite`); ``None``
    until every seed was driven there"""


def summarise(variant: str, runs: Sequence[Sequence[dict[str, Any]]],
              marks: Sequence[int] | None = None) -> VariantSummary:
    """Aggregate the ``evaluations.jsonl`` rows of one variant's runs (one list per seed).

    The curves are taken at ``marks`` (default: the scheduled marks every run of the variant
    evaluated at; each seed reaches a mark at its own env-step count); "final" is each run's
    evaluation at the last of them, averaged over seeds.

    Raises:
        ValueError: no run has an evaluation, or a run lacks one of ``marks``.
    """
    runs = [sorted(rows, key=mark_of) for rows in runs if rows]
    if not runs:
        raise ValueError(f"variant {variant}: no run produced an evaluation")
    if marks is None:
        marks = common_marks(runs)
    if not marks:
        raise ValueError(f"variant {variant}: its runs share no evaluation mark")
    marks = sorted(int(m) for m in marks)
    at = [{int(mark_of(r)): r for r in rows} for rows in runs]

    def at_marks(key: str) -> np.ndarray:
        return np.array([[by_mark[m][key] for m in marks] for by_mark in at])

    rc, ds = at_marks("route_completion"), at_marks("driving_score")
    finals = [by_mark[marks[-1]] for by_mark in at]
    coverage = [r["label_coverage"] for r in finals if r.get("label_coverage") is not None]
    latency = [r["label_latency_steps"] for r in finals if r.get("label_latency_steps") is not None]
    budget_coverage = [r.get("budget_coverage") for r in finals]
    return VariantSummary(
        variant=variant, seeds=len(runs), marks=[int(m) for m in marks],
        rc_mean=rc.mean(axis=0).tolist(), rc_min=rc.min(axis=0).tolist(), rc_max=rc.max(axis=0).tolist(),
        ds_mean=ds.mean(axis=0).tolist(), ds_min=ds.min(axis=0).tolist(), ds_max=ds.max(axis=0).tolist(),
        steps_to_rc80=steps_to_threshold(np.asarray(marks), rc, RC_THRESHOLD),
        final_rc=float(np.mean([r["route_completion"] for r in finals])),
        final_ds=float(np.mean([r["driving_score"] for r in finals])),
        label_coverage=float(np.mean(coverage)) if coverage else None,
        label_latency_steps=float(np.mean(latency)) if latency else None,
        budget_coverage_min=None if None in budget_coverage else float(min(budget_coverage)),
        eval_town_unseen=all(bool(by_mark[m].get("eval_town_unseen", False)) for by_mark in at for m in marks),
        repeatable=all(r.get("repeatable", True) is not False for rows in runs for r in rows),
        towns={name: town_status(town) for row in finals for name, town in (row.get("towns") or {}).items()},
    )


def town_status(town: dict[str, Any]) -> str:
    """``unseen``, or ``seen: <what drove its roads>`` of one town entry of an evaluation row."""
    if town.get("unseen"):
        return "unseen"
    return "seen: " + (", ".join(town.get("seen_by") or []) or "by training")


GUIDED_VARIANTS = frozenset(VARIANTS) - {"plain"}


def verdict(summaries: dict[str, VariantSummary], budget: int, references: dict[str, Any]) -> dict[str, Any]:
    """The JSON keys and targets of issue 25 (steps to RC 0.8 count as the budget when never reached).

    Targets: guided reaches mean RC 0.8 in at most half of plain's env steps; the noisy
    advisor's final RC is at least plain's minus 0.05, judged only when every noisy run's
    advisor answered more than ``NOISY_COVERAGE_BOUND`` of its label budget (else
    ``noisy_target_met`` is ``None`` and ``noisy_verdict`` says why); every guided variant ends
    above the constant-throttle reference on both RC and DS; all of it on a town training never drove.
    """
    out: dict[str, Any] = {"seeds": max((s.seeds for s in summaries.values()), default=0)}
    out["eval_town_unseen"] = all(s.eval_town_unseen for s in summaries.values())
    out["towns"] = {name: status for summary in summaries.values() for name, status in summary.towns.items()}
    out["repeatable"] = {name: summary.repeatable for name, summary in summaries.items()}
    for name, summary in summaries.items():
        steps = summary.steps_to_rc80
        out[f"steps_to_rc80_{name}"] = budget if steps is None else steps
        out[f"final_rc_{name}"] = summary.final_rc
        out[f"final_ds_{name}"] = summary.final_ds
        if summary.all_routes is not None:
            out[f"all_routes_rc_{name}"] = summary.all_routes["route_completion"]
            out[f"all_routes_ds_{name}"] = summary.all_routes["driving_score"]
    if "noisy" in summaries:
        out["final_rc_noisy_advisor"] = summaries["noisy"].final_rc
    if "plain" in summaries and "guided" in summaries:
        out["guided_target_met"] = out["steps_to_rc80_guided"] <= out["steps_to_rc80_plain"] / 2 and (
            summaries["guided"].steps_to_rc80 is not None)
    if "plain" in summaries and "noisy" in summaries:
        out.update(noisy_verdict(summaries["plain"], summaries["noisy"]))
    throttle = references.get("throttle")
    guided = [name for name in summaries if name in GUIDED_VARIANTS]
    if throttle is not None and guided:
        out["above_throttle"] = {
            name: summaries[name].final_rc > throttle["route_completion"]
            and summaries[name].final_ds > throttle["driving_score"] for name in guided
        }
        out["above_throttle_target_met"] = all(out["above_throttle"].values())
    return out


def noisy_verdict(plain: VariantSummary, noisy: VariantSummary) -> dict[str, Any]:
    """The noisy-advisor target, given only when the advisor answered (see ``NOISY_COVERAGE_BOUND``)."""
    coverage = noisy.budget_coverage_min
    out: dict[str, Any] = {"noisy_coverage_bound": NOISY_COVERAGE_BOUND, "noisy_budget_coverage": coverage}
    if coverage is None or not coverage > NOISY_COVERAGE_BOUND:
        shown = "not recorded" if coverage is None else f"{coverage:.2f}"
        return {**out, "noisy_target_met": None,
                "noisy_verdict": f"no verdict: the advisor did not answer (coverage {shown})"}
    met = noisy.final_rc >= plain.final_rc - NOISY_WITHIN
    return {**out, "noisy_target_met": met, "noisy_verdict": "met" if met else "not met"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default: {','.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--seeds", type=int_at_least(1), default=3, help="seeds per variant")
    parser.add_argument("--budget", type=int_at_least(1), default=30_000, help="env steps per run")
    parser.add_argument("--eval-every", type=int_at_least(1), default=5_000, help="env steps between evaluations")
    parser.add_argument("--scenario", type=Path, default=QUICKSTART, help="scenario to train on")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--jobs", type=int_at_least(1), help="runs at a time (default: cores / 2, at least 1)")
    parser.add_argument("--clip-checkpoint", type=Path, help="fine-tuned CLIP checkpoint for the 'clip' variant")
    parser.add_argument("--vlm-model", type=Path,
                        help="VLM advisor folder for the 'vlm' variant (served with --advisor hf)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-guidance"), help="folder of the run folders")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="run-config override applied to every run (repeatable)")
    parser.add_argument("--report-only", action="store_true",
                        help="train nothing: report the runs under --out that have finished")
    parser.add_argument("--no-final-suite", dest="final_suite", action="store_false",
                        help="do not drive each finished run's final policy (and constant throttle) on every "
                             "route of its evaluation suite")
    parser.add_argument("--allow-unequal-seeds", action="store_true",
                        help="report variants with unequal numbers of finished seeds (flagged) instead of refusing")
    parser.set_defaults(run=run)


def _plan(args: argparse.Namespace) -> tuple[list[tuple[str, int, list[str]]], int]:
    from found_rl.train.config import load_run_config

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants:
        raise UserError("--variants: name at least one variant")
    base = load_run_config(args.scenario, args.overrides)
    every = args.eval_every
    if args.budget < base.learner.learning_starts + every:
        raise UserError(
            f"--budget {args.budget}: too small to evaluate even once after learning starts "
            f"(learner.learning_starts {base.learner.learning_starts} + --eval-every {every})"
        )
    common = [*args.overrides, f"budget.env_steps={args.budget}", "budget.wall_time_s=null",
              f"evaluation.every_env_steps={every}", f"device={args.device}"]
    runs = []
    for seed in range(args.seeds):  # seed by seed: a bench stopped early compares variants on equal seeds
        for variant in variants:
            variant_pairs = variant_overrides(variant, seed, args.clip_checkpoint, args.vlm_model)
            overrides = [*common, f"seed={seed}", *variant_pairs]
            load_run_config(args.scenario, overrides)  # every run's config is valid before any starts
            runs.append((variant, seed, overrides))
    return runs, every


def _train(scenario: Path, path: Path, overrides: list[str], state: str) -> tuple[int, Path]:
    """``found-rl train`` for one run: resumed from its checkpoint, or (re)started from scratch.

    Returns:
        The child's exit code (negative: killed by that signal) and the log its output went to.
    """
    import shutil

    if state == "restart":  # stopped before its first checkpoint: nothing to resume
        shutil.rmtree(path)
    command = [sys.executable, "-m", "found_rl", "train", str(scenario), "--no-progress"]
    command += ["--resume", str(path)] if state == "resume" else ["--run-dir", str(path)]
    for pair in overrides:
        command += ["--set", pair]
    log_path = path.parent / f"{path.name}.log"
    with open(log_path, "a") as log:
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode, log_path


def _failed_run(variant: str, seed: int, path: Path, code: int, log: Path, is_finished: bool) -> FailedChildRun | None:
    """How a child run failed, or None when it finished (used up its budget)."""
    if code == 0 and is_finished:
        return None
    reason = "" if code != 0 else "it stopped before using up its budget: no finished.json"
    return FailedChildRun(f"{variant}-s{seed}", path, code, log, reason)


def run(args: argparse.Namespace) -> int:
    from found_rl.train.run_folder import RunFolder

    runs, _ = _plan(args)
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or max(1, (os.cpu_count() or 2) // 2)
    started = time.perf_counter()

    def one(item: tuple[str, int, list[str]]) -> FailedChildRun | None:
        variant, seed, overrides = item
        path = run_dir(args.out, variant, seed)
        state = run_state(RunFolder(path), args.budget)
        if state == "finished":
            return None
        code, log = _train(args.scenario, path, overrides, state)
        return _failed_run(variant, seed, path, code, log, RunFolder(path).finished_record() is not None)

    if not args.report_only:
        pool = ThreadPoolExecutor(jobs)
        try:
            failed = [outcome for outcome in pool.map(one, runs) if outcome is not None]
        finally:  # on Ctrl-C the running children got it too; the queued ones must not start
            pool.shutdown(cancel_futures=True)
        if args.final_suite:
            failed += _drive_final_policies_on_suite(args.out, [(variant, seed) for variant, seed, _ in runs])
        if any(run.was_interrupted for run in failed):  # Ctrl-C reached the children: nobody failed
            raise ChildRunsInterrupted("bench guidance", failed)
        if failed:  # each child's log holds its own error (a user's mistake or a traceback)
            raise ChildRunsFailed("bench guidance", failed)
    present = [(variant, seed) for variant, seed, _ in runs
               if RunFolder(run_dir(args.out, variant, seed)).config.exists()]
    if not present:
        raise UserError(f"--report-only: no run under {args.out}")
    report = build_report(args.out, present, allow_unequal_seeds=args.allow_unequal_seeds)
    report.update(seeds_planned=args.seeds, wall_s=time.perf_counter() - started, jobs=jobs)
    if args.json:
        print(json.dumps(report))
        return 0
    _print_report(report)
    return 0


def _drive_final_policies_on_suite(out: Path, runs: Sequence[tuple[str, int]]) -> list[FailedChildRun]:
    """Drive each finished run's ``policy.pt`` on every route of its suite, then constant throttle
    once on the same routes; one at a time (each evaluation uses every core), skipping those done.

    Returns:
        The evaluations that failed, each with its folder, exit code and log.
    """
    from found_rl.train.run_folder import RunFolder

    failed: list[FailedChildRun] = []
    suites: set[Path] = set()

    def drive(name: str, agent: str, suite: Path, folder: Path) -> None:
        if read_suite_scores(folder) is not None:
            return
        code, log = evaluate_on_suite(agent, suite, folder)
        if code != 0 or read_suite_scores(folder) is None:
            failed.append(FailedChildRun(name, folder, code, log, "" if code else "it wrote no suite.json"))

    for variant, seed in runs:
        folder = RunFolder(run_dir(out, variant, seed))
        if folder.finished_record() is None:
            continue
        suite = suite_of(folder.stored_config())
        if suite is not None:
            suites.add(suite)
            drive(f"{variant}-s{seed} on every suite route", f"checkpoint:{folder.final_policy}", suite, folder.root)
    if len(suites) == 1:  # the throttle reference is for one suite; runs of several suites compare nothing
        drive("constant throttle on every suite route", "throttle", suites.pop(), out / THROTTLE_REFERENCE)
    return failed


def build_report(out: Path, runs: Sequence[tuple[str, int]], *, allow_unequal_seeds: bool = False) -> dict[str, Any]:
    """The report of the run folders ``out/VARIANT-sSEED`` of ``runs``, from what each folder recorded.

    Only finished runs count; the others are listed under ``not_finished``. Every variant is
    summarised at the marks common to every counted run.

    Raises:
        UserError: no run finished, unequal seed counts (unless ``allow_unequal_seeds``),
            different budgets, or no evaluation mark common to every run.
    """
    from found_rl.train.curves import load_curves, plot_curves  # matplotlib only when drawing
    from found_rl.train.run_folder import RunFolder

    records: list[RunRecord] = []
    rows_of: dict[str, list[list[dict[str, Any]]]] = {}
    not_finished = []
    for variant, seed in runs:
        record, rows = read_run(variant, run_dir(out, variant, seed))
        if not record.finished:
            not_finished.append(record.run_dir)
            continue
        records.append(record)
        rows_of.setdefault(variant, []).append(rows)
    if not records:
        raise UserError(f"--out {out}: no run has finished (used up its budget) yet")
    unequal = unequal_seeds({variant: len(rows) for variant, rows in rows_of.items()}, allow_unequal_seeds)
    budget = common_budget(records)
    marks = common_marks([rows for variant_rows in rows_of.values() for rows in variant_rows])
    if not marks:
        raise UserError(f"--out {out}: the finished runs share no evaluation mark; "
                        "were they made with different --eval-every?")
    summaries = {variant: summarise(variant, rows, marks) for variant, rows in rows_of.items()}
    for variant, summary in summaries.items():
        all_routes = summarise_suite([r.final_suite for r in records if r.variant == variant])
        summaries[variant] = replace(summary, all_routes=all_routes)
    throttle_all_routes = read_suite_scores(out / THROTTLE_REFERENCE)
    references_path = RunFolder(Path(records[0].run_dir)).references
    references = json.loads(references_path.read_text()) if references_path.is_file() else {}
    png = out / "curves.png"
    groups = load_curves([f"{r.variant}={r.run_dir}" for r in records])
    plot_curves(groups, png, ("route_completion", "driving_score"), title="guidance: mean and min–max over seeds")
    return {
        **verdict(summaries, budget if budget is not None else marks[-1], references),
        "budget": budget,
        "marks": marks,
        "seeds_per_variant": {variant: len(rows) for variant, rows in rows_of.items()},
        "unequal_seeds": unequal,
        "variants": {name: summary.__dict__ for name, summary in summaries.items()},
        "runs": [record.__dict__ for record in records],
        "not_finished": not_finished,
        "references": {name: {k: scores[k] for k in ("route_completion", "driving_score")}
                       for name, scores in references.items()},
        "throttle_all_routes": throttle_all_routes,
        "curves_png": str(png),
    }


def _print_report(report: dict[str, Any]) -> None:
    from rich.table import Table

    from found_rl.tables import print_table

    marks, unequal = report["marks"], report["unequal_seeds"]
    budget = "a wall-time budget" if report["budget"] is None else f"{report['budget']:,} env steps"
    seeds = (f"[bold red]UNEQUAL SEEDS ({', '.join(f'{k} {v}' for k, v in unequal.items())})[/]" if unequal
             else f"{report['seeds']} seeds")
    table = Table(title=f"guidance benchmark: {budget}, {seeds}; "
                        "RC % mean \\[min–max] at each evaluation mark every run reached")
    table.add_column("variant")
    for mark in marks:
        table.add_column(f"{mark:,}", justify="right")
    table.add_column("steps to RC 80", justify="right")
    table.add_column("final RC / DS %", justify="right")
    routes = next((v["all_routes"]["routes"] for v in report["variants"].values() if v.get("all_routes")), None)
    table.add_column("all routes RC / DS %" if routes is None else f"all {routes} routes RC / DS %", justify="right")
    table.add_column("labels", justify="right")
    for name, summary in report["variants"].items():
        cells = [f"{100 * m:.0f} [{100 * lo:.0f}–{100 * hi:.0f}]"
                 for m, lo, hi in zip(summary["rc_mean"], summary["rc_min"], summary["rc_max"])]
        labels = "-" if summary["label_coverage"] is None else (
            f"{100 * summary['label_coverage']:.0f} %, {summary['label_latency_steps'] or 0:.1f} steps late")
        steps = summary["steps_to_rc80"]
        table.add_row(name, *cells, "not reached" if steps is None else f"{steps:,}",
                      f"{100 * summary['final_rc']:.0f} / {100 * summary['final_ds']:.0f}",
                      _all_routes_cell(summary.get("all_routes")), labels)
    for name, scores in report["references"].items():
        on_all = report.get("throttle_all_routes") if name == "throttle" else None
        table.add_row(f"reference: {name}", *[""] * len(marks), "",
                      f"{100 * scores['route_completion']:.0f} / {100 * scores['driving_score']:.0f}",
                      "" if on_all is None else
                      f"{100 * on_all['route_completion']:.0f} / {100 * on_all['driving_score']:.0f}", "")
    print_table(table)
    print_table(_runs_table(report["runs"]))
    if unequal:
        print(f"UNEQUAL SEEDS: {', '.join(f'{k} {v}' for k, v in unequal.items())} finished runs; "
              "the means are not comparable")
    if report["not_finished"]:
        print(f"not finished (not counted): {', '.join(report['not_finished'])}")
    print(f"eval_town_unseen: {report['eval_town_unseen']}")
    for name, status in (report.get("towns") or {}).items():
        print(f"  {name}: {status}")
    not_repeatable = [name for name, repeats in report.get("repeatable", {}).items() if not repeats]
    if not_repeatable:
        print(f"not repeatable (an advisor went down for good during a run): {', '.join(not_repeatable)}")
    for key in ("guided_target_met", "noisy_verdict", "above_throttle_target_met"):
        if key in report:
            print(f"{key}: {report[key]}")
    print(f"curves: {report['curves_png']}")


def _all_routes_cell(all_routes: dict[str, Any] | None) -> str:
    """``RC [min–max] / DS`` in % over seeds on every suite route, or ``-`` until every seed was driven there."""
    if all_routes is None:
        return "-"
    rc, lo, hi = (100 * all_routes[k] for k in ("route_completion", "route_completion_min", "route_completion_max"))
    return f"{rc:.0f} [{lo:.0f}–{hi:.0f}] / {100 * all_routes['driving_score']:.0f}"


def _runs_table(runs: Sequence[dict[str, Any]]) -> Any:
    """One line per run, from its own config.yaml, evaluations.jsonl and all-routes evaluation."""
    from rich.table import Table

    def share(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f} %"

    table = Table(title="runs, as their own folders record them")
    for column in ("run", "seed", "budget", "advisor", "label rate", "labels of budget", "labelled",
                   "repeatable", "all routes RC / DS %"):
        table.add_column(column, justify="left" if column in ("run", "advisor") else "right")
    for run in runs:
        budget = "-" if run["budget_env_steps"] is None else f"{run['budget_env_steps']:,}"
        repeatable = "yes" if run["repeatable"] else f"no, from lock-step {run['not_repeatable_from']}"
        advisor = "-" if run["advisor"] is None else f"{run['advisor']}: {', '.join(run['asked']) or 'nothing'}"
        table.add_row(Path(run["run_dir"]).name, str(run["seed"]), budget, advisor,
                      "-" if run["label_rate"] is None or run["advisor"] is None else str(run["label_rate"]),
                      share(run["budget_coverage"]), share(run["label_coverage"]), repeatable,
                      "-" if (suite := run.get("final_suite")) is None else
                      f"{100 * suite['route_completion']:.0f} / {100 * suite['driving_score']:.0f}")
    return table
