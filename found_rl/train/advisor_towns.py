"""The towns a run's advisor was trained on, as far as its model folder tells.

An evaluation town is unseen only when neither the policy's training scenarios nor the data the
advisor learned from drove its roads: a VLM fine-tuned on expert data from a town has seen that
town, and a policy it guides has learned from it at one remove. A spawned ``hf`` advisor's model
folder holds its advisor card (``found_rl_advisor.json``, written by ``vlm finetune``), which
records the road networks of its training episodes (``training_towns``) and its datasets
(``data``, whose manifests list their towns). The privileged expert learned from no town; a
served advisor behind a URL cannot be asked, so its towns are unknown, and so are networks
recorded under another identity definition (:mod:`found_rl.maps.identity`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from found_rl.maps.identity import is_current
from found_rl.train.config import AdvisorConfig

HF_BACKENDS = ("hf", "vlm_server.backends.hf_vlm:HuggingFaceAdvisor")
NO_TOWN_BACKENDS = ("expert", "found_rl.advisors:ExpertAdvisor", "fixed-cost")
"""Advisors that learned from no town: the privileged expert (noisy or not) and a timing stub."""


@dataclass(frozen=True)
class AdvisorTowns:
    """The road networks an advisor was trained on.

    Attributes:
        networks: ``{network identity: town name}``; empty when it learned from no town, ``None``
            when that cannot be told.
        description: one line for the run folder and the report.
    """

    networks: dict[str, str] | None
    description: str

    @property
    def is_known(self) -> bool:
        return self.networks is not None


def advisor_towns(advisor: AdvisorConfig) -> AdvisorTowns:
    """What the advisor of a run config was trained on (see the module docstring)."""
    if not advisor.enabled:
        return AdvisorTowns({}, "no advisor")
    if advisor.urls:
        return AdvisorTowns(None, f"unknown: a served advisor at {advisor.urls[0]} cannot say what it was trained on")
    if advisor.spawn in NO_TOWN_BACKENDS:
        return AdvisorTowns({}, f"none: the {advisor.spawn} advisor learned from no town")
    model = advisor.spawn_options.get("model_path") or advisor.spawn_options.get("model")
    if advisor.spawn not in HF_BACKENDS or not isinstance(model, str):
        return AdvisorTowns(None, f"unknown: the {advisor.spawn} advisor records no training towns")
    return model_towns(Path(model))


def model_towns(model: Path) -> AdvisorTowns:
    """The training towns a model folder's advisor card records (its datasets' manifests as a fallback)."""
    from found_rl.vlm.scratch import INIT_MARK
    from vlm_server.backends.hf_checks import ADVISOR_CARD

    card_path = model / ADVISOR_CARD
    if not card_path.is_file():
        return AdvisorTowns(None, f"unknown: {model} has no {ADVISOR_CARD} (not a model found-rl trained)")
    try:
        card = json.loads(card_path.read_text())
    except ValueError:
        card = None
    if not isinstance(card, dict):
        return AdvisorTowns(None, f"unknown: {card_path} is not a JSON object")
    if card.get("trained_by") == INIT_MARK:
        return AdvisorTowns({}, f"none: {model} was built by `vlm init` and never trained")
    recorded = card.get("training_towns")
    if isinstance(recorded, dict) and recorded:
        return _checked({str(k): str(v) for k, v in recorded.items()}, f"{card_path} (training_towns)")
    return _dataset_towns(card.get("data"), model)


def _dataset_towns(data: Any, model: Path) -> AdvisorTowns:
    """Every town the model's datasets list in their manifests (training and held-out episodes)."""
    from found_rl.dataset.shards import read_manifest

    folders = [data] if isinstance(data, str) else list(data) if isinstance(data, list) else []
    if not folders:
        return AdvisorTowns(None, f"unknown: the advisor card of {model} names no training data")
    networks: dict[str, str] = {}
    for folder in folders:
        try:
            towns = read_manifest(folder)["towns"]
        except (OSError, ValueError):
            return AdvisorTowns(None, f"unknown: the model's training data {folder} is not readable here")
        if not towns:
            return AdvisorTowns(None, f"unknown: the model's training data {folder} records no towns")
        networks.update({str(town["network"]): str(town["name"]) for town in towns if town.get("network")})
    return _checked(networks, " ".join(map(str, folders)))


def _checked(networks: dict[str, str], source: str) -> AdvisorTowns:
    if not all(is_current(network) for network in networks):
        return AdvisorTowns(None, f"unknown: {source} records its towns under an older network identity "
                                  "(collect the data again to compare towns by their roads)")
    towns = ", ".join(sorted(set(networks.values())))
    return AdvisorTowns(networks, f"{len(networks)} town(s) from {source}: {towns}")
