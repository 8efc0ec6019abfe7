"""Fixtures for the advisor server tests: config and image factories, tiny open_clip and LLaVA models.

Helpers are fixtures (not imports) so the tests work under any pytest import mode; the tiny
LLaVA is the one all tests share (``tests/tiny_vlm.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vlm_server.config import BackendConfig, BatchingConfig, ServerConfig

TINY_CLIP_NAME = "found-rl-tiny-test-clip"
TINY_CLIP_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {
        "image_size": 32,
        "layers": 1,
        "width": 32,
        "patch_size": 16,
        "head_width": 16,
    },
    "text_cfg": {
        "context_length": 32,
        "vocab_size": 49408,
        "width": 32,
        "heads": 2,
        "layers": 1,
    },
}


def _server_config(**overrides) -> ServerConfig:
    batching = overrides.pop("batching", {"max_batch_size": 8, "max_wait_ms": 2.0})
    options = overrides.pop("options", {"base_ms": 1.0, "per_item_ms": 0.0})
    data = {
        "advisor": BackendConfig(
            spec="fixed-cost", options=options, batching=BatchingConfig(**batching)
        )
    }
    data.update(overrides)
    return ServerConfig(**data)


def _rgb(height: int = 8, width: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(
        0, 256, size=(height, width, 3), dtype=np.uint8
    )


@pytest.fixture
def server_config():
    """Factory: a loopback ``ServerConfig`` with a fast fixed-cost advisor unless overridden."""
    return _server_config


@pytest.fixture
def rgb():
    """Factory: a random ``[H, W, 3]`` uint8 image."""
    return _rgb


@pytest.fixture(scope="session")
def tiny_clip_config_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("open_clip") / f"{TINY_CLIP_NAME}.json"
    path.write_text(json.dumps(TINY_CLIP_CONFIG))
    return path


@pytest.fixture(scope="session")
def tiny_clip_scorer(tiny_clip_config_path):
    """A loaded ``OpenClipScorer`` with random weights at 64 px (shared: loading is the slow part)."""
    import torch

    from vlm_server.backends.clip import OpenClipScorer

    torch.manual_seed(0)
    scorer = OpenClipScorer(
        model_name=TINY_CLIP_NAME,
        pretrained=None,
        model_config_path=str(tiny_clip_config_path),
        image_size=64,
    )
    scorer.load()
    return scorer


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory):
    """``(processor, model)``: the tests' tiny random LLaVA (``tests/tiny_vlm.py``: character
    tokenizer, 32 px images), loaded from the folder it was saved to, as the server loads one."""
    from tests.tiny_vlm import build_tiny_vlm, load_tiny_vlm

    return load_tiny_vlm(build_tiny_vlm(tmp_path_factory.mktemp("tiny-llava") / "model"))
