"""``found-rl serve``: run the VLM/CLIP advisor server (same options as ``python -m vlm_server``)."""

from __future__ import annotations

import argparse

from found_rl.errors import as_user_error


def configure(parser: argparse.ArgumentParser) -> None:
    from vlm_server.cli import add_arguments

    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted.

    vlm_server reports a bad flag or config file as ``ValueError`` (it never imports found-rl),
    as ``python -m vlm_server`` shows it: here it becomes a :class:`~found_rl.errors.UserError`.
    """
    from vlm_server.cli import serve

    with as_user_error():
        return serve(args)
