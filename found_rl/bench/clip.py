"""``found-rl bench clip``: images/s of the served CLIP scorer at batch 1 and 32, side by side.

It times ``OpenClipScorer.score_batch`` exactly as the server's model thread calls it: 192 px
RGB BEVs in, area resize to the model's side, normalisation, image tower, the item's 30
anchors, margins and running-statistics bonus out (the HTTP layer is ``bench server``'s). With
``--checkpoint`` the fine-tuned model is timed; without, a random-weight model of ``--model``
(speed does not depend on the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from found_rl.argtypes import finite_float, int_at_least
from found_rl.errors import as_user_error

BATCH_SIZES = (1, 32)


def _images_per_second(scorer: Any, items: list[Any], min_seconds: float) -> float:
    for _ in range(2):
        scorer.score_batch(items)
    calls, start = 0, time.perf_counter()
    while True:
        scorer.score_batch(items)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and calls >= 3:
            return calls * len(items) / elapsed


def _random_checkpoint(model_name: str, directory: Path) -> Path:
    import torch

    from found_rl.clip.model import create_clip_model, default_image_size
    from vlm_server.clip_checkpoint import ClipCheckpoint, anchors_sha256

    torch.manual_seed(0)
    clip = create_clip_model(model_name, None, default_image_size(model_name))
    path = directory / "random.pt"
    checkpoint = ClipCheckpoint(
        clip.model_name, clip.model_cfg, clip.image_size, 192, clip.mean, clip.std, anchors_sha256(),
        clip.model.state_dict(),
    )
    torch.save(checkpoint.to_dict(), path)
    return path


def measure(checkpoint: Path, device: str, min_seconds: float) -> dict[str, Any]:
    import numpy as np

    from vlm_server.backends.base import ClipItem
    from vlm_server.backends.clip import OpenClipScorer

    with as_user_error():  # --checkpoint is no CLIP checkpoint
        scorer = OpenClipScorer(checkpoint=str(checkpoint), device=device)
        scorer.load()
    side = scorer.image_hw[0]
    rng = np.random.default_rng(0)
    rates = {}
    for batch in BATCH_SIZES:
        items = [
            ClipItem(str(i), rng.integers(0, 256, (side, side, 3), dtype=np.uint8), 1 + i % 6, 3.0, (0.4, 0.0))
            for i in range(batch)
        ]
        rates[batch] = _images_per_second(scorer, items, min_seconds)
    return {"model": scorer.model_name, "input_px": side, "model_px": scorer.model_side, "rates": rates}


def run(args: argparse.Namespace) -> int:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or _random_checkpoint(args.model, Path(tmp))
        result = measure(checkpoint, args.device, args.seconds)
    rates = result["rates"]
    report = {
        "checkpoint": str(args.checkpoint) if args.checkpoint else f"random {args.model}",
        "model": result["model"],
        "input_px": result["input_px"],
        "model_px": result["model_px"],
        "device": args.device,
        "images_per_s_b1": rates[1],
        "images_per_s_b32": rates[32],
        "b32_vs_b1": rates[32] / rates[1],
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.table import Table

    from found_rl.tables import print_table

    table = Table(
        title=(
            f"served CLIP scorer: {report['model']} ({report['input_px']} px in, {report['model_px']} px model) "
            f"on {args.device}, {report['torch_threads']} torch threads, load {report['load_average_1min']:.1f}"
        )
    )
    for column in ("batch", "images/s", "ms per batch", "vs batch 1"):
        table.add_column(column)
    for batch in BATCH_SIZES:
        rate = rates[batch]
        table.add_row(str(batch), f"{rate:,.1f}", f"{1000 * batch / rate:,.1f}", f"{rate / rates[1]:.2f}×")
    print_table(table)
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", type=Path, help="`clip finetune` checkpoint (default: random --model weights)")
    parser.add_argument("--model", default="found-rl-vit-tiny", help="architecture timed without --checkpoint")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    parser.add_argument("--threads", type=int_at_least(0), default=0, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--seconds", type=finite_float(0, inclusive=False), default=2.0, help="minimum timing window per batch size"
    )
    parser.set_defaults(run=run)
