"""``found-rl bench bev``: the BEV renderer alone, on synthetic scenes (see ``found_rl.bev.benchmark``)."""

from __future__ import annotations

import argparse

from found_rl.cli.argtypes import finite_float


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seconds", type=finite_float(0, inclusive=False), default=2.0, help="minimum timing time per case"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from found_rl.bev.benchmark import main

    argv = ["--seconds", str(args.seconds)] + (["--json"] if args.json else [])
    return main(argv)
