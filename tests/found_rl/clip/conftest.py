"""Synthetic expert datasets and a micro CLIP config for the CLIP tests (no simulator, no downloads)."""

from __future__ import annotations

import numpy as np
import pytest

from found_rl.clip import model as clip_model
from found_rl.dataset import ShardWriter, clip_caption

MICRO = "test-micro"
MICRO_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 16, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 36, "vocab_size": 49408, "width": 16, "heads": 1, "layers": 1},
}
# (acc, steer) of a few actions far apart in the 30-way grid
ACTIONS = [(-0.8, 0.0), (0.9, 0.0), (0.4, 0.5), (0.0, -0.5), (0.1, 0.0), (-0.3, 0.4)]


@pytest.fixture
def micro_model(monkeypatch) -> str:
    monkeypatch.setitem(clip_model.SMALL_CONFIGS, MICRO, MICRO_CONFIG)
    return MICRO


def write_dataset(
    directory, episodes: int, frames_per_episode: int, side: int = 32, seed: int = 0, per_shard: int = 50
) -> list[int]:
    """Frames whose image is a flat colour that names the action (learnable); returns action indices."""
    rng = np.random.default_rng(seed)
    chosen = []
    with ShardWriter(directory, samples_per_shard=per_shard) as writer:
        for episode in range(episodes):
            for step in range(frames_per_episode):
                index = int(rng.integers(len(ACTIONS)))
                acc, steer = ACTIONS[index]
                bev = np.full((side, side, 3), 0, np.uint8)
                bev[..., index % 3] = 60 + 60 * (index // 3)
                bev += rng.integers(0, 8, bev.shape, dtype=np.uint8)
                writer.write(
                    bev,
                    np.zeros((1, side, side), np.uint8),
                    {"command": 4, "speed_mps": 3.0, "meta": {"episode": episode, "step": step}},
                    clip_caption(4, 3.0, acc, steer),
                    {"conversations": []},
                )
                chosen.append(index)
    return chosen
