"""Fixtures: a tiny random LLaVA checkpoint on disk and small synthetic expert datasets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import require

require("transformers", "peft")  # optional extra: found-rl[hf]


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory) -> Path:
    """A saved tiny LLaVA (character tokenizer, 32 px vision tower; see ``tests/tiny_vlm.py``)."""
    from tests.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm") / "model")


@pytest.fixture(scope="session")
def expert_data(tmp_path_factory) -> Path:
    """4 episodes x 5 steps of synthetic expert chat samples (192 px BEVs)."""
    from found_rl.dataset.synthetic import write_synthetic_dataset

    return write_synthetic_dataset(tmp_path_factory.mktemp("expert") / "data")


@pytest.fixture
def dataset_writer():
    """``write_synthetic_dataset(directory, episodes=4, steps=5, image_px=192, seed=0)``."""
    from found_rl.dataset.synthetic import write_synthetic_dataset

    return write_synthetic_dataset


@pytest.fixture(scope="session")
def image_decides_data(tmp_path_factory) -> Path:
    """4 episodes x 6 steps where the image alone decides the expert's class.

    Every sample has the same command, speed and route target; a red BEV goes with full throttle
    (class 10, accelerating fast and straight), a blue one with full brake (class 0, braking hard).
    """
    import numpy as np

    from found_rl.dataset import ShardWriter, chat_sample, clip_caption

    command, speed_mps, target = 4, 5.0, (8.0, 0.0)
    rng = np.random.default_rng(0)
    with ShardWriter(tmp_path_factory.mktemp("image-decides") / "data", samples_per_shard=8) as writer:
        for episode in range(4):
            for step in range(6):
                is_red = bool(rng.integers(2))
                acc = 0.9 if is_red else -0.9
                bev = np.zeros((192, 192, 3), dtype=np.uint8)
                bev[..., 0 if is_red else 2] = 255
                bev[rng.integers(0, 192, 200), rng.integers(0, 192, 200)] = 128  # not two identical images
                writer.write(
                    bev_rgb=bev,
                    masks=np.zeros((15, 4, 4), dtype=np.uint8),
                    metadata={
                        "state": [0.0] * 10,
                        "command": command,
                        "speed_mps": speed_mps,
                        "action": [acc, 0.0],
                        "executed_action": [acc, 0.0],
                        "target_ego": list(target),
                        "meta": {"route_id": "synthetic", "episode": episode, "step": step, "is_perturbed": False},
                    },
                    caption=clip_caption(command, speed_mps, acc, 0.0),
                    chat=chat_sample(speed_mps, target, command, acc, 0.0),
                )
        directory = writer.directory
    return Path(directory)
