"""``found-rl clip``: fine-tune the CLIP reward model (``finetune``) and measure its quality (``evaluate``).

Examples::

    found-rl clip finetune --data data/expert --model found-rl-vit-tiny --out models/clip.pt
    found-rl clip evaluate --data data/expert --checkpoint models/clip.pt --json
    found-rl clip evaluate --data data/expert_town_b --checkpoint models/clip.pt --split other-towns
    found-rl clip finetune --data data/expert --model ViT-B-16 --pretrained laion2b_s34b_b88k \\
        --image-size 192 --lr 1e-5 --batch-size 256 --device cuda --out models/clip_vitb16.pt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from found_rl.cli.argtypes import SEED, finite_float, int_at_least
from found_rl.cli.paths import check_output_dir, check_output_file
from found_rl.devices import resolve_device
from found_rl.errors import UserError, as_user_error
from vlm_server.clip_inputs import CONTEXTS, DEFAULT_CONTEXT, DEFAULT_IMAGE_INPUT, IMAGE_INPUTS, OBJECTIVES

SPLITS = ("eval", "other-towns")
"""``other-towns`` scores every frame of --data and checks its road networks against the training towns."""


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="clip_command", metavar="ACTION", required=True)

    finetune = actions.add_parser("finetune", help="contrastive fine-tuning on expert shards")
    finetune.add_argument("--data", required=True, type=Path, help="expert dataset folder (`expert collect --out`)")
    finetune.add_argument(
        "--model", required=True, help="found-rl-vit-tiny, found-rl-vit-small, found-rl-rn-tiny or an open_clip name"
    )
    finetune.add_argument("--pretrained", help="open_clip tag, weights file or found-rl checkpoint (default: scratch)")
    finetune.add_argument(
        "--image-size", type=int_at_least(16), help="model input side, px (default: the small configs' 64, else 192)"
    )
    finetune.add_argument("--out", required=True, type=Path, help="checkpoint file to write")
    finetune.add_argument("--epochs", type=int_at_least(1), default=6)
    finetune.add_argument("--batch-size", type=int_at_least(2), default=128)
    finetune.add_argument("--lr", type=finite_float(0.0, inclusive=False), default=2e-3, help="peak learning rate")
    finetune.add_argument("--weight-decay", type=finite_float(0.0, inclusive=True), default=0.1)
    finetune.add_argument("--warmup-steps", type=int_at_least(1), default=100)
    finetune.add_argument("--grad-clip", type=finite_float(0.0, inclusive=False), default=1.0)
    finetune.add_argument(
        "--objective", choices=OBJECTIVES, default="logit-adjusted",
        help="logit-adjusted: learn the image's evidence beyond p(a | context) (default); contrastive: "
        "the caption-aware InfoNCE of earlier checkpoints",
    )
    finetune.add_argument(
        "--context", choices=sorted(CONTEXTS), default=DEFAULT_CONTEXT,
        help="the prior's context for --objective logit-adjusted (default command-speed)",
    )
    finetune.add_argument(
        "--image-input", choices=sorted(IMAGE_INPUTS), default=DEFAULT_IMAGE_INPUT,
        help="rgb: the BEV of o_t; rgb-history: stacked with the BEVs 1.5, 1.0, 0.5 s before (default rgb)",
    )
    finetune.add_argument(
        "--junction-share", type=finite_float(0.0, inclusive=False, maximum=0.95),
        help="draw junction frames to this share of each epoch (default: as collected, ~0.11)",
    )
    finetune.add_argument(
        "--val-fraction", type=finite_float(0.0, inclusive=False, maximum=0.9), default=0.1,
        help="share of episodes held out (default 0.1)",
    )
    finetune.add_argument("--max-frames", type=int_at_least(1), help="read only the first N frames")
    finetune.add_argument("--max-minutes", type=finite_float(0.0, inclusive=False), help="stop and save after this")
    finetune.add_argument("--checkpoint-every", type=int_at_least(1), default=500, help="steps between checkpoints")
    finetune.add_argument("--seed", type=SEED, default=0)
    finetune.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1)")
    finetune.add_argument("--threads", type=int_at_least(1), help="torch CPU threads (default: torch's)")
    finetune.add_argument("--logdir", type=Path, help="TensorBoard folder (default: OUT with .runs)")
    finetune.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    finetune.add_argument("--no-progress", action="store_true")
    finetune.set_defaults(run=run_finetune)

    evaluate = actions.add_parser("evaluate", help="reward quality of a checkpoint on held-out expert frames")
    evaluate.add_argument("--data", required=True, type=Path, help="expert dataset folder")
    evaluate.add_argument("--checkpoint", required=True, type=Path, help="`clip finetune --out` file")
    evaluate.add_argument(
        "--split", choices=SPLITS, default="eval",
        help="eval: the checkpoint's held-out episodes of its own training data, every sample of any other "
        "dataset (default); other-towns: every sample of a dataset of other towns, warning if a road network "
        "was in the training data",
    )
    evaluate.add_argument("--max-frames", type=int_at_least(1), help="read only the first N frames")
    evaluate.add_argument("--device", default="cpu")
    evaluate.add_argument("--threads", type=int_at_least(1))
    evaluate.add_argument(
        "--min-context-frames", type=int_at_least(1), default=30,
        help="contexts (command x speed bin) with fewer held-out frames are skipped, and named (default 30)",
    )
    evaluate.add_argument("--shuffle-seed", type=SEED, default=0, help="seed of the within-context image shuffle")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object (auc, top1, ...)")
    evaluate.add_argument("--no-progress", action="store_true")
    evaluate.set_defaults(run=run_evaluate)


def _check_data(path: Path) -> None:
    from found_rl.dataset.shards import read_manifest

    if not path.is_dir():
        raise FileNotFoundError(f"--data {path}: no such folder")
    read_manifest(path)


def run_finetune(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    if args.resume and not args.out.is_file():
        raise FileNotFoundError(f"--resume: {args.out} does not exist; drop --resume to start a new run")
    if not args.resume and args.out.exists():
        raise FileExistsError(f"--out {args.out}: exists; pass --resume to continue it or choose a new file")
    _check_data(args.data)
    logdir = args.logdir or args.out.with_name(args.out.name + ".runs")
    check_output_dir(logdir, "--logdir")
    import numpy as np
    import torch

    from found_rl.clip.data import load_frames, split_by_episode
    from found_rl.clip.evaluate import dataset_fingerprint
    from found_rl.clip.finetune import DataInfo, FinetuneConfig, Finetuner
    from found_rl.clip.model import create_clip_model, default_image_size

    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    image_size = args.image_size or default_image_size(args.model)
    config = FinetuneConfig(
        model_name=args.model,
        pretrained=args.pretrained,
        image_size=image_size,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup_steps=args.warmup_steps,
        grad_clip_norm=args.grad_clip,
        seed=args.seed,
        max_minutes=args.max_minutes,
        checkpoint_every_steps=args.checkpoint_every,
        device=str(device),
        objective=args.objective,
        context=args.context,
        image_input=args.image_input,
        junction_share=args.junction_share,
    )
    # fail on a bad model before reading the data
    create_clip_model(args.model, args.pretrained, image_size, args.image_input)
    frames = load_frames(
        args.data, image_size, args.max_frames, show_progress=not args.no_progress, image_input=args.image_input
    )
    split = split_by_episode(frames.episodes, args.val_fraction, args.seed, str(args.data))
    held_out = split.held_out_mask(frames.episodes)
    data = DataInfo(
        str(args.data.resolve()), dataset_fingerprint(args.data), frames.input_size, split, args.val_fraction
    )
    num_episodes = len(np.unique(frames.episodes))
    print(
        f"{len(frames)} frames from {num_episodes} episodes: {int((~held_out).sum())} train, "
        f"{int(held_out.sum())} held out ({len(split.held_out)} episodes); {args.model} at {image_size} px",
        flush=True,
    )
    finetuner = Finetuner(
        config, frames.subset(~held_out), frames.subset(held_out), data, args.out, resume=args.resume, logdir=logdir
    )
    del frames
    result = finetuner.run(show_progress=not args.no_progress)
    validation = result["validation"]
    status = " (stopped at --max-minutes)" if result["stopped_early"] else ""
    print(
        f"{result['steps']}/{result['total_steps']} steps in {result['wall_s'] / 60:.1f} min{status}; held-out "
        f"(up to {config.val_max_frames} frames): AUC {validation.get('auc', float('nan')):.3f} "
        f"(lift over the prior {validation.get('auc_lift', float('nan')):+.3f}), "
        f"top-1 {validation.get('top1', float('nan')):.3f}"
    )
    print(f"checkpoint: {args.out}  (TensorBoard: {logdir})")
    print(f"full evaluation: found-rl clip evaluate --data {args.data} --checkpoint {args.out}")
    print(f"serve it: found-rl serve --clip openclip --clip-option checkpoint={args.out}{_serve_options(config)}")
    return 0


def _serve_options(config) -> str:
    """The ``--clip-option``s a server needs beyond the checkpoint (its defaults are command-speed, rgb)."""
    options = ""
    if config.context != DEFAULT_CONTEXT:
        options += f" --clip-option context={config.context}"
    if config.image_input != DEFAULT_IMAGE_INPUT:
        options += f" --clip-option image_input={config.image_input}"
    return options


def run_evaluate(args: argparse.Namespace) -> int:
    _check_data(args.data)
    import numpy as np
    import torch

    from found_rl.clip.data import load_frames
    from found_rl.clip.evaluate import RecordedPriors, evaluate, held_out_scope
    from found_rl.clip.towns import frames_networks, town_names, training_networks
    from found_rl.dataset.town_overlap import overlap_warning, towns_overlap
    from vlm_server.backends.clip import OpenClipScorer
    from vlm_server.clip_checkpoint import read_checkpoint

    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    with as_user_error():  # a file that is no CLIP checkpoint
        checkpoint = read_checkpoint(args.checkpoint)
        scorer = OpenClipScorer(
            checkpoint=str(args.checkpoint),
            device=str(device),
            context=checkpoint.context,
            image_input=checkpoint.image_input,
        )
        scorer.load()
    training = checkpoint.training
    frames = load_frames(
        args.data,
        scorer.model_side,
        args.max_frames,
        show_progress=not args.no_progress,
        image_input=checkpoint.image_input,
    )
    if frames.input_size != scorer.image_hw[0]:
        raise UserError(
            f"--data {args.data}: BEVs are {frames.input_size} px, "
            f"the checkpoint was trained on {scorer.image_hw[0]} px"
        )
    if args.split == "other-towns":
        scored, scope = np.ones(len(frames), dtype=bool), "every sample of --data (--split other-towns)"
    else:
        scored, scope = held_out_scope(frames, training, args.data)
    result = evaluate(
        scorer,
        frames,
        scored,
        scope,
        recorded=RecordedPriors.of(training),
        min_context_frames=args.min_context_frames,
        shuffle_seed=args.shuffle_seed,
        show_progress=not args.no_progress,
        towns=town_names(frames),
    )
    evaluated = frames_networks(frames.subset(scored))
    trained = training_networks(training, frames, args.data) if evaluated else None
    overlap = towns_overlap(evaluated, trained) if evaluated and trained is not None else None
    if args.split == "other-towns" and overlap:
        print(overlap_warning(overlap), file=sys.stderr)
    elif args.split == "other-towns" and overlap is None:
        print(
            f"note: cannot check that --data {args.data} is held out by town: the road networks of "
            + ("--data" if not evaluated else "the checkpoint's training data")
            + " are not recorded, or not under the same network identity (collect it again)",
            file=sys.stderr,
        )
    if args.json:
        report = _json_report(result, checkpoint)
        report["split"] = args.split
        report["towns_overlap_training"] = overlap
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    _print_report(args.checkpoint, result, checkpoint.objective, overlap)
    return 0


def _json_report(result, checkpoint) -> dict:
    report = _quality_json(result)
    report["scope"] = result.scope
    report["objective"] = checkpoint.objective
    report["context"] = checkpoint.context
    report["image_input"] = checkpoint.image_input
    if result.per_town:
        report["per_town"] = {town: _quality_json(row) for town, row in result.per_town.items()}
    return report


def _quality_json(result) -> dict:
    """The numbers of one evaluation (all scored frames, or one town's)."""
    report = result.quality.to_json()
    report["prior"] = None if result.prior is None else {"auc": result.prior.auc, "top1": result.prior.top1}
    if result.evidence is not None:
        report.update(result.evidence.to_json())
    return report


def _print_report(checkpoint: Path, result, checkpoint_objective: str, overlap: list[dict] | None) -> None:
    quality, prior = result.quality, result.prior
    print(f"{checkpoint}: {quality.frames} frames, {result.scope}")
    print(
        f"  AUC (bonus, expert vs actions outside N(a)): {quality.auc:.3f}   "
        f"on the raw margin: {quality.auc_margin:.3f}"
    )
    print(f"  top-1 (30-way): {quality.top1:.3f}   argmax in N(a): {quality.top1_neighbourhood:.3f}")
    if prior is not None:
        print(f"  image-blind prior (training action frequencies per command and speed): AUC {prior.auc:.3f}, "
              f"top-1 {prior.top1:.3f}")
    evidence = result.evidence
    if evidence is not None:
        if checkpoint_objective == "logit-adjusted":
            print(
                "  the bonus scores the image's evidence beyond the prior (chance: 0.5); below, the model's "
                f"p(a | image, context) = residual x prior: AUC {evidence.model_auc:.3f}"
            )
        print(
            f"  lift over the prior: {evidence.auc_lift:+.3f}   images shuffled within contexts: "
            f"AUC {evidence.shuffled_auc:.3f}"
        )
        print("  per context (frames, AUC, prior AUC, lift):")
        for name, context in evidence.per_context.items():
            print(
                f"    {name:<48} {context.frames:>6}  {context.auc:.3f}  {context.prior_auc:.3f}  "
                f"{context.auc_lift:+.3f}"
            )
        if evidence.skipped_contexts:
            skipped = ", ".join(f"{name} ({count})" for name, count in evidence.skipped_contexts.items())
            print(f"    skipped, under {evidence.min_context_frames} frames: {skipped}")

    print("  per command (top-1, frames):")
    for command, top1 in quality.per_command_top1.items():
        print(f"    {command:<34} {top1:.3f}  {quality.per_command_frames[command]}")
    if result.per_town:
        _print_towns(result.per_town)
    for name, dist in (("expert", quality.bonus_expert), ("far", quality.bonus_far)):
        q = dist.quantiles
        print(
            f"  bonus, {name:<6} actions: mean {dist.mean:+.3f} std {dist.std:.3f}  "
            f"p05 {q['p05']:+.3f} p50 {q['p50']:+.3f} p95 {q['p95']:+.3f}  at +0.25: {dist.at_max:.2f}  "
            f"at -0.25: {dist.at_min:.2f}"
        )
    if overlap is not None:
        towns = ", ".join(sorted({entry["town"] for entry in overlap})) or "none"
        print(f"  road networks also in the training data: {towns}")


def _print_towns(per_town: dict) -> None:
    """One row per town: the headline numbers of its frames scored alone (all of them in --json)."""
    has_prior = any(row.evidence is not None for row in per_town.values())
    columns = "frames, AUC, top-1, argmax in N(a)"
    columns += ", model AUC, prior AUC, lift, shuffled AUC" if has_prior else ""
    print(f"  per town ({columns}):")
    for town, row in per_town.items():
        quality, evidence = row.quality, row.evidence
        line = f"    {town:<34} {quality.frames:>6}  {quality.auc:.3f}  {quality.top1:.3f}"
        line += f"  {quality.top1_neighbourhood:.3f}"
        if evidence is not None:
            line += f"  {evidence.model_auc:.3f}  {evidence.prior_auc:.3f}  {evidence.auc_lift:+.3f}"
            line += f"  {evidence.shuffled_auc:.3f}"
        print(line)
