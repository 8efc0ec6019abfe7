"""What an evaluated advisor was trained on, as far as its card and the disk can tell.

``vlm evaluate`` fits its baselines on the model's training samples and checks held-out-town
scores against its training towns. The model folder's ``found_rl_advisor.json`` (written by
``vlm finetune``) records the dataset path, the episode split and the training towns' network
hashes; the samples themselves are re-read from that path when it still exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from found_rl.dataset.metadata import SampleMeta, read_metadata
from found_rl.dataset.town_overlap import networks_of
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


def trained_on_folders(card: dict[str, Any]) -> list[str]:
    """The dataset folders the card's model was fine-tuned on (``data``: one path or a list)."""
    trained_on = card.get("data")
    if not trained_on:
        return []
    return [trained_on] if isinstance(trained_on, str) else [str(folder) for folder in trained_on]


def training_data(
    card: dict[str, Any], data_dirs: Sequence[Path], examples: Sequence[ChatExample], eval_fraction: float,
    split_seed: int,
) -> TrainingData:
    """The training data of the model whose advisor card is ``card``.

    Args:
        card: the model's ``found_rl_advisor.json`` ({} when it has none).
        data_dirs: the evaluated datasets (``--data``); ``examples`` are all of their samples,
            episodes numbered as one set (:func:`~found_rl.vlm.examples.load_datasets`).
        eval_fraction, split_seed: the episode split the model was trained with.
    """
    recorded = card.get("training_towns")
    networks = dict(recorded) if isinstance(recorded, dict) and recorded else None  # {}: none recorded
    trained_on = trained_on_folders(card)
    if not trained_on:
        return TrainingData(None, "unknown (the model records no training data)", networks)
    named = " ".join(trained_on)
    if [Path(folder).resolve() for folder in trained_on] == [Path(folder).resolve() for folder in data_dirs]:
        samples: Sequence[SampleMeta | ChatExample] = examples
        description = "the training episodes of --data"
    elif all(Path(folder).is_dir() for folder in trained_on):
        samples = _read_as_one(trained_on)
        description = f"the training episodes of {named}"
    else:
        return TrainingData(None, f"unknown (the model's training data {named} is not on this machine)", networks)
    train_ids, _ = split_episodes((s.episode for s in samples), eval_fraction, split_seed)
    chosen = [s for s in samples if s.episode in train_ids]
    if networks is None and any(s.network is not None for s in chosen):
        networks = networks_of(chosen)
    return TrainingData(chosen, description, networks)


def _read_as_one(folders: Sequence[str]) -> list[SampleMeta]:
    """The folders' sample metadata, episodes numbered as one set, as fine-tuning read them."""
    samples: list[SampleMeta] = []
    offset = 0
    for folder in folders:
        part = read_metadata(folder, flag="the model's training data")
        samples.extend(replace(sample, episode=sample.episode + offset) for sample in part)
        offset += max((sample.episode for sample in part), default=-1) + 1
    return samples
