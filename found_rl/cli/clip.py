"""``found-rl clip``: fine-tune the CLIP reward model (``finetune``), measure its quality (``evaluate``),
and find where the image's signal is lost (``probe``, ``ladder``: ``found_rl.cli.clip_diagnostics``).

Examples::

    found-rl clip finetune --data data/expert --model found-rl-vit-tiny --out models/clip.pt --max-minutes 20
    found-rl clip evaluate --data data/expert --checkpoint models/clip.pt --json
    found-rl clip probe --data data/expert --same-split-as models/clip.pt --out models/probe.pt --max-minutes 20
    found-rl clip ladder --data data/expert --checkpoint models/clip.pt --probe models/probe.pt
    found-rl clip evaluate --data data/expert_town_b --checkpoint models/clip.pt --split other-towns
    found-rl clip finetune --data data/expert --model ViT-B-16 --pretrained laion2b_s34b_b88k \\
        --image-size 192 --lr 1e-5 --batch-size 256 --device cuda --out models/clip_vitb16.pt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from found_rl.argtypes import finite_float, int_at_least
from found_rl.cli import clip_diagnostics
from found_rl.cli.clip_args import (
    add_device_flags,
    add_run_length_flags,
    add_scoring_flags,
    add_training_data_flags,
    check_data,
    checkpoint_frames,
    load_served_checkpoint,
    run_epochs,
    torch_device,
)
from found_rl.cli.clip_report import evaluation_json, print_evaluation
from found_rl.cli.paths import check_output_dir, check_output_file
from found_rl.errors import ExistingPathError, MissingPathError
from vlm_server.clip_inputs import CONTEXTS, DEFAULT_CONTEXT, DEFAULT_IMAGE_INPUT, OBJECTIVES

SPLITS = ("eval", "other-towns")
"""``other-towns`` scores every frame of --data and checks its road networks against the training towns."""


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="clip_command", metavar="ACTION", required=True)

    finetune = actions.add_parser("finetune", help="contrastive fine-tuning on expert shards")
    add_training_data_flags(finetune)
    finetune.add_argument(
        "--model", required=True, help="found-rl-vit-tiny, found-rl-vit-small, found-rl-rn-tiny or an open_clip name"
    )
    finetune.add_argument("--pretrained", help="open_clip tag, weights file or found-rl checkpoint (default: scratch)")
    finetune.add_argument("--out", required=True, type=Path, help="checkpoint file to write")
    add_run_length_flags(finetune)
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
        "--train-text-tower", action="store_true",
        help="--objective logit-adjusted: train the text tower too (default: frozen, the anchors are fixed "
        "targets; a trained one collapses the anchors of a context and the evidence goes constant); "
        "contrastive always trains it",
    )
    finetune.add_argument(
        "--junction-share", type=finite_float(0.0, inclusive=False, maximum=0.95),
        help="draw junction frames to this share of each epoch (default: as collected, ~0.11)",
    )
    finetune.add_argument("--checkpoint-every", type=int_at_least(1), default=500, help="steps between checkpoints")
    finetune.add_argument("--logdir", type=Path, help="TensorBoard folder (default: OUT with .runs)")
    finetune.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_device_flags(finetune)
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
    add_scoring_flags(evaluate)
    add_device_flags(evaluate)
    evaluate.set_defaults(run=run_evaluate)

    clip_diagnostics.configure(actions)


def run_finetune(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out")
    if args.resume and not args.out.is_file():
        raise MissingPathError(f"--resume: {args.out} does not exist; drop --resume to start a new run")
    if not args.resume and args.out.exists():
        raise ExistingPathError(f"--out {args.out}: exists; pass --resume to continue it or choose a new file")
    check_data(args.data)
    logdir = args.logdir or args.out.with_name(args.out.name + ".runs")
    check_output_dir(logdir, "--logdir")
    import numpy as np

    from found_rl.clip.data import load_frames, split_by_episode
    from found_rl.clip.evaluate import dataset_fingerprint
    from found_rl.clip.finetune import DataInfo, FinetuneConfig, Finetuner
    from found_rl.clip.model import create_clip_model, default_image_size

    device = torch_device(args)
    image_size = args.image_size or default_image_size(args.model)
    config = FinetuneConfig(
        model_name=args.model,
        pretrained=args.pretrained,
        image_size=image_size,
        epochs=run_epochs(args),
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
        train_text_tower=args.train_text_tower,
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
    print(
        f"stopped by {result['stopped_by']}: {result['steps']} steps ({result['epochs']:.2f} epochs), "
        f"{result['wall_s'] / 60:.2f} min this session, {result['elapsed_s'] / 60:.2f} min in all"
    )
    nan = float("nan")
    print(
        f"held-out (up to {config.val_max_frames} frames): served bonus AUC {validation.get('auc', nan):.3f}, "
        f"top-1 {validation.get('top1', nan):.3f}; p(a | image, context) AUC {validation.get('model_auc', nan):.3f}, "
        f"lift over the prior {validation.get('auc_lift', nan):+.3f}"
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
    check_data(args.data)
    import numpy as np

    from found_rl.clip.evaluate import RecordedPriors, evaluate, held_out_scope
    from found_rl.clip.towns import frames_networks, town_names, training_networks
    from found_rl.dataset.town_overlap import overlap_warning, towns_overlap

    checkpoint, scorer = load_served_checkpoint(args.checkpoint, torch_device(args))
    training = checkpoint.training
    frames = checkpoint_frames(args.data, checkpoint, scorer, args)
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
        report = evaluation_json(result, checkpoint.objective, checkpoint.context, checkpoint.image_input)
        report["split"] = args.split
        report["towns_overlap_training"] = overlap
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    print_evaluation(args.checkpoint, result, checkpoint.objective, overlap)
    return 0
