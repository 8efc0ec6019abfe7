"""What an evaluated advisor was trained on, as far as its card and the disk can tell.

``vlm evaluate`` fits its baselines on the model's training samples and checks held-out-town
scores against its training towns. The model folder's ``found_rl_advisor.json`` (written by
``vlm finetune``) records the dataset path, the episode split and the training towns' network
hashes; the samples themselves are re-read from that path when it still exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from found_rl.dataset.metadata import SampleMeta, read_metadata
from found_rl.dataset.towns import networks_of
from found_rl.vlm.examples import ChatExample, split_episodes


@dataclass(frozen=True)
class TrainingData:
    """The model's training samples and towns, each None when unknown.

    Attributes:
        samples: the training episodes' samples (``SampleMeta`` or ``ChatExample``).
        description: where ``samples`` came from, for the report.
        networks: ``{network hash: town}`` of the training episodes.
    """

    samples: Sequence[SampleMeta | ChatExample] | None
    description: str
    networks: dict[str, str] | None


def training_data(
    card: dict[str, Any], data_dir: Path, examples: Sequence[ChatExample], eval_fraction: float, split_seed: int
) -> TrainingData:
    """The training data of the model whose advisor card is ``card``.

    Args:
        card: the model's ``found_rl_advisor.json`` ({} when it has none).
        data_dir: the evaluated dataset (``--data``); ``examples`` are all of its samples.
        eval_fraction, split_seed: the episode split the model was trained with.
    """
    recorded = card.get("training_towns")
    networks = dict(recorded) if isinstance(recorded, dict) and recorded else None  # {}: none recorded
    trained_on = card.get("data")
    if not trained_on:
        return TrainingData(None, "unknown (the model records no training data)", networks)
    if Path(trained_on).resolve() == data_dir.resolve():
        samples: Sequence[SampleMeta | ChatExample] = examples
        description = "the training episodes of --data"
    elif Path(trained_on).is_dir():
        samples = read_metadata(trained_on, flag="the model's training data")
        description = f"the training episodes of {trained_on}"
    else:
        return TrainingData(None, f"unknown (the model's training data {trained_on} is not on this machine)", networks)
    train_ids, _ = split_episodes((s.episode for s in samples), eval_fraction, split_seed)
    chosen = [s for s in samples if s.episode in train_ids]
    if networks is None and any(s.network is not None for s in chosen):
        networks = networks_of(chosen)
    return TrainingData(chosen, description, networks)
