"""The ``found-rl`` command line: one entry point, one module per subcommand.

Each subcommand module defines ``configure(parser)``, which adds its arguments and sets
``parser.set_defaults(run=callable)``; the callable takes the parsed namespace and returns an
exit code. Heavy imports (torch, libsumo) stay inside the callables so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Collection, Sequence

from found_rl.errors import (
    DISK_FULL_ADVICE,
    EXIT_BUG,
    EXIT_CHILD_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OUTSIDE,
    EXIT_USAGE,
    ChildRunsFailed,
    OutsideFailure,
    UserError,
    is_disk_full,
)

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("found_rl.cli.train", "train a driving policy from a scenario file or run config"),
    "plot": ("found_rl.cli.plot", "draw learning curves of training runs (mean and spread over runs)"),
    "scenario": ("found_rl.cli.scenario", "validate and inspect scenario files"),
    "eval": ("found_rl.cli.evaluate", "closed-loop route evaluation with leaderboard metrics"),
    "expert": ("found_rl.cli.expert", "drive the privileged expert; collect datasets"),
    "clip": ("found_rl.cli.clip", "fine-tune and evaluate the CLIP reward model"),
    "serve": ("found_rl.cli.serve", "run the VLM/CLIP advisor server"),
    "vlm": ("found_rl.cli.vlm", "fine-tune a VLM advisor on expert data and score it against the expert"),
    "bench": ("found_rl.cli.bench", "speed and quality benchmarks (tables with side-by-side ratios)"),
    "carla": ("found_rl.cli.carla", "start, stop and list supervised CARLA servers"),
}

REPORT_LINE = (
    "found-rl {command}: this is a bug in found-rl, not your mistake; please report it with the traceback above"
)


def build_parser(configured: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line with the arguments of the ``configured`` subcommands (default: all) and
    the others' names only: a command imports only its own module (``found-rl serve`` none of
    training's)."""
    parser = argparse.ArgumentParser(
        prog="found-rl",
        description="Foundation-model-guided reinforcement learning for autonomous driving.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if configured is None or name in configured:
            importlib.import_module(module_name).configure(sub)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word: ``found-rl`` itself takes only ``-h``)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; the exit codes are listed in :mod:`found_rl.errors`.

    A user's mistake (:class:`~found_rl.errors.UserError`, a missing or misplaced path the user
    named among them) prints one clear line and exits 2, without a traceback; a failure outside
    found-rl (:class:`~found_rl.errors.OutsideFailure`) prints one line and exits 3; failed child
    runs (:class:`~found_rl.errors.ChildRunsFailed`) print a line each and exit 4; Ctrl-C exits
    130, naming the child runs it stopped (:class:`~found_rl.errors.ChildRunsInterrupted`).
    Anything else, a ``FileNotFoundError`` or ``PermissionError`` from found-rl's own files
    included, is a bug: it keeps its traceback, adds a line asking to report it and exits 1.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command_named(argv)
    parser = build_parser([command] if command is not None else [])
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UserError as exc:
        print(f"found-rl {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OutsideFailure as exc:
        print(f"found-rl {args.command}: stopped: {exc}", file=sys.stderr)
        return EXIT_OUTSIDE
    except ChildRunsFailed as exc:
        print(f"found-rl {args.command}: {exc}", file=sys.stderr)
        return EXIT_CHILD_FAILED
    except KeyboardInterrupt as exc:  # Ctrl-C; child runs it stopped are named (ChildRunsInterrupted)
        print(f"found-rl {args.command}: {exc}" if str(exc) else "interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if is_disk_full(exc):  # a write outside the atomic writers (logs, event files): the machine's state
            print(f"found-rl {args.command}: stopped: no space left on the device ({exc}); {DISK_FULL_ADVICE}",
                  file=sys.stderr)
            return EXIT_OUTSIDE
        traceback.print_exc()
        print(REPORT_LINE.format(command=args.command), file=sys.stderr)
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
