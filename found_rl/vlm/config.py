"""Settings of one VLM fine-tuning run, and the device and precision they resolve to."""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import torch

from found_rl.errors import UserError
from found_rl.vlm.lora import LoraSettings

METHODS = ("lora", "full")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
RESUME_KEYS = (
    "data", "model", "method", "batch_size", "grad_accum", "learning_rate", "weight_decay",
    "lora", "freeze_vision", "eval_fraction", "split_seed", "seed", "aux_action_weight", "vision_warmup_steps",
)
"""Settings a resumed run must share with the run it continues (``steps`` may grow); a run
recorded before a setting existed reads as that setting's default."""


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
        aux_action_weight: weight W of the auxiliary action-classification loss on the image
            tokens (``found_rl.vlm.aux_action``): loss = answer loss + W x cross-entropy (0: off).
        vision_warmup_steps: the first N steps train the auxiliary loss alone (the decoder is
            not run, so the language weights are not touched); the language weights then warm
            up their learning rate over the schedule's warm-up length. Needs W > 0.
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
    aux_action_weight: float = 0.0
    vision_warmup_steps: int = 0

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
        self._check_aux_action()

    def _check_aux_action(self) -> None:
        weight, warmup = self.aux_action_weight, self.vision_warmup_steps
        if not (math.isfinite(weight) and weight >= 0):
            raise UserError(f"--aux-action-weight must be a finite number >= 0, got {weight}")
        if warmup < 0:
            raise UserError(f"--vision-warmup-steps must be >= 0, got {warmup}")
        if warmup > 0 and weight == 0:
            raise UserError(
                f"--vision-warmup-steps {warmup}: only the auxiliary action loss trains during the warm-up, "
                "and --aux-action-weight is 0; give --aux-action-weight > 0"
            )
        if weight > 0 and self.freeze_vision:
            raise UserError(
                "--aux-action-weight: the auxiliary loss trains the vision tower, which --freeze-vision keeps "
                "frozen; drop one of the two"
            )
        if weight > 0 and self.method == "lora":
            raise UserError(
                "--aux-action-weight: LoRA adapts the language model only and leaves the vision tower frozen, "
                "so the auxiliary loss would train nothing but its own head; fine-tune with --full"
            )

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


def resume_changes(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The ``RESUME_KEYS`` whose values differ between two ``config.json`` records.

    A key missing from ``previous`` (a run recorded before the setting existed) takes the
    setting's default, so such a run resumes under the default.
    """
    defaults = {f.name: f.default for f in fields(FinetuneConfig) if f.default is not MISSING}
    return [key for key in RESUME_KEYS if previous.get(key, defaults.get(key)) != current.get(key)]


def config_json(config: FinetuneConfig) -> dict[str, Any]:
    """``config`` as plain JSON data (what ``config.json`` holds and ``--resume`` compares)."""
    data = asdict(config)
    data["lora"]["targets"] = list(config.lora.targets)
    if not isinstance(config.data, str):
        data["data"] = list(config.data)
    return data
