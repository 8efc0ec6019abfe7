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
