"""Hugging Face VLM advisor: batched greedy answers from ``AutoModelForImageTextToText``.

Prompts are left-padded (decoder-only batching needs it: with right padding the shorter
prompts would continue from pad tokens). Only the new tokens are decoded and parsed.
``chat_prompt_text`` is the one place the chat turn is built; ``found-rl vlm finetune`` trains
on exactly this text, so a fine-tuned model sees at serving time what it was trained on.

A small advisor (``found-rl vlm init``, ~1 M parameters) costs less than the code around it,
so three cuts keep its answers and drop most of that code (docs/vlm.md has the breakdown):
inputs built without the processor's per-call overhead (``hf_inputs``, checked equal to the
processor at load), templated decoding for tokenizers that write the answer as fixed and
number words (``hf_template``, equal to greedy ``generate`` whenever greedy writes the
pattern), and ``torch_threads``, the thread budget of a server that shares its cores with a
training run.
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
from vlm_server.backends.hf_inputs import PromptIds, TorchPixels, fast_inputs
from vlm_server.backends.hf_template import AnswerTemplate, TemplatedDecoder
from vlm_server.errors import UsageError

logger = logging.getLogger(__name__)


def chat_prompt_text(processor: Any, prompt: str) -> str:
    """The model's chat text for one user turn (the BEV image, then ``prompt``), ready for the answer."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def item_prompt(item: AdviseItem) -> str:
    """The advisor prompt of one request (speed, next route target when given, command)."""
    return build_prompt(item.command, item.speed_mps, item.state)


def check_torch_threads(value: Any) -> int | None:
    """``torch_threads`` as an int >= 1, or None (torch's default).

    Raises:
        ValueError: naming ``torch_threads`` for 0, a negative number or a non-integer.
    """
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise UsageError(f"torch_threads must be an int >= 1 (threads for torch), got {value!r}")
    return value


def apply_torch_threads(threads: int) -> None:
    """Set torch's intra-op threads (and its inter-op pool while it is not started yet).

    The inter-op pool can only be sized before its first use; a server sizes it at load, before
    any model call, while a process that already ran torch keeps its pool (logged at DEBUG).
    """
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError as exc:
        logger.debug("torch inter-op threads left as they are: %s", exc)


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
        torch_threads: torch threads of the process, set at load. None (default) leaves torch's
            own choice, right for a server alone on its machine; a server beside a training run
            on 2 cores takes 1 (more threads only spin against the run's processes).
        templated_decoding: ``"auto"`` (default) feeds the answer's fixed tokens and chooses only
            its number slots when the tokenizer writes answers that way (``found-rl vlm init``
            models and ``max_new_tokens`` holds an answer), else uses ``generate``; True refuses,
            at load, a model that cannot; False always uses ``generate``.
        fast_inputs: True (default) builds the inputs without the processor where ``load`` finds
            that path gives the processor's own inputs; False always calls the processor.
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
        torch_threads: int | None = None,
        templated_decoding: bool | str = "auto",
        fast_inputs: bool = True,
        processor: Any = None,
        model: Any = None,
    ) -> None:
        if isinstance(model, (str, os.PathLike)):
            if model_path is not None and str(model_path) != str(model):
                raise UsageError(f"give the checkpoint as model or as model_path, not both ({model!s}, {model_path!s})")
            model_path, model = str(model), None
        if model_path is None and (processor is None or model is None):
            raise UsageError(
                "HuggingFaceAdvisor needs model_path, or both processor and model"
            )
        if dtype not in ("auto", "float16", "bfloat16", "float32"):
            raise UsageError(
                f"dtype must be auto, float16, bfloat16 or float32, got {dtype!r}"
            )
        if max_new_tokens < 1:
            raise UsageError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if image_size is not None and (type(image_size) is not int or image_size < 1):
            raise UsageError(f"image_size must be an int >= 1 (px), got {image_size!r}")
        if not (isinstance(templated_decoding, bool) or templated_decoding == "auto"):
            raise UsageError(f"templated_decoding must be auto, true or false, got {templated_decoding!r}")
        if not isinstance(fast_inputs, bool):
            raise UsageError(f"fast_inputs must be true or false, got {fast_inputs!r}")
        self.model_path = model_path
        self.device = device
        self.dtype = dtype
        self.max_new_tokens = max_new_tokens
        self.trust_remote_code = trust_remote_code
        self.torch_threads = check_torch_threads(torch_threads)
        self.templated_decoding = templated_decoding
        self.processor = processor
        self.model = model
        self.image_hw: tuple[int, int] = (image_size, image_size) if image_size else DEFAULT_IMAGE_HW
        self._image_size_given = image_size is not None
        self.parse_failures = 0
        self.use_fast_inputs = fast_inputs
        self.fast_inputs: tuple[PromptIds, TorchPixels] | None = None
        self.decoder: TemplatedDecoder | None = None

    def load(self) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if self.torch_threads is not None:
            apply_torch_threads(self.torch_threads)
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
        if self.use_fast_inputs:
            probes = [build_prompt(4, 0.0), build_prompt(1, 12.5, {"target_ego_xy": [6.25, -1.5]})]
            self.fast_inputs = fast_inputs(self.processor, lambda p: chat_prompt_text(self.processor, p), probes,
                                           self.image_hw)
        self.decoder = self._templated_decoder(tokenizer)

    def _templated_decoder(self, tokenizer: Any) -> TemplatedDecoder | None:
        """The templated decoder when ``templated_decoding`` and the tokenizer allow it (see the class)."""
        if self.templated_decoding is False:
            return None
        template = AnswerTemplate.detect(tokenizer)
        why = None
        if template is None:
            why = "its tokenizer does not write the answer as one token per fixed stretch and two per number"
        elif self.max_new_tokens < template.length + 1:
            why = f"max_new_tokens {self.max_new_tokens} is shorter than the answer ({template.length + 1} tokens)"
        if why is None:
            return TemplatedDecoder(self.model, template)
        if self.templated_decoding is True:
            raise ValueError(f"templated_decoding=true: model {self.model_path}: {why}")
        logger.info("HF advisor: generate decodes (templated decoding off: %s)", why)
        return None

    def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]:
        results: list[AdviseResult | None] = [None] * len(items)
        usable = [i for i, item in enumerate(items) if item.image is not None]
        for i in set(range(len(items))) - set(usable):
            results[i] = AdviseResult(None, error="this advisor needs an image")
        if usable:
            if self.torch_threads is not None:
                self._keep_threads()
            answers = self.answers([items[i] for i in usable])
            for i, answer in zip(usable, answers):
                parsed = parse_answer(answer)
                if parsed.action is None:
                    self.parse_failures += 1
                results[i] = AdviseResult(
                    parsed.action, text=answer, error=parsed.error
                )
        return results  # type: ignore[return-value]

    def _keep_threads(self) -> None:
        """Re-apply ``torch_threads`` if this thread's setting differs (OpenMP keeps it per thread)."""
        import torch

        if torch.get_num_threads() != self.torch_threads:
            torch.set_num_threads(self.torch_threads)

    def answers(self, items: list[AdviseItem]) -> list[str]:
        """The model's answer text for each item (all have images): templated or greedy decoding."""
        import torch

        inputs = self.model_inputs(items)
        with torch.inference_mode():
            if self.decoder is not None:
                new_tokens = self.decoder(inputs)
            else:
                output = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
                new_tokens = output[:, inputs["input_ids"].shape[1]:]
        return self.processor.batch_decode(new_tokens, skip_special_tokens=True)

    def model_inputs(self, items: list[AdviseItem]) -> dict[str, Any]:
        """The model's keyword inputs on its device: the verified fast path, else the processor's own."""
        prompts = [item_prompt(item) for item in items]
        if self.fast_inputs is None:
            inputs = self.processor(
                text=[chat_prompt_text(self.processor, p) for p in prompts],
                images=[Image.fromarray(np.asarray(item.image)) for item in items],
                return_tensors="pt", padding=True,
            )
            return dict(inputs.to(self.device))
        prompt_ids, pixels = self.fast_inputs
        input_ids, attention_mask = prompt_ids.batch(prompts)
        pixel_values = pixels(np.stack([np.asarray(item.image) for item in items]))
        return {
            "input_ids": input_ids.to(self.device),
            "attention_mask": attention_mask.to(self.device),
            "pixel_values": pixel_values.to(self.device),
        }
