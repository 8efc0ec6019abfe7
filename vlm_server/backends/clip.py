"""open_clip scorer: conditional contrastive action alignment bonus of METHOD §3.

The 720 text anchors are encoded once at load. Per item: softmax over the 30 anchors of the
item's (command, speed bin) with the model's logit scale, margin of the executed action's
anchor over the best non-neighbour, then normalisation by running statistics shared by all
clients (updated one sample at a time, the sample included, then used for its own bonus).
"""

from __future__ import annotations

import logging
from pathlib import Path

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
from vlm_server.running_stats import RunningMoments

logger = logging.getLogger(__name__)

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
TEXT_CHUNK = 120


class OpenClipScorer:
    """CLIP alignment bonus from an open_clip model.

    Args:
        model_name: open_clip architecture, e.g. ``"ViT-B-16"``.
        pretrained: a local checkpoint path or an open_clip pretrained tag; None = random
            weights (tests only: the bonus is then meaningless).
        model_config_path: JSON model config to register first (custom architectures).
        image_size: square input side in px; requests must send exactly this size (the
            fine-tuned model was trained at 192, METHOD §3).
        device: torch device string.
        precision: open_clip precision, ``"fp32"``, ``"fp16"`` or ``"bf16"`` (GPU).
    """

    def __init__(
        self,
        model_name: str = "ViT-B-16",
        pretrained: str | None = "laion2b_s34b_b88k",
        model_config_path: str | None = None,
        image_size: int = 192,
        device: str = "cpu",
        precision: str = "fp32",
    ) -> None:
        if image_size < 8:
            raise ValueError(f"image_size must be >= 8 px, got {image_size}")
        if model_config_path is not None and not Path(model_config_path).is_file():
            raise FileNotFoundError(
                f"model_config_path {model_config_path} does not exist"
            )
        self.model_name = model_name
        self.pretrained = pretrained
        self.model_config_path = model_config_path
        self.image_hw = (image_size, image_size)
        if precision not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"precision must be fp32, fp16 or bf16, got {precision!r}")
        self.device = torch.device(device)
        self.precision = precision
        self._dtype = {
            "fp32": torch.float32,
            "fp16": torch.float16,
            "bf16": torch.bfloat16,
        }[precision]
        self.stats = RunningMoments()
        self.model: torch.nn.Module | None = None
        self.text_anchors: torch.Tensor | None = None  # [6, 4, 30, D], L2-normalised
        self.logit_scale = 100.0
        self._mean = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)

    def load(self) -> None:
        import open_clip

        if self.model_config_path is not None:
            open_clip.add_model_config(self.model_config_path)
        model = open_clip.create_model(
            self.model_name,
            pretrained=self.pretrained,
            force_image_size=self.image_hw[0],
            device=self.device,
            precision=self.precision,
        )
        model.eval()
        preprocess_cfg = getattr(model.visual, "preprocess_cfg", {}) or {}
        self._mean = torch.tensor(
            preprocess_cfg.get("mean", OPENAI_MEAN), device=self.device
        ).view(1, 3, 1, 1)
        self._std = torch.tensor(
            preprocess_cfg.get("std", OPENAI_STD), device=self.device
        ).view(1, 3, 1, 1)
        tokenizer = open_clip.get_tokenizer(self.model_name)
        captions = anchor_captions()
        with torch.inference_mode():
            chunks = [
                model.encode_text(
                    tokenizer(captions[i : i + TEXT_CHUNK]).to(self.device)
                )
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
            "open_clip %s loaded (logit scale %.2f)", self.model_name, self.logit_scale
        )

    def image_features(self, images: np.ndarray) -> torch.Tensor:
        """``[B, D]`` L2-normalised features of ``[B, H, W, 3]`` uint8 images."""
        if self.model is None:
            raise RuntimeError("OpenClipScorer.load() was not called")
        pixels = (
            torch.from_numpy(images)
            .to(self.device)
            .permute(0, 3, 1, 2)
            .float()
            .div_(255.0)
        )
        pixels = ((pixels - self._mean) / self._std).to(self._dtype)
        with torch.inference_mode():
            return F.normalize(self.model.encode_image(pixels).float(), dim=-1)

    def anchor_probabilities(self, items: list[ClipItem]) -> np.ndarray:
        """``[B, 30]`` softmax over each item's (command, speed-bin) action anchors."""
        if self.text_anchors is None:
            raise RuntimeError("OpenClipScorer.load() was not called")
        features = self.image_features(np.stack([item.image for item in items]))
        rows = torch.tensor(
            [command_index(item.command) for item in items], device=features.device
        )
        bins = torch.tensor(
            [speed_bin(item.speed_mps) for item in items], device=features.device
        )
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
