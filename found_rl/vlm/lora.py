"""LoRA adapters on the language model of a VLM (peft), and merging them back for serving.

Targets are matched by leaf name *inside the language model only*: vision towers reuse names
such as ``q_proj`` or ``gate_proj`` (CLIP, Qwen2.5-VL's ViT), and adapting them by accident
changes what the BEV looks like to the model for no gain in driving knowledge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from found_rl.errors import UserError

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LANGUAGE_MODEL_MARKERS = ("language_model", "text_model", "llm")


@dataclass(frozen=True)
class LoraSettings:
    """Attributes: rank, alpha (scale = alpha / rank), dropout, and target leaf names."""

    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    targets: tuple[str, ...] = DEFAULT_TARGETS

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise UserError(f"--lora-rank must be >= 1, got {self.rank}")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"--lora-dropout must be in [0, 1), got {self.dropout}")
        if not self.targets:
            raise UserError("--lora-targets must name at least one module, e.g. q_proj,v_proj")


def language_model_linears(model: torch.nn.Module) -> dict[str, str]:
    """``{qualified name: leaf name}`` of the ``nn.Linear`` layers inside the language model."""
    found = {}
    for name, module in model.named_modules():
        parts = name.split(".")
        if isinstance(module, torch.nn.Linear) and any(marker in parts for marker in LANGUAGE_MODEL_MARKERS):
            found[name] = parts[-1]
    return found


def target_modules(model: torch.nn.Module, targets: Sequence[str], model_name: str) -> list[str]:
    """Qualified names of the language-model linears whose leaf name is in ``targets``.

    Raises:
        ValueError: a target matches no language-model linear (naming the ones that exist).
    """
    linears = language_model_linears(model)
    if not linears:
        raise UserError(
            f"model {model_name}: found no linear layers under a language-model module "
            f"({', '.join(LANGUAGE_MODEL_MARKERS)}); fine-tune it with --full instead"
        )
    available = sorted(set(linears.values()))
    unknown = [t for t in targets if t not in available]
    if unknown:
        raise UserError(
            f"--lora-targets: {', '.join(unknown)} not in the language model of {model_name}; "
            f"its linear layers are: {', '.join(available)}"
        )
    return [name for name, leaf in linears.items() if leaf in targets]


def add_lora(model: torch.nn.Module, settings: LoraSettings, model_name: str) -> Any:
    """``model`` wrapped by peft with fresh adapters; only the adapters are trainable."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=target_modules(model, settings.targets, model_name),
        bias="none",
    )
    return get_peft_model(model, config)


def merged(model: Any) -> torch.nn.Module:
    """A plain transformers model with the adapters folded into its weights (serves without peft)."""
    return model.merge_and_unload()
