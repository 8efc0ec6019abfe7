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

    vlm_server reports a bad flag, config file, backend option or model path as its
    ``UsageError`` (it never imports found-rl), as ``python -m vlm_server`` shows it: here it
    becomes a :class:`~found_rl.errors.UserError` (exit 2). Any other exception, a ``ValueError``
    of the server's own code included, is a bug and keeps its traceback (exit 1).
    """
    from vlm_server.cli import serve
    from vlm_server.errors import UsageError

    with as_user_error(UsageError):
        return serve(args)
