"""open_clip scorer: conditional contrastive action alignment bonus of METHOD §3.

The 720 text anchors are encoded once at load. Per item: softmax over the 30 anchors of the
item's (command, speed bin) with the model's logit scale, margin of the executed action's
anchor over the best non-neighbour, then normalisation by running statistics shared by all
clients (updated one sample at a time, the sample included, then used for its own bonus).

A ``logit-adjusted`` checkpoint (``found-rl clip finetune --objective logit-adjusted``) was
trained so that this very softmax is ∝ p(a | image, context) / p(a | context): the bonus then
scores the image's evidence beyond the caption prior, with METHOD §3's formula unchanged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vlm_server.anchors import (
    COMMAND_PHRASES,
    LAT_PHRASES,
    LON_PHRASES,
    SPEED_PHRASES,
    action_index,
    alignment_margin,
    anchor_captions,
    command_index,
    normalised_bonus,
    speed_bin,
)
from vlm_server.backends.base import ClipItem, ClipResult
from vlm_server.clip_checkpoint import check_compatible, load_model, read_checkpoint, text_tokenizer
from vlm_server.clip_inputs import DEFAULT_CONTEXT, DEFAULT_IMAGE_INPUT, context_named, image_input_named
from vlm_server.clip_preprocess import OPENAI_MEAN, OPENAI_STD, normalise, resize_area
from vlm_server.errors import MissingPathError, UsageError
from vlm_server.running_stats import RunningMoments

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "ViT-B-16"
DEFAULT_PRETRAINED = "laion2b_s34b_b88k"
DEFAULT_IMAGE_SIZE = 192  # the RGB BEV side (METHOD §3)
TEXT_CHUNK = 120


class OpenClipScorer:
    """CLIP alignment bonus from an open_clip model.

    Args:
        model_name: open_clip architecture, e.g. ``"ViT-B-16"`` (the default without a
            checkpoint). With ``checkpoint`` it is optional and, when given, must match.
        pretrained: a local open_clip weights file or an open_clip pretrained tag; None = random
            weights (tests only: the bonus is then meaningless). Ignored with ``checkpoint``.
        checkpoint: a ``found-rl clip finetune`` checkpoint; it brings its own architecture,
            weights, image sizes and normalisation, and is refused (named) when its
            architecture, image size or caption anchors differ from what is asked here.
        model_config_path: JSON model config to register first (custom architectures).
        image_size: side in px of the images clients send; requests must send exactly this
            size. Default 192 (the RGB BEV, METHOD §3) or, with a checkpoint, the BEV size it
            was trained from; the server resizes to the model's own side as in training.
        device: torch device string.
        precision: ``"fp32"``, ``"fp16"`` or ``"bf16"`` (GPU).
        context: the prior's context definition the scores are meant for
            (``vlm_server.clip_inputs.CONTEXTS``); a checkpoint trained with another is refused.
        image_input: what the clients send (``IMAGE_INPUTS``): ``"rgb"``, the BEV of o_t, or
            ``"rgb-history"``, which also needs the past frames in each item's ``history``; a
            checkpoint trained on another input is refused, naming both.
    """

    def __init__(
        self,
        model_name: str | None = None,
        pretrained: str | None = DEFAULT_PRETRAINED,
        checkpoint: str | None = None,
        model_config_path: str | None = None,
        image_size: int | None = None,
        device: str = "cpu",
        precision: str = "fp32",
        context: str = DEFAULT_CONTEXT,
        image_input: str = DEFAULT_IMAGE_INPUT,
    ) -> None:
        self.context = context_named(context, "context").name
        self.image_input = image_input_named(image_input, "image_input")
        if checkpoint is None and self.image_input.frames > 1:
            raise UsageError(
                f"image_input={image_input!r} needs a checkpoint fine-tuned on it; "
                "an open_clip model reads one RGB image"
            )
        if image_size is not None and image_size < 8:
            raise UsageError(f"image_size must be >= 8 px, got {image_size}")
        if model_config_path is not None and not Path(model_config_path).is_file():
            raise MissingPathError(f"model_config_path {model_config_path} does not exist")
        if checkpoint is not None:
            if not Path(checkpoint).is_file():
                raise MissingPathError(f"checkpoint {checkpoint} does not exist")
            if pretrained not in (None, DEFAULT_PRETRAINED):
                raise UsageError(
                    f"give checkpoint or pretrained, not both (checkpoint={checkpoint}, pretrained={pretrained!r})"
                )
        if precision not in ("fp32", "fp16", "bf16"):
            raise UsageError(f"precision must be fp32, fp16 or bf16, got {precision!r}")
        self.checkpoint = checkpoint
        self.requested_model_name = model_name
        self.model_name = model_name or DEFAULT_MODEL_NAME
        self.pretrained = pretrained
        self.model_config_path = model_config_path
        self.requested_image_size = image_size
        side = image_size or (None if checkpoint else DEFAULT_IMAGE_SIZE)
        self.image_hw: tuple[int, int] | None = None if side is None else (side, side)
        self.model_side = side  # the model's own input side (differs with a checkpoint)
        self.device = torch.device(device)
        self.precision = precision
        self._dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
        self.stats = RunningMoments()
        self.model: torch.nn.Module | None = None
        self.text_anchors: torch.Tensor | None = None  # [6, 4, 30, D], L2-normalised
        self.logit_scale = 100.0
        self.mean: tuple[float, ...] = OPENAI_MEAN
        self.std: tuple[float, ...] = OPENAI_STD
        self.objective = "contrastive"

    @property
    def history_frames(self) -> int:
        """Past frames each request must send (the server refuses other counts)."""
        return self.image_input.frames - 1

    def load(self) -> None:
        model, tokenizer = self._load_checkpoint() if self.checkpoint else self._load_open_clip()
        model.eval()
        captions = anchor_captions()
        with torch.inference_mode():
            chunks = [
                model.encode_text(tokenizer(captions[i : i + TEXT_CHUNK]).to(self.device))
                for i in range(0, len(captions), TEXT_CHUNK)
            ]
            text = F.normalize(torch.cat(chunks).float(), dim=-1)
            self.logit_scale = float(model.logit_scale.exp())
        shape = (
            len(COMMAND_PHRASES),
            len(SPEED_PHRASES),
            len(LON_PHRASES) * len(LAT_PHRASES),
            text.shape[-1],
        )
        self.text_anchors = text.reshape(shape)
        self.model = model
        logger.info(
            "open_clip %s loaded (%d px input, %d px model, logit scale %.2f)",
            self.model_name,
            self.image_hw[0] if self.image_hw else -1,
            self.model_side or -1,
            self.logit_scale,
        )

    def _load_open_clip(self) -> tuple[torch.nn.Module, Any]:
        import open_clip

        if self.model_config_path is not None:
            open_clip.add_model_config(self.model_config_path)
        model = open_clip.create_model(
            self.model_name,
            pretrained=self.pretrained,
            force_image_size=self.model_side,
            device=self.device,
            precision=self.precision,
        )
        preprocess_cfg = getattr(model.visual, "preprocess_cfg", {}) or {}
        self.mean = tuple(preprocess_cfg.get("mean", OPENAI_MEAN))
        self.std = tuple(preprocess_cfg.get("std", OPENAI_STD))
        return model, open_clip.get_tokenizer(self.model_name)

    def _load_checkpoint(self) -> tuple[torch.nn.Module, Any]:
        path = self.checkpoint
        checkpoint = read_checkpoint(path)
        check_compatible(
            checkpoint, path, self.requested_model_name, self.requested_image_size, self.context, self.image_input.name
        )
        self.objective = checkpoint.objective
        model = load_model(checkpoint, path).to(self.device)
        if self.precision != "fp32":
            model = model.to(self._dtype)
        self.model_name = checkpoint.model_name
        self.image_hw = (checkpoint.input_size, checkpoint.input_size)
        self.model_side = checkpoint.image_size
        self.mean, self.std = checkpoint.mean, checkpoint.std
        return model, text_tokenizer(checkpoint.model_cfg)

    def image_features(self, images: np.ndarray) -> torch.Tensor:
        """``[B, D]`` L2-normalised features of ``[B, H, W, 3]`` uint8 images (client size).

        A model with history input takes stacks ``[B, T, H, W, 3]``, oldest frame first.
        """
        if self.model is None or self.model_side is None:
            raise RuntimeError("OpenClipScorer.load() was not called")
        pixels = resize_area(torch.from_numpy(np.ascontiguousarray(images)), self.model_side)
        pixels = normalise(pixels.to(self.device), self.mean, self.std, self._dtype)
        with torch.inference_mode():
            return F.normalize(self.model.encode_image(pixels).float(), dim=-1)

    def anchor_probabilities(self, items: list[ClipItem]) -> np.ndarray:
        """``[B, 30]`` softmax over each item's (command, speed-bin) action anchors."""
        for item in items:
            if len(item.history) != self.history_frames:
                raise ValueError(
                    f"item {item.id!r}: history has {len(item.history)} frame(s), image input "
                    f"{self.image_input.describe()} needs {self.history_frames}"
                )
        if self.image_input.frames > 1:
            images = np.stack([np.stack([*item.history, item.image]) for item in items])
        else:
            images = np.stack([item.image for item in items])
        return self.group_probabilities(
            images,
            np.array([command_index(item.command) for item in items]),
            np.array([speed_bin(item.speed_mps) for item in items]),
        )

    def group_probabilities(
        self, images: np.ndarray, command_rows: np.ndarray, speed_bins: np.ndarray
    ) -> np.ndarray:
        """``[B, 30]`` softmax over the action anchors of row ``command_rows[i]``, bin ``speed_bins[i]``."""
        if self.text_anchors is None:
            raise RuntimeError("OpenClipScorer.load() was not called")
        features = self.image_features(images)
        rows = torch.as_tensor(command_rows, device=features.device)
        bins = torch.as_tensor(speed_bins, device=features.device)
        anchors = self.text_anchors[rows, bins]  # [B, 30, D]
        logits = self.logit_scale * torch.einsum("bd,bkd->bk", features, anchors)
        return torch.softmax(logits, dim=-1).cpu().numpy().astype(np.float64)

    def score_batch(self, items: list[ClipItem]) -> list[ClipResult]:
        probs = self.anchor_probabilities(items)
        indices = np.array([action_index(*item.action) for item in items])
        results = []
        for margin in alignment_margin(probs, indices):
            snapshot = self.stats.update(float(margin))
            bonus = normalised_bonus(float(margin), snapshot.mean, snapshot.var)
            stats = {
                "count": snapshot.count,
                "mean": snapshot.mean,
                "var": snapshot.var,
            }
            results.append(ClipResult(bonus, float(margin), stats))
        return results
