"""Synthetic expert datasets: random blocky BEVs with varied commands, speeds and actions, no simulator.

For measuring the VLM fine-tuning pipeline (``found-rl bench vlm``) and for tests: the samples
have the layout of a real expert dataset, so every reader takes them, but teach nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from found_rl.dataset.shards import ShardWriter
from found_rl.dataset.text import chat_sample, clip_caption


def write_synthetic_dataset(
    directory: str | Path, episodes: int = 4, steps: int = 5, image_px: int = 192, seed: int = 0
) -> Path:
    """An expert dataset of ``episodes`` x ``steps`` chat samples with random blocky BEVs and varied actions.

    Blocky (8 px cells) images are varied yet quick to PNG-encode. Returns the folder.
    """
    rng = np.random.default_rng(seed)
    with ShardWriter(directory, samples_per_shard=7) as writer:
        for episode in range(episodes):
            for step in range(steps):
                acc, steer = float(rng.uniform(-1, 1)), float(rng.uniform(-0.5, 0.5))
                command, speed = int(rng.choice([1, 2, 3, 4])), float(rng.uniform(0, 8))
                target = (float(rng.uniform(2, 10)), float(rng.uniform(-3, 3)))
                cells = rng.integers(0, 256, (image_px // 8, image_px // 8, 3), dtype=np.uint8)
                writer.write(
                    bev_rgb=np.repeat(np.repeat(cells, 8, axis=0), 8, axis=1),
                    masks=np.zeros((15, 4, 4), dtype=np.uint8),
                    metadata={
                        "state": [0.0] * 10,
                        "command": command,
                        "speed_mps": speed,
                        "action": [acc, steer],
                        "executed_action": [acc, steer],
                        "target_ego": list(target),
                        "meta": {"route_id": "synthetic", "episode": episode, "step": step, "is_perturbed": False},
                    },
                    caption=clip_caption(command, speed, acc, steer),
                    chat=chat_sample(speed, target, command, acc, steer),
                )
    return Path(directory)
