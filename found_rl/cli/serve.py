"""``found-rl serve``: run the VLM/CLIP advisor server (same options as ``python -m vlm_server``)."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from vlm_server.cli import add_arguments

    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from vlm_server.cli import serve

    return serve(args)
