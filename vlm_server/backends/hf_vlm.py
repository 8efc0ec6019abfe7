"""Hugging Face VLM advisor: batched greedy generation with ``AutoModelForImageTextToText``.

Prompts are left-padded (decoder-only batching needs it: with right padding the shorter
prompts would continue from pad tokens). Only the new tokens are decoded and parsed.
``chat_prompt_text`` is the one place the chat turn is built; ``found-rl vlm finetune`` trains
on exactly this text, so a fine-tuned model sees at serving time what it was trained on.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
from PIL import Image

from vlm_server.answers import build_prompt, parse_answer
from vlm_server.backends.base import AdviseItem, AdviseResult
from vlm_server.backends.hf_checks import (
    DEFAULT_IMAGE_HW,
    card_image_hw,
    check_chat_template,
    check_image_size,
    check_image_text_to_text,
)

logger = logging.getLogger(__name__)


def chat_prompt_text(processor: Any, prompt: str) -> str:
    """The model's chat text for one user turn (the BEV image, then ``prompt``), ready for the answer."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def item_prompt(item: AdviseItem) -> str:
    """The advisor prompt of one request (speed, next route target when given, command)."""
    return build_prompt(item.command, item.speed_mps, item.state)


class HuggingFaceAdvisor:
    """Action advice from a local image-text-to-text checkpoint.

    Args:
        model_path: local directory or hub id of the checkpoint (weights must be present
            locally when the machine is offline).
        device: torch device string.
        dtype: ``"auto"``, ``"float16"``, ``"bfloat16"`` or ``"float32"``.
        max_new_tokens: generation budget; the JSON answer needs about 25 tokens.
        trust_remote_code: needed by some checkpoints (e.g. InternVL).
        image_size: BEV side in px the requests carry; the server refuses other sizes. Default:
            the size recorded by ``found-rl vlm finetune`` in the model folder, else 192.
        processor, model: already-built objects (tests, notebooks); skip loading. ``model`` may
            also be the checkpoint folder itself (``--advisor-option model=DIR``), the same as
            ``model_path``.

    ``load`` refuses a folder that is not an image-text-to-text checkpoint, a processor
    without a chat template, and a model that cannot take ``image_size`` images.
    """

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "auto",
        max_new_tokens: int = 32,
        trust_remote_code: bool = False,
        image_size: int | None = None,
        processor: Any = None,
        model: Any = None,
    ) -> None:
        if isinstance(model, (str, os.PathLike)):
            if model_path is not None and str(model_path) != str(model):
                raise ValueError(f"give the checkpoint as model or as model_path, not both ({model!s}, {model_path!s})")
            model_path, model = str(model), None
        if model_path is None and (processor is None or model is None):
            raise ValueError(
                "HuggingFaceAdvisor needs model_path, or both processor and model"
            )
        if dtype not in ("auto", "float16", "bfloat16", "float32"):
            raise ValueError(
                f"dtype must be auto, float16, bfloat16 or float32, got {dtype!r}"
            )
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if image_size is not None and (type(image_size) is not int or image_size < 1):
            raise ValueError(f"image_size must be an int >= 1 (px), got {image_size!r}")
        self.model_path = model_path
        self.device = device
        self.dtype = dtype
        self.max_new_tokens = max_new_tokens
        self.trust_remote_code = trust_remote_code
        self.processor = processor
        self.model = model
        self.image_hw: tuple[int, int] = (image_size, image_size) if image_size else DEFAULT_IMAGE_HW
        self._image_size_given = image_size is not None
        self.parse_failures = 0

    def load(self) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if self.model_path is not None and self.model is None:
            check_image_text_to_text(self.model_path, self.trust_remote_code)
        if self.processor is None:
            self.processor = AutoProcessor.from_pretrained(
                self.model_path, trust_remote_code=self.trust_remote_code
            )
        check_chat_template(self.processor, self.model_path)
        if self.model is None:
            dtype = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
            self.model = AutoModelForImageTextToText.from_pretrained(
                self.model_path, dtype=dtype, trust_remote_code=self.trust_remote_code
            ).to(self.device)
        self.model.eval()
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        tokenizer.padding_side = "left"
        if not self._image_size_given:
            self.image_hw = card_image_hw(self.model_path) or DEFAULT_IMAGE_HW
        check_image_size(
            self.processor, self.model, self.image_hw, chat_prompt_text(self.processor, build_prompt(4, 0.0)),
            self.model_path or type(self.model).__name__,
        )

    def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]:
        import torch

        results: list[AdviseResult | None] = [None] * len(items)
        usable = [i for i, item in enumerate(items) if item.image is not None]
        for i in set(range(len(items))) - set(usable):
            results[i] = AdviseResult(None, error="this advisor needs an image")
        if usable:
            texts = [chat_prompt_text(self.processor, item_prompt(items[i])) for i in usable]
            images = [Image.fromarray(np.asarray(items[i].image)) for i in usable]
            inputs = self.processor(
                text=texts, images=images, return_tensors="pt", padding=True
            ).to(self.device)
            with torch.inference_mode():
                output = self.model.generate(
                    **inputs, max_new_tokens=self.max_new_tokens, do_sample=False
                )
            new_tokens = output[:, inputs["input_ids"].shape[1] :]
            answers = self.processor.batch_decode(new_tokens, skip_special_tokens=True)
            for i, answer in zip(usable, answers):
                parsed = parse_answer(answer)
                if parsed.action is None:
                    self.parse_failures += 1
                results[i] = AdviseResult(
                    parsed.action, text=answer, error=parsed.error
                )
        return results  # type: ignore[return-value]
