"""``python -m vlm_server``: run the advisor server."""

from __future__ import annotations

import argparse
import sys

from vlm_server.cli import add_arguments, serve
from vlm_server.errors import UsageError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vlm_server", description="VLM/CLIP advisor server"
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return serve(args)
    except UsageError as exc:  # the user's mistake (a missing file too); anything else is a bug
        print(f"vlm_server: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
