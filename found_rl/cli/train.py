"""``found-rl train``: train a driving policy from a scenario file or a run config.

Examples::

    found-rl train scenarios/quickstart.yaml
    found-rl train my_run.yaml --run-dir runs/a --set budget.env_steps=50000 --set sampler.clips=8
    found-rl train --resume runs/a            # continue a stopped run where it stopped
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from found_rl.errors import ExistingPathError, NotAFolderError, UserError

EXIT_INTERRUPTED = 130


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", type=Path,
        help="scenario YAML (trained with default run settings) or run config YAML naming a scenario",
    )
    parser.add_argument("--run-dir", type=Path, help="run folder (default: runs/<file>-<date>-<time>)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a run-config field by its dotted path, e.g. budget.env_steps=5000 (repeatable)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar and tables")
    parser.set_defaults(run=run)


def _config_and_folder(args: argparse.Namespace):
    from found_rl.train.config import load_run_config, validate_run_config
    from found_rl.train.run_folder import RunFolder

    if args.resume is not None:
        if args.run_dir is not None and args.run_dir.resolve() != args.resume.resolve():
            raise UserError("--run-dir and --resume name different folders; --resume alone continues a run")
        folder = RunFolder(args.resume)
        if args.file is not None:
            config = load_run_config(args.file, args.overrides)
        else:
            from found_rl.train.config import apply_overrides

            stored = apply_overrides(folder.stored_config(), args.overrides)
            config = validate_run_config(stored, str(folder.config), folder.root)
        return folder.resumed_config(config), folder
    if args.file is None:
        raise UserError("FILE: give a scenario or run config to train, or --resume RUN_DIR")
    config = load_run_config(args.file, args.overrides)
    run_dir = args.run_dir or Path("runs") / f"{args.file.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = RunFolder(run_dir)
    if folder.config.exists():
        raise ExistingPathError(
            f"--run-dir {run_dir}: already holds a run; continue it with --resume {run_dir}, or pass a new --run-dir"
        )
    if run_dir.exists() and not run_dir.is_dir():
        raise NotAFolderError(f"--run-dir {run_dir}: is a file, not a folder")
    return config, folder


def run(args: argparse.Namespace) -> int:
    config, folder = _config_and_folder(args)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from found_rl.train.loop import Trainer

    trainer = Trainer(config, folder.root, resume=args.resume is not None, show_progress=not args.no_progress)
    result = trainer.run()
    evaluation = result.last_evaluation
    scores = (
        f"last evaluation RC {evaluation['route_completion']:.2f}, DS {evaluation['driving_score']:.2f} "
        f"({'unseen towns' if evaluation.get('eval_town_unseen') else 'seen routes only'})"
        if evaluation else "no evaluation"
    )
    print(
        f"{'interrupted' if result.interrupted else 'finished'}: {result.env_steps:,} env steps, "
        f"{result.updates:,} updates in {result.wall_s / 60:.1f} min ({result.env_steps_per_s:.0f} steps/s, "
        f"{result.updates_per_s:.1f} updates/s); {scores}"
    )
    print(f"run folder: {folder.root}")
    print(f"  resume:   found-rl train --resume {folder.root}")
    print(f"  curves:   found-rl plot {folder.root} --out {folder.root / 'curve.png'}")
    for item in result.evaluation_sets:
        seen = f"seen: {', '.join(item.seen_by)}" if not item.unseen else "unseen"
        print(f"  evaluate on {item.name.removesuffix(' (seen)')} ({seen}): found-rl eval --scenario {item.scenario} "
              f"--routes {item.routes_path} --agent checkpoint:{folder.final_policy} "
              f"--out {folder.root / ('eval_' + item.routes_path.stem + '.json')}")
    return EXIT_INTERRUPTED if result.interrupted else 0
