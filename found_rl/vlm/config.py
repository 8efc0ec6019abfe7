"""Settings of one VLM fine-tuning run, and the device and precision they resolve to."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from found_rl.errors import UserError
from found_rl.vlm.lora import LoraSettings

METHODS = ("lora", "full")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
RESUME_KEYS = (
    "data", "model", "method", "batch_size", "grad_accum", "learning_rate", "weight_decay",
    "lora", "freeze_vision", "eval_fraction", "split_seed", "seed",
)
"""Settings a resumed run must share with the run it continues (``steps`` may grow)."""


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything one fine-tuning run needs.

    Attributes:
        data: expert dataset folder (``found-rl expert collect --out``), or several folders
            trained on as one set (DAgger rounds); one folder is a plain string, as runs record it.
        model: local image-text-to-text checkpoint folder.
        out: run folder.
        method: ``lora`` (adapters on the language model, merged at the end) or ``full``.
        steps: optimiser steps; None derives them from ``epochs``.
        max_minutes: stop after this much training time (the run's total: a resumed run counts
            the time already trained), with a final checkpoint and the exported model; the
            warm-up and cosine decay then run over whichever comes first, the steps or the time.
        epochs: passes over the training episodes when ``steps`` is None.
        batch_size: samples per micro-batch; ``grad_accum`` micro-batches make one step.
        learning_rate: peak rate (None: 2e-4 for LoRA, 1e-5 for full), linear warm-up then cosine.
        warmup_fraction: share of the steps spent warming up.
        max_grad_norm: gradient clipping (0 disables).
        lora: adapter settings (``method="lora"``).
        freeze_vision: full fine-tuning leaves the vision tower as it is.
        eval_fraction, split_seed: the held-out episodes (shared with ``vlm evaluate``).
        eval_every, eval_samples: held-out answer loss every N steps on up to M samples (0: never).
        save_every: checkpoint every N steps (and always at the end).
        log_every: TensorBoard and progress-bar interval, steps.
        device: ``auto`` (CUDA if present), ``cpu``, ``cuda``, ``cuda:1``...
        precision: ``auto`` (bf16 on a GPU that has it, else fp16; fp32 on CPU) or explicit.
        gradient_checkpointing: trade compute for activation memory.
    """

    data: str | tuple[str, ...]
    model: str
    out: str
    method: str = "lora"
    steps: int | None = None
    max_minutes: float | None = None
    epochs: float = 1.0
    batch_size: int = 4
    grad_accum: int = 1
    learning_rate: float | None = None
    weight_decay: float = 0.0
    warmup_fraction: float = 0.03
    max_grad_norm: float = 1.0
    lora: LoraSettings = field(default_factory=LoraSettings)
    freeze_vision: bool = False
    eval_fraction: float = 0.1
    split_seed: int = 0
    eval_every: int = 200
    eval_samples: int = 64
    save_every: int = 200
    log_every: int = 10
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise UserError(f"method must be one of {METHODS}, got {self.method!r}")
        if isinstance(self.data, list | tuple):
            folders = tuple(str(folder) for folder in self.data)
            object.__setattr__(self, "data", folders[0] if len(folders) == 1 else folders)
        if self.precision not in PRECISIONS:
            raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        for name, minimum in (("batch_size", 1), ("grad_accum", 1), ("save_every", 1), ("log_every", 1),
                              ("eval_every", 0), ("eval_samples", 1)):
            if getattr(self, name) < minimum:
                raise UserError(f"--{name.replace('_', '-')} must be >= {minimum}, got {getattr(self, name)}")
        if self.steps is not None and self.steps < 1:
            raise UserError(f"--steps must be >= 1, got {self.steps}")
        if self.max_minutes is not None and not (math.isfinite(self.max_minutes) and self.max_minutes > 0):
            raise UserError(f"--max-minutes must be a number of minutes > 0, got {self.max_minutes}")
        if not (math.isfinite(self.epochs) and self.epochs > 0):
            raise UserError(f"--epochs must be > 0, got {self.epochs}")
        if self.learning_rate is None:
            object.__setattr__(self, "learning_rate", 2e-4 if self.method == "lora" else 1e-5)
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise UserError(f"--warmup-fraction must be in [0, 1), got {self.warmup_fraction}")


    @property
    def data_folders(self) -> tuple[str, ...]:
        """``data`` as a tuple of folders, one or several."""
        return (self.data,) if isinstance(self.data, str) else tuple(self.data)


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for plain fp32."""
    if device.type != "cuda":
        if precision in ("bf16", "fp16"):
            raise UserError(f"--precision {precision}: mixed precision needs a CUDA device; use fp32 on {device}")
        return None
    if precision == "fp32":
        return None
    if precision == "bf16" or (precision == "auto" and torch.cuda.is_bf16_supported()):
        return torch.bfloat16
    return torch.float16


def config_json(config: FinetuneConfig) -> dict[str, Any]:
    """``config`` as plain JSON data (what ``config.json`` holds and ``--resume`` compares)."""
    data = asdict(config)
    data["lora"]["targets"] = list(config.lora.targets)
    if not isinstance(config.data, str):
        data["data"] = list(config.data)
    return data
