"""``found-rl bench train``: the whole training loop, advisor off vs on, side by side.

Both configurations train the quickstart scenario with the CPU preset for the same number of
env steps (evaluation and checkpoints off, so only the loop is timed): once without an advisor,
once with the privileged expert served through the real advisor server (a spawned
``found-rl serve``). Reported per configuration: env steps/s, gradient updates/s and the share
of wall time spent sampling (env workers), in policy inference, in updates and on the advisor
(building requests, attaching answers). Target: with the advisor, throughput ≥ 0.9× without it
(training never waits on the advisor).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from found_rl.cli.argtypes import int_at_least

TARGET_RATIO = 0.9
QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", type=Path, default=QUICKSTART, help="scenario to train (default: quickstart)")
    parser.add_argument("--env-steps", type=int_at_least(100), default=4_000, help="env steps per configuration")
    parser.add_argument("--learning-starts", type=int_at_least(1), default=1_000,
                        help="env steps of random actions before updates start")
    parser.add_argument("--clips", type=int_at_least(1), default=4, help="FAST clips")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(run=run)


def _measure(args: argparse.Namespace, advisor: str, root: Path) -> dict[str, Any]:
    from found_rl.train.config import load_run_config
    from found_rl.train.loop import Trainer

    overrides = [
        f"budget.env_steps={args.env_steps}", f"learner.learning_starts={args.learning_starts}",
        f"sampler.clips={args.clips}", "network=cpu", "evaluation.enabled=false",
        "checkpoint.every_env_steps=100000000", "checkpoint.save_replay=false", f"advisor={advisor}",
    ]
    if advisor == "none":  # the same run without guidance: nothing to label
        overrides += ["guidance.vmr.enabled=false", "guidance.awag.enabled=false"]
    config = load_run_config(args.scenario, overrides)
    result = Trainer(config, root / advisor.replace(":", "-"), show_progress=not args.no_progress).run()
    return {
        "env_steps": result.env_steps,
        "updates": result.updates,
        "wall_s": result.wall_s,
        "env_steps_per_s": result.env_steps_per_s,
        "updates_per_s": result.updates_per_s,
        "shares": result.shares,
        "label_coverage": result.label_coverage,
    }


def run(args: argparse.Namespace) -> int:
    if not args.scenario.is_file():
        raise FileNotFoundError(f"--scenario {args.scenario}: no such file")
    with tempfile.TemporaryDirectory(prefix="found-rl-bench-train-") as folder:
        off = _measure(args, "none", Path(folder))
        on = _measure(args, "spawn:expert", Path(folder))
    ratio = on["env_steps_per_s"] / max(off["env_steps_per_s"], 1e-9)
    report = {
        "env_steps_per_s": off["env_steps_per_s"],
        "updates_per_s": off["updates_per_s"],
        "advisor_throughput_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "target_met": ratio >= TARGET_RATIO,
        "advisor_off": off,
        "advisor_on": on,
        "load_average_1min": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.table import Table

    from found_rl.tables import print_table

    table = Table(title=f"training loop on {args.scenario.name}, CPU preset, {args.clips} clips, "
                        f"{args.env_steps:,} env steps each (load {report['load_average_1min']:.1f})")
    for column in ("advisor", "env steps/s", "updates/s", "sampling", "policy", "updates", "advisor %", "labels"):
        table.add_column(column, justify="left" if column == "advisor" else "right")
    for name, row in (("none", off), ("expert, served", on)):
        shares = row["shares"]
        table.add_row(
            name, f"{row['env_steps_per_s']:.0f}", f"{row['updates_per_s']:.1f}",
            *(f"{100 * shares[part]:.0f} %" for part in ("sampling", "policy", "updates", "advisor")),
            f"{100 * row['label_coverage']:.0f} %",
        )
    print_table(table)
    print(f"with/without advisor: {ratio:.2f}× env steps/s (target >= {TARGET_RATIO}: "
          f"{'met' if report['target_met'] else 'not met'})")
    return 0
