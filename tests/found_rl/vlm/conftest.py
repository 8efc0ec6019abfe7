"""Fixtures: a tiny random LLaVA checkpoint on disk and small synthetic expert datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")  # optional extra: found-rl[hf]


def write_dataset(directory: Path, episodes: int = 4, steps: int = 5, image_px: int = 192, seed: int = 0) -> Path:
    """An expert dataset of ``episodes`` x ``steps`` samples with random BEVs and varied actions."""
    from found_rl.dataset import ShardWriter, chat_sample, clip_caption

    rng = np.random.default_rng(seed)
    with ShardWriter(directory, samples_per_shard=7) as writer:
        for episode in range(episodes):
            for step in range(steps):
                acc, steer = float(rng.uniform(-1, 1)), float(rng.uniform(-0.5, 0.5))
                command, speed = int(rng.choice([1, 2, 3, 4])), float(rng.uniform(0, 8))
                target = (float(rng.uniform(2, 10)), float(rng.uniform(-3, 3)))
                writer.write(
                    bev_rgb=bev(rng, image_px),
                    masks=np.zeros((15, 4, 4), dtype=np.uint8),
                    metadata={
                        "state": [0.0] * 10,
                        "command": command,
                        "speed_mps": speed,
                        "action": [acc, steer],
                        "executed_action": [acc, steer],
                        "target_ego": list(target),
                        "meta": {"route_id": "r", "episode": episode, "step": step, "is_perturbed": False},
                    },
                    caption=clip_caption(command, speed, acc, steer),
                    chat=chat_sample(speed, target, command, acc, steer),
                )
    return directory


def bev(rng: np.random.Generator, image_px: int) -> np.ndarray:
    """A blocky random image (8 px cells): varied, yet quick to PNG-encode."""
    cells = rng.integers(0, 256, (image_px // 8, image_px // 8, 3), dtype=np.uint8)
    return np.repeat(np.repeat(cells, 8, axis=0), 8, axis=1)


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory) -> Path:
    """A saved tiny LLaVA (character tokenizer, 32 px vision tower; see ``found_rl.vlm.tiny``)."""
    from found_rl.vlm.tiny import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm") / "model")


@pytest.fixture(scope="session")
def expert_data(tmp_path_factory) -> Path:
    """4 episodes x 5 steps of synthetic expert chat samples (192 px BEVs)."""
    return write_dataset(tmp_path_factory.mktemp("expert") / "data")


@pytest.fixture
def dataset_writer():
    """``write_dataset(directory, episodes=4, steps=5, image_px=192, seed=0)``."""
    return write_dataset
