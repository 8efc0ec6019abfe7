"""Tiny expert datasets whose samples record their town (``meta["town"]``, ``meta["network"]``).

The collection side does not write these fields yet; these datasets stand in for its output,
with every sample's command, speed, route target and expert action chosen by the test, so a
baseline's or a breakdown's answer can be worked out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from found_rl.dataset import ShardWriter, chat_sample, clip_caption


class Row(NamedTuple):
    """One sample: its episode and town, and what the prompt and the expert say."""

    episode: int
    town: str | None
    network: str | None
    command: int = 4
    speed_mps: float = 5.0
    target_ego: tuple[float, float] = (8.0, 0.0)
    action: tuple[float, float] = (0.5, 0.0)


def write_town_dataset(directory: str | Path, rows: Sequence[Row], image_px: int = 192, seed: int = 0) -> Path:
    """Write ``rows`` (in order) as an ``expert collect`` dataset with random blocky BEVs; returns the folder.

    A row whose town and network are both None is written without them, as older datasets are.
    """
    rng = np.random.default_rng(seed)
    steps: dict[int, int] = {}
    with ShardWriter(directory, samples_per_shard=8) as writer:
        for row in rows:
            step = steps.get(row.episode, 0)
            steps[row.episode] = step + 1
            meta = {"route_id": "synthetic", "episode": row.episode, "step": step, "is_perturbed": False}
            if row.town is not None:
                meta["town"] = row.town
            if row.network is not None:
                meta["network"] = row.network
            cells = rng.integers(0, 256, (image_px // 8, image_px // 8, 3), dtype=np.uint8)
            acc, steer = row.action
            writer.write(
                bev_rgb=np.repeat(np.repeat(cells, 8, axis=0), 8, axis=1),
                masks=np.zeros((15, 4, 4), dtype=np.uint8),
                metadata={
                    "state": [0.0] * 10,
                    "command": row.command,
                    "speed_mps": row.speed_mps,
                    "action": [acc, steer],
                    "executed_action": [acc, steer],
                    "target_ego": list(row.target_ego),
                    "meta": meta,
                },
                caption=clip_caption(row.command, row.speed_mps, acc, steer),
                chat=chat_sample(row.speed_mps, row.target_ego, row.command, acc, steer),
            )
    return Path(directory)
