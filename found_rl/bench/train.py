"""``found-rl bench train``: the whole training loop, alternating vs overlapped, unadvised vs advised.

Every configuration trains the quickstart scenario with the CPU preset for the same number of
env steps (evaluation and checkpoints off, so only the loop is timed), one after another in one
run, so their ratios are measured side by side:

* **plain, alternating**: no advisor, no guidance; the workers step while the learner waits,
  then the other way round;
* **plain, overlapped**: the same, with the updates run while the workers step (``sampler.overlap``);
* **guided, advisor silent**: VMR and AWAG on, the expert served but asked about 1 % of the
  observations: the guided learner's own cost, with (almost) no label traffic;
* **expert, overlapped**: the privileged expert served by a spawned ``found-rl serve``,
  ``label_rate: auto`` (it affords every observation);
* **VLM, overlapped**: a ``vlm init`` advisor VLM served by ``found-rl serve --advisor hf``, with
  ``label_rate: auto`` (the start-up probe chooses the share of observations it labels).

Rates are measured from the first update on (the random-action warm-up has no updates to wait
for). The advisors' ratios compare against the silent-advisor run, so they measure what the
labels cost the loop, not what VMR and AWAG add to an update (``guidance_update_ratio`` says
that). Reported per configuration: env steps/s, updates/s, the wall-time shares, and for the
advised ones the label rate, the labelled share of the budgeted subset and how often the advisor
was marked down. Targets: overlapped ≥ 1.6× alternating in updates/s, expert-advised ≥ 0.9× and
VLM-advised ≥ 0.8× in env steps/s, the VLM labelling ≥ 95 % of its budget and never marked down.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from found_rl.argtypes import int_at_least
from found_rl.errors import MissingPathError

TARGETS = {"overlap_speedup": 1.6, "advisor_ratio": 0.9, "vlm_advisor_ratio": 0.8, "vlm_budget_coverage": 0.95}
QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
CONFIGURATIONS = {
    "plain, alternating": ("none", False),
    "plain, overlapped": ("none", True),
    "guided, advisor silent": ("silent", True),
    "expert, overlapped": ("expert", True),
    "VLM, overlapped": ("vlm", True),
}
SILENT_RATE = 0.01
"""the silent advisor's label rate: the guided learner runs, almost no labels travel"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", type=Path, default=QUICKSTART, help="scenario to train (default: quickstart)")
    parser.add_argument("--env-steps", type=int_at_least(100), default=4_000, help="env steps per configuration")
    parser.add_argument("--learning-starts", type=int_at_least(1), default=1_000,
                        help="env steps of random actions before updates start")
    parser.add_argument("--clips", type=int_at_least(1), default=4, help="FAST clips")
    parser.add_argument("--vlm-model", type=Path, default=None,
                        help="advisor VLM folder for the VLM configuration (default: an untrained `vlm init "
                             "--preset small` model, which answers as fast as a trained one)")
    parser.add_argument("--skip-vlm", action="store_true", help="leave the VLM configuration out")
    parser.add_argument("--repeat", type=int_at_least(1), default=1,
                        help="run every configuration this many times, round-robin, and report the median run of "
                             "each (a shared machine's speed drifts by 10-20 %% over minutes)")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(run=run)


def _advisor_overrides(advisor: str, vlm_model: Path | None) -> list[str]:
    if advisor == "none":  # the same run without guidance: nothing to label
        return ["advisor=none", "guidance.vmr.enabled=false", "guidance.awag.enabled=false"]
    if advisor == "expert":
        return ["advisor.spawn=expert", "advisor.label_rate=auto"]
    if advisor == "silent":
        return ["advisor.spawn=expert", f"advisor.label_rate={SILENT_RATE}"]
    return ["advisor.spawn=hf", f"advisor.spawn_options={{model: {json.dumps(str(vlm_model))}}}",
            "advisor.label_rate=auto"]


def _measure(args: argparse.Namespace, name: str, root: Path, vlm_model: Path | None) -> dict[str, Any]:
    from found_rl.train.config import load_run_config
    from found_rl.train.loop import Trainer

    advisor, overlap = CONFIGURATIONS[name]
    overrides = [
        f"budget.env_steps={args.env_steps}", "budget.wall_time_s=null",
        f"learner.learning_starts={args.learning_starts}", f"sampler.clips={args.clips}", "network=cpu",
        "evaluation.enabled=false", f"sampler.overlap={str(overlap).lower()}",
        "checkpoint.every_env_steps=100000000", "checkpoint.save_replay=false",
        *_advisor_overrides(advisor, vlm_model),
    ]
    config = load_run_config(args.scenario, overrides)
    run_dir = root / name.replace(", ", "-").replace(" ", "-")
    result = Trainer(config, run_dir, show_progress=not args.no_progress).run()
    row = {
        "env_steps": result.env_steps,
        "updates": result.updates,
        "wall_s": result.wall_s,
        "env_steps_per_s": result.learning_env_steps_per_s,
        "updates_per_s": result.learning_updates_per_s,
        "shares": result.shares,
    }
    if advisor != "none":
        row.update(result.labels)
    return row


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median env steps/s (a whole run, so its figures stay consistent)."""
    ranked = sorted(runs, key=lambda row: row["env_steps_per_s"])
    chosen = dict(ranked[(len(ranked) - 1) // 2])
    chosen["env_steps_per_s_all"] = [row["env_steps_per_s"] for row in runs]
    return chosen


def _ratio(a: float, b: float) -> float:
    return a / max(b, 1e-9)


def _report(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    alternating, overlapped = rows["plain, alternating"], rows["plain, overlapped"]
    silent = rows["guided, advisor silent"]
    report: dict[str, Any] = {
        "alternating_updates_per_s": alternating["updates_per_s"],
        "alternating_env_steps_per_s": alternating["env_steps_per_s"],
        "overlap_updates_per_s": overlapped["updates_per_s"],
        "overlap_env_steps_per_s": overlapped["env_steps_per_s"],
        "overlap_speedup": _ratio(overlapped["updates_per_s"], alternating["updates_per_s"]),
        "guidance_update_ratio": _ratio(silent["updates_per_s"], overlapped["updates_per_s"]),
        "expert_updates_per_s": rows["expert, overlapped"]["updates_per_s"],
        "expert_env_steps_per_s": rows["expert, overlapped"]["env_steps_per_s"],
        "advisor_ratio": _ratio(rows["expert, overlapped"]["env_steps_per_s"], silent["env_steps_per_s"]),
    }
    vlm = rows.get("VLM, overlapped")
    if vlm is not None:
        report.update(
            vlm_advisor_ratio=_ratio(vlm["env_steps_per_s"], silent["env_steps_per_s"]),
            vlm_label_rate=vlm["label_rate"],
            vlm_budget_coverage=vlm["budget_coverage"],
            vlm_marked_down=vlm["marked_down"],
        )
    report["targets"] = TARGETS
    report["targets_met"] = {key: report[key] >= bound for key, bound in TARGETS.items() if key in report}
    if vlm is not None:
        report["targets_met"]["vlm_never_marked_down"] = vlm["marked_down"] == 0
    report["configurations"] = rows
    report["load_average_1min"] = os.getloadavg()[0]
    report["cpu_count"] = os.cpu_count()
    return report


def _untrained_vlm(folder: Path) -> Path:
    from found_rl.vlm.scratch import init_advisor

    init_advisor(folder, "small", seed=0)
    return folder


def run(args: argparse.Namespace) -> int:
    if not args.scenario.is_file():
        raise MissingPathError(f"--scenario {args.scenario}: no such file")
    if args.vlm_model is not None and not args.vlm_model.is_dir():
        raise MissingPathError(f"--vlm-model {args.vlm_model}: no such folder")
    names = [name for name in CONFIGURATIONS if not (args.skip_vlm and CONFIGURATIONS[name][0] == "vlm")]
    with tempfile.TemporaryDirectory(prefix="found-rl-bench-train-") as folder:
        root = Path(folder)
        vlm_model = None if args.skip_vlm else (args.vlm_model or _untrained_vlm(root / "vlm-small"))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for round_index in range(args.repeat):
            for name in names:
                runs[name].append(_measure(args, name, root / f"round-{round_index}", vlm_model))
    rows = {name: _median_run(measured) for name, measured in runs.items()}
    report = _report(rows)
    report["repeat"] = args.repeat
    if args.json:
        print(json.dumps(report))
        return 0
    _print(report, args)
    return 0


def _print(report: dict[str, Any], args: argparse.Namespace) -> None:
    from rich.table import Table

    from found_rl.tables import print_table

    table = Table(title=f"training loop on {args.scenario.name}, CPU preset, {args.clips} clips, "
                        f"{args.env_steps:,} env steps each, rates from the first update on "
                        f"(load {report['load_average_1min']:.1f})")
    columns = ("configuration", "env steps/s", "updates/s", "waiting on workers", "updates", "advisor",
               "label rate", "budget labelled", "marked down")
    for column in columns:
        table.add_column(column, justify="left" if column == "configuration" else "right")
    for name, row in report["configurations"].items():
        shares = row["shares"]
        advised = "label_rate" in row
        table.add_row(
            name, f"{row['env_steps_per_s']:.0f}", f"{row['updates_per_s']:.1f}",
            *(f"{100 * shares[part]:.0f} %" for part in ("sampling", "updates", "advisor")),
            f"{row['label_rate']:.2g}" if advised else "",
            f"{100 * row['budget_coverage']:.0f} %" if advised else "",
            str(row["marked_down"]) if advised else "",
        )
    print_table(table)
    met = report["targets_met"]
    lines = [("overlapped / alternating updates/s", "overlap_speedup"),
             ("expert-advised / silent-advisor env steps/s", "advisor_ratio"),
             ("VLM-advised / silent-advisor env steps/s", "vlm_advisor_ratio"),
             ("VLM labels of its budget", "vlm_budget_coverage")]
    for text, key in lines:
        if key in report:
            print(f"{text}: {report[key]:.2f} (target >= {TARGETS[key]}: {'met' if met[key] else 'not met'})")
    if "vlm_marked_down" in report:
        print(f"VLM advisor marked down: {report['vlm_marked_down']} times (target 0)")
    print(f"guided / plain updates/s, both overlapped (VMR and AWAG's own cost): {report['guidance_update_ratio']:.2f}")
