"""``found-rl clip probe`` and ``found-rl clip ladder``: where the image's signal is lost (issue 32).

``probe`` trains the supervised action probe (``found_rl.clip.probe``, rung (a)) on the same
held-out split as a CLIP checkpoint (``--same-split-as``) or as ``clip finetune`` would draw it,
and reports it as ``clip evaluate`` reports a checkpoint. ``ladder`` reads a probe file and a
checkpoint of the same data and split, and prints the rungs (a) probe, (b) CLIP model,
(c) served bonus and the learner's bonus side by side (``found_rl.clip.ladder``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from found_rl.argtypes import finite_float, int_at_least
from found_rl.cli import clip_args
from found_rl.cli.clip_report import evaluation_json, ladder_json, print_evaluation, print_ladder
from found_rl.cli.paths import check_output_file
from found_rl.errors import ExistingPathError, MissingPathError, UserError, as_user_error


def configure(actions: argparse._SubParsersAction) -> None:
    """Add the ``probe`` and ``ladder`` actions to ``found-rl clip``."""
    probe = actions.add_parser(
        "probe", help="ladder rung (a): a supervised action classifier on the CLIP image tower, scored like evaluate"
    )
    clip_args.add_training_data_flags(probe)
    probe.add_argument("--out", required=True, type=Path, help="probe file to write (for `clip ladder --probe`)")
    probe.add_argument(
        "--same-split-as", type=Path, metavar="CHECKPOINT",
        help="hold out this `clip finetune` checkpoint's episodes (default: --val-fraction and --seed, "
        "as clip finetune draws them)",
    )
    probe.add_argument("--model", default="found-rl-vit-tiny", help="whose image tower (default found-rl-vit-tiny)")
    probe.add_argument("--pretrained", help="the tower's initial weights: open_clip tag, file or found-rl checkpoint")
    probe.add_argument(
        "--frozen-tower", action="store_true",
        help="train the head only (with --pretrained CHECKPOINT: what its image features already hold)",
    )
    clip_args.add_run_length_flags(probe)
    probe.add_argument("--batch-size", type=int_at_least(2), default=64)
    probe.add_argument("--lr", type=finite_float(0.0, inclusive=False), default=1e-3, help="peak learning rate")
    probe.add_argument("--weight-decay", type=finite_float(0.0, inclusive=True), default=0.05)
    probe.add_argument("--warmup-steps", type=int_at_least(1), default=50)
    clip_args.add_scoring_flags(probe)
    clip_args.add_device_flags(probe)
    probe.set_defaults(run=run_probe)

    ladder = actions.add_parser(
        "ladder", help="rungs (a) probe, (b) CLIP model, (c) served and learner's bonus, side by side"
    )
    ladder.add_argument("--data", required=True, type=Path, help="the checkpoint's training dataset folder")
    ladder.add_argument("--checkpoint", required=True, type=Path, help="`clip finetune --out` file")
    ladder.add_argument("--probe", required=True, type=Path, help="`clip probe --out` file of the same split")
    ladder.add_argument("--max-frames", type=int_at_least(1), help="read only the first N frames")
    clip_args.add_scoring_flags(ladder)
    clip_args.add_device_flags(ladder)
    ladder.set_defaults(run=run_ladder)


def run_probe(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    if args.out.exists():
        raise ExistingPathError(f"--out {args.out}: exists; choose a new file")
    clip_args.check_data(args.data)
    split_from = _split_checkpoint(args.same_split_as, args.data) if args.same_split_as else None
    from found_rl.clip.data import load_frames, split_by_episode
    from found_rl.clip.evaluate import dataset_fingerprint, evaluate, held_out_episodes_scope
    from found_rl.clip.model import create_clip_model, default_image_size
    from found_rl.clip.probe import ProbeConfig, ProbeScorer
    from found_rl.clip.probe_training import train_probe
    from found_rl.clip.towns import town_names

    device = clip_args.torch_device(args)
    image_size = args.image_size or default_image_size(args.model)
    with as_user_error():
        config = ProbeConfig(
            model_name=args.model, image_size=image_size, image_input=args.image_input, pretrained=args.pretrained,
            is_tower_frozen=args.frozen_tower, epochs=clip_args.run_epochs(args), max_minutes=args.max_minutes,
            batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay, warmup_steps=args.warmup_steps,
            seed=args.seed, device=str(device),
        )
    create_clip_model(args.model, args.pretrained, image_size, args.image_input)  # a bad model fails before the data
    frames = load_frames(
        args.data, image_size, args.max_frames, show_progress=not args.no_progress, image_input=args.image_input
    )
    if split_from is None:
        held_out_episodes = split_by_episode(frames.episodes, args.val_fraction, args.seed, str(args.data)).held_out
    else:
        held_out_episodes = tuple(split_from)
    held_out, scope = held_out_episodes_scope(frames, held_out_episodes, args.data)
    record = {
        "data": str(args.data.resolve()),
        "data_sha256": dataset_fingerprint(args.data),
        "held_out_episodes": [int(episode) for episode in held_out_episodes],
        "input_size": frames.input_size,
        "same_split_as": None if args.same_split_as is None else str(args.same_split_as),
    }
    trained, run = train_probe(config, frames.subset(~held_out), record, show_progress=not args.no_progress)
    trained.save(args.out)
    result = evaluate(
        ProbeScorer(trained, device), frames, held_out, scope, min_context_frames=args.min_context_frames,
        shuffle_seed=args.shuffle_seed, show_progress=not args.no_progress, towns=town_names(frames),
    )
    objective = "probe (cross-entropy over the 30 actions)"
    if args.json:
        report = evaluation_json(result, objective, "command-speed", config.image_input)
        report["run"] = {"steps": run.steps, "epochs": run.epochs, "stopped_by": run.stopped_by, "wall_s": run.wall_s}
        report["model"] = {"name": config.model_name, "image_size": config.image_size}
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    print(
        f"probe ({config.model_name} at {config.image_size} px): stopped by {run.stopped_by} after {run.steps} steps "
        f"({run.epochs:.2f} epochs, {run.wall_s / 60:.2f} min); saved to {args.out}"
    )
    print_evaluation(args.out, result, objective)
    print(f"the ladder: found-rl clip ladder --data {args.data} --checkpoint CHECKPOINT --probe {args.out}")
    return 0


def _split_checkpoint(path: Path, data: Path) -> list[int]:
    """The held-out episodes of the checkpoint ``--same-split-as`` names, refused unless trained on ``data``."""
    from found_rl.clip.evaluate import dataset_fingerprint
    from vlm_server.clip_checkpoint import read_checkpoint

    if not path.is_file():
        raise MissingPathError(f"--same-split-as {path}: no such file")
    with as_user_error():
        training = read_checkpoint(path).training
    if training.get("data_sha256") != dataset_fingerprint(data):
        raise UserError(f"--same-split-as {path}: was trained on other data than --data {data}")
    return [int(episode) for episode in training.get("held_out_episodes", [])]


def run_ladder(args: argparse.Namespace) -> int:
    clip_args.check_data(args.data)
    from found_rl.clip.data import load_frames
    from found_rl.clip.evaluate import dataset_fingerprint, held_out_scope, score_held_out
    from found_rl.clip.ladder import diagnostic_ladder
    from found_rl.clip.probe import ProbeScorer, load_probe
    from found_rl.clip.towns import town_names

    device = clip_args.torch_device(args)
    checkpoint, scorer = clip_args.load_served_checkpoint(args.checkpoint, device)
    trained = load_probe(args.probe)
    fingerprint = dataset_fingerprint(args.data)
    _check_same_split(args, checkpoint.training, trained.record, fingerprint)
    frames = clip_args.checkpoint_frames(args.data, checkpoint, scorer, args)
    scored, scope = held_out_scope(frames, checkpoint.training, args.data)
    probe_config = trained.config
    if (probe_config.image_size, probe_config.image_input) == (scorer.model_side, checkpoint.image_input):
        probe_frames = frames
    else:
        probe_frames = load_frames(
            args.data, probe_config.image_size, args.max_frames, show_progress=not args.no_progress,
            image_input=probe_config.image_input,
        )
    towns = town_names(frames)
    progress = not args.no_progress
    clip_scores = score_held_out(scorer, frames, scored, None, args.shuffle_seed, progress, towns)
    probe_scores = score_held_out(ProbeScorer(trained, device), probe_frames, scored, None, args.shuffle_seed,
                                  progress, towns)
    record = trained.record
    rungs = diagnostic_ladder(
        probe_scores,
        clip_scores,
        probe_label=f"{probe_config.model_name} {probe_config.image_size} px, cross-entropy, "
        f"{record.get('epochs', float('nan')):.1f} epochs ({record.get('stopped_by')})",
        clip_label=f"{checkpoint.model_name} {checkpoint.image_size} px, {checkpoint.objective}, "
        f"{_clip_epochs(checkpoint.training):.1f} epochs",
        min_context_frames=args.min_context_frames,
    )
    if args.json:
        json.dump(ladder_json(rungs, scope, args.data), sys.stdout, indent=2)
        print()
        return 0
    print_ladder(rungs, scope, args.data)
    return 0


def _clip_epochs(training: dict[str, Any]) -> float:
    steps_per_epoch = training.get("steps_per_epoch") or 0
    return training.get("step", 0) / steps_per_epoch if steps_per_epoch else float("nan")


def _check_same_split(args: argparse.Namespace, training: dict[str, Any], record: dict[str, Any], data: str) -> None:
    """Refuse, naming the files, a checkpoint and probe that do not hold out the same episodes of ``--data``."""
    if training.get("data_sha256") != data:
        raise UserError(
            f"--checkpoint {args.checkpoint}: was trained on other data than --data {args.data}; "
            "the ladder scores its held-out episodes"
        )
    if record.get("data_sha256") != data:
        raise UserError(f"--probe {args.probe}: was trained on other data than --data {args.data}")
    if sorted(record.get("held_out_episodes", [])) != sorted(training.get("held_out_episodes", [])):
        raise UserError(
            f"--probe {args.probe} and --checkpoint {args.checkpoint} hold out different episodes; "
            f"train the probe with --same-split-as {args.checkpoint}"
        )
