"""What ``found-rl clip`` prints: the evaluation report (table or JSON) and the diagnostic ladder's table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports torch only inside its commands
    from found_rl.clip.evaluate import Evaluation
    from found_rl.clip.ladder import Rung


def evaluation_json(result: Evaluation, objective: str, context: str, image_input: str) -> dict:
    """``clip evaluate --json``'s object for the evaluation of a model of these settings."""
    report = _quality_json(result)
    report["scope"] = result.scope
    report["objective"] = objective
    report["context"] = context
    report["image_input"] = image_input
    if result.per_town:
        report["per_town"] = {town: _quality_json(row) for town, row in result.per_town.items()}
    return report


def _quality_json(result: Evaluation) -> dict:
    """The numbers of one evaluation (all scored frames, or one town's)."""
    report = result.quality.to_json()
    report["prior"] = None if result.prior is None else {"auc": result.prior.auc, "top1": result.prior.top1}
    if result.evidence is not None:
        report.update(result.evidence.to_json())
    return report


def print_evaluation(model: Path, result: Evaluation, objective: str, overlap: list[dict] | None = None) -> None:
    """``clip evaluate``'s table for the evaluation of ``model`` (a checkpoint or a probe file)."""
    quality, prior = result.quality, result.prior
    print(f"{model}: {quality.frames} frames, {result.scope}")
    print(
        f"  AUC (bonus, expert vs actions outside N(a)): {quality.auc:.3f}   "
        f"on the raw margin: {quality.auc_margin:.3f}"
    )
    print(f"  top-1 (30-way): {quality.top1:.3f}   argmax in N(a): {quality.top1_neighbourhood:.3f}")
    if prior is not None:
        print(f"  image-blind prior (training action frequencies per command and speed): AUC {prior.auc:.3f}, "
              f"top-1 {prior.top1:.3f}")
    evidence = result.evidence
    if evidence is not None:
        if objective == "logit-adjusted":
            print(
                "  the bonus scores the image's evidence beyond the prior (chance: 0.5); below, the model's "
                f"p(a | image, context) = residual x prior: AUC {evidence.model_auc:.3f}"
            )
        print(
            f"  lift over the prior: {evidence.auc_lift:+.3f}   images shuffled within contexts: "
            f"AUC {evidence.shuffled_auc:.3f}"
        )
        print("  per context (frames, AUC, prior AUC, lift):")
        for name, context in evidence.per_context.items():
            print(
                f"    {name:<48} {context.frames:>6}  {context.auc:.3f}  {context.prior_auc:.3f}  "
                f"{context.auc_lift:+.3f}"
            )
        if evidence.skipped_contexts:
            skipped = ", ".join(f"{name} ({count})" for name, count in evidence.skipped_contexts.items())
            print(f"    skipped, under {evidence.min_context_frames} frames: {skipped}")

    print("  per command (top-1, frames):")
    for command, top1 in quality.per_command_top1.items():
        print(f"    {command:<34} {top1:.3f}  {quality.per_command_frames[command]}")
    if result.per_town:
        _print_towns(result.per_town)
    for name, dist in (("expert", quality.bonus_expert), ("far", quality.bonus_far)):
        q = dist.quantiles
        print(
            f"  bonus, {name:<6} actions: mean {dist.mean:+.3f} std {dist.std:.3f}  "
            f"p05 {q['p05']:+.3f} p50 {q['p50']:+.3f} p95 {q['p95']:+.3f}  at +0.25: {dist.at_max:.2f}  "
            f"at -0.25: {dist.at_min:.2f}"
        )
    if overlap is not None:
        towns = ", ".join(sorted({entry["town"] for entry in overlap})) or "none"
        print(f"  road networks also in the training data: {towns}")


def _print_towns(per_town: dict[str, Evaluation]) -> None:
    """One row per town: the headline numbers of its frames scored alone (all of them in --json)."""
    has_prior = any(row.evidence is not None for row in per_town.values())
    columns = "frames, AUC, top-1, argmax in N(a)"
    columns += ", model AUC, prior AUC, lift, shuffled AUC" if has_prior else ""
    print(f"  per town ({columns}):")
    for town, row in per_town.items():
        quality, evidence = row.quality, row.evidence
        line = f"    {town:<34} {quality.frames:>6}  {quality.auc:.3f}  {quality.top1:.3f}"
        line += f"  {quality.top1_neighbourhood:.3f}"
        if evidence is not None:
            line += f"  {evidence.model_auc:.3f}  {evidence.prior_auc:.3f}  {evidence.auc_lift:+.3f}"
            line += f"  {evidence.shuffled_auc:.3f}"
        print(line)


def ladder_json(rungs: list[Rung], scope: str, data: Path) -> dict:
    """``clip ladder --json``'s object."""
    return {"data": str(data), "scope": scope, "rungs": [rung.to_json() for rung in rungs]}


def print_ladder(rungs: list[Rung], scope: str, data: Path) -> None:
    """The rungs side by side, then the lift of each distribution per context."""
    print(f"diagnostic ladder on {data}: {scope}; prior: p(a | command, speed bin) of the training episodes")
    print(f"  {'rung':<21} {'AUC':>6} {'prior':>6} {'lift':>7} {'shuffled':>8} {'top-1':>6}  scores")
    for rung in rungs:
        top1 = "     -" if rung.top1 is None else f"{rung.top1:6.3f}"
        print(
            f"  {rung.name:<21} {rung.auc:6.3f} {rung.prior_auc:6.3f} {rung.auc_lift:+7.3f} {rung.shuffled_auc:8.3f} "
            f"{top1}  {rung.scores}"
        )
    contexts = rungs[0].per_context
    if not contexts:
        return
    columns = ", ".join(rung.name for rung in rungs)
    print(f"  lift over the prior per context (frames; {columns}):")
    for context, first in contexts.items():
        lifts = "  ".join(f"{rung.per_context[context].auc_lift:+.3f}" for rung in rungs)
        print(f"    {context:<48} {first.frames:>6}  {lifts}")
