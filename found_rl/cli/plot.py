"""``found-rl plot``: learning curves of training runs, mean and spread over runs.

Each run folder's ``evaluations.jsonl`` gives one curve; runs with the same label are one
variant, drawn as the mean over runs with the min–max band. The reference policies of the first
run (``references.json``) are drawn as horizontal lines.

Example::

    found-rl plot plain=runs/plain-s0 plain=runs/plain-s1 guided=runs/guided-s0 --out curves.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

from found_rl.cli.paths import check_output_file
from found_rl.errors import UserError

METRICS = ("route_completion", "driving_score", "infraction_penalty")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="[LABEL=]RUN_DIR", help="run folders; LABEL groups seeds")
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--metric", choices=METRICS, action="append", help="metrics to draw (default RC and DS)")
    parser.add_argument("--title", default="", help="figure title")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from found_rl.train.curves import load_curves, plot_curves

    check_output_file(args.out, "--out")
    if args.out.suffix.lower() != ".png":
        raise UserError(f"--out {args.out}: expected a .png file")
    groups = load_curves(args.runs)
    plot_curves(groups, args.out, metrics=tuple(args.metric or METRICS[:2]), title=args.title)
    print(f"wrote {args.out} ({sum(len(g.runs) for g in groups.values())} runs, {len(groups)} variants)")
    return 0
