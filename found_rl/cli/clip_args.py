"""What the ``found-rl clip`` actions share: their common flags, and reading the data and checkpoint they name.

``finetune`` and ``probe`` train with the same run-length and data flags; ``evaluate``, ``probe``
and ``ladder`` score held-out frames with the same scoring flags and the same served checkpoint
loader, so one flag means one thing in every action.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from found_rl.argtypes import SEED, finite_float, int_at_least
from found_rl.clip.schedule import DEFAULT_EPOCHS
from found_rl.errors import MissingPathError, UserError, as_user_error
from vlm_server.clip_inputs import DEFAULT_IMAGE_INPUT, IMAGE_INPUTS

if TYPE_CHECKING:  # the CLI imports torch only inside its commands
    from found_rl.clip.data import ClipFrames


def add_run_length_flags(parser: argparse.ArgumentParser) -> None:
    """``--epochs`` and ``--max-minutes`` (``found_rl.clip.schedule``)."""
    parser.add_argument(
        "--epochs", type=int_at_least(1),
        help=f"stop after N epochs (default {DEFAULT_EPOCHS} without --max-minutes; with it, no epoch limit)",
    )
    parser.add_argument(
        "--max-minutes", type=finite_float(0.0, inclusive=False),
        help="train for this long: epochs repeat until the time is used (with --epochs: whichever comes first)",
    )


def add_training_data_flags(parser: argparse.ArgumentParser) -> None:
    """The dataset, its held-out split and the image the tower reads."""
    parser.add_argument("--data", required=True, type=Path, help="expert dataset folder (`expert collect --out`)")
    parser.add_argument(
        "--image-size", type=int_at_least(16), help="model input side, px (default: the small configs' 64, else 192)"
    )
    parser.add_argument(
        "--image-input", choices=sorted(IMAGE_INPUTS), default=DEFAULT_IMAGE_INPUT,
        help="rgb: the BEV of o_t; rgb-history: stacked with the BEVs 1.5, 1.0, 0.5 s before (default rgb)",
    )
    parser.add_argument(
        "--val-fraction", type=finite_float(0.0, inclusive=False, maximum=0.9), default=0.1,
        help="share of episodes held out (default 0.1)",
    )
    parser.add_argument("--max-frames", type=int_at_least(1), help="read only the first N frames")
    parser.add_argument("--seed", type=SEED, default=0)


def add_scoring_flags(parser: argparse.ArgumentParser) -> None:
    """How held-out frames are scored and reported."""
    parser.add_argument(
        "--min-context-frames", type=int_at_least(1), default=30,
        help="contexts (command x speed bin) with fewer held-out frames are skipped, and named (default 30)",
    )
    parser.add_argument("--shuffle-seed", type=SEED, default=0, help="seed of the within-context image shuffle")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_device_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1)")
    parser.add_argument("--threads", type=int_at_least(1), help="torch CPU threads (default: torch's)")
    parser.add_argument("--no-progress", action="store_true")


def run_epochs(args: argparse.Namespace) -> int | None:
    """``--epochs``, or its default where ``--max-minutes`` does not stop the run alone."""
    if args.epochs is None and args.max_minutes is None:
        return DEFAULT_EPOCHS
    return args.epochs


def check_data(path: Path) -> None:
    """Refuse a ``--data`` that is no dataset folder (named), before anything heavy starts."""
    from found_rl.dataset.shards import read_manifest

    if not path.is_dir():
        raise MissingPathError(f"--data {path}: no such folder")
    read_manifest(path)


def torch_device(args: argparse.Namespace) -> Any:
    """The ``--device`` (refused, named, when absent), with ``--threads`` applied."""
    import torch

    from found_rl.devices import resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    return resolve_device(args.device)


def load_served_checkpoint(path: Path, device: Any) -> tuple[Any, Any]:
    """``(checkpoint, scorer)``: a ``clip finetune`` checkpoint and ``vlm_server``'s scorer loaded from it."""
    from vlm_server.backends.clip import OpenClipScorer
    from vlm_server.clip_checkpoint import read_checkpoint

    with as_user_error():  # a file that is no CLIP checkpoint
        checkpoint = read_checkpoint(path)
        scorer = OpenClipScorer(
            checkpoint=str(path), device=str(device), context=checkpoint.context, image_input=checkpoint.image_input
        )
        scorer.load()
    return checkpoint, scorer


def checkpoint_frames(data: Path, checkpoint: Any, scorer: Any, args: argparse.Namespace) -> ClipFrames:
    """``--data``'s frames as the checkpoint's scorer reads them; a BEV size it was not trained on is refused."""
    from found_rl.clip.data import load_frames

    frames = load_frames(
        data, scorer.model_side, args.max_frames, show_progress=not args.no_progress,
        image_input=checkpoint.image_input,
    )
    if frames.input_size != scorer.image_hw[0]:
        raise UserError(
            f"--data {data}: BEVs are {frames.input_size} px, the checkpoint was trained on {scorer.image_hw[0]} px"
        )
    return frames
