"""Model inputs of the HF advisor without the processor's per-call overhead, checked equal to it at load.

The processor (``processor(text=..., images=[PIL]...)``) is the reference, but for a 1 M
parameter advisor it costs as much as the model: each call renders the chat template per item,
converts every image to PIL and back, validates, groups by shape and tokenises the whole text.
The advisor's prompts differ only by a few numbers and its images are one uint8 batch, so:

- ``PromptIds`` renders the chat template once around a placeholder, tokenises only prompts it
  has not seen (cached by the prompt string, bounded), expands the image placeholder the way the
  processor does, and left-pads with the tokenizer's pad id.
- ``TorchPixels`` resizes, crops, rescales and normalises the ``[B, H, W, 3]`` uint8 batch in one
  torch pass with the image processor's own settings (its resample, size, crop, mean and std).

``fast_inputs`` builds both and keeps them only when their output on reference inputs equals the
processor's (token ids exactly, pixels allclose); any other checkpoint keeps the processor.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

PLACEHOLDER = "\u2063PROMPT\u2063"
"""Stands for the prompt while the chat template is rendered once (invisible separator characters)."""

CACHE_SIZE = 4096
"""Prompts whose token ids are kept; a prompt is ~1 KB of text and ~30 ids."""

PIXEL_ATOL = 1e-5
"""Tolerance of the load-time check of ``TorchPixels`` against the processor (normalised units)."""


class PromptIds:
    """Token ids of the chat turn for a prompt, as the processor makes them, cached by the prompt string.

    Args:
        prefix, suffix: the chat text around the prompt (``chat_prompt_text`` rendered around
            ``PLACEHOLDER``).
        tokenizer: the processor's tokenizer (it tokenises cache misses, in one batched call).
        image_token_id: the placeholder token the processor repeats ``image_tokens`` times.
        image_tokens: how many image tokens one image becomes.
        cache_size: prompts kept (least recently used dropped first).
    """

    def __init__(
        self, prefix: str, suffix: str, tokenizer: Any, image_token_id: int, image_tokens: int,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.prefix, self.suffix = prefix, suffix
        self.tokenizer = tokenizer
        self.image_token_id = image_token_id
        self.image_tokens = image_tokens
        self.cache_size = cache_size
        self._cache: OrderedDict[str, list[int]] = OrderedDict()
        self.hits = self.misses = 0

    def ids(self, prompts: Sequence[str]) -> list[list[int]]:
        """The token ids of each prompt's chat turn; unseen prompts are tokenised together."""
        missing = list(dict.fromkeys(p for p in prompts if p not in self._cache))
        if missing:
            encoded = self.tokenizer([self.prefix + p + self.suffix for p in missing])["input_ids"]
            for prompt, ids in zip(missing, encoded):
                self._cache[prompt] = self._expand(ids)
        self.misses += len(missing)
        self.hits += len(prompts) - len(missing)
        rows = []
        for prompt in prompts:
            self._cache.move_to_end(prompt)
            rows.append(self._cache[prompt])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return rows

    def clear(self) -> None:
        """Forget every cached prompt (benchmarks time the uncached path with it)."""
        self._cache.clear()

    def _expand(self, ids: list[int]) -> list[int]:
        out: list[int] = []
        for token in ids:
            out.extend([token] * self.image_tokens if token == self.image_token_id else [token])
        return out

    def batch(self, prompts: Sequence[str]) -> tuple[Any, Any]:
        """``(input_ids, attention_mask)`` long tensors, left-padded with the pad id (as the processor pads)."""
        import torch

        rows = self.ids(prompts)
        width = max(len(row) for row in rows)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            input_ids[index, width - len(row):] = torch.tensor(row, dtype=torch.long)
            attention_mask[index, width - len(row):] = 1
        return input_ids, attention_mask


class TorchPixels:
    """The image processor's resize, centre crop, rescale and normalise, on a uint8 ``[B, H, W, 3]`` batch.

    Uses torchvision's ``resize`` with the processor's resample filter and antialiasing (what the
    transformers torchvision image processors call), then one fused ``(x - mean/s) / (std/s)``.
    """

    def __init__(self, image_processor: Any) -> None:
        from torchvision.transforms.v2 import InterpolationMode

        self.processor = image_processor
        resample = getattr(image_processor, "resample", None)
        modes = {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR, 3: InterpolationMode.BICUBIC}
        if resample is None or int(resample) not in modes:
            raise ValueError(f"resample {resample!r} has no torchvision equivalent here")
        self.interpolation = modes[int(resample)]
        self.do_resize = bool(getattr(image_processor, "do_resize", False))
        self.size = _size_dict(getattr(image_processor, "size", None)) if self.do_resize else {}
        self.do_center_crop = bool(getattr(image_processor, "do_center_crop", False))
        self.crop = _size_dict(getattr(image_processor, "crop_size", None)) if self.do_center_crop else {}
        if getattr(image_processor, "do_pad", False):
            raise ValueError("padding image processors are not covered")
        scale = float(image_processor.rescale_factor) if getattr(image_processor, "do_rescale", False) else 1.0
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
        if getattr(image_processor, "do_normalize", False):
            mean, std = tuple(image_processor.image_mean), tuple(image_processor.image_std)
        self._mean = np.asarray(mean, dtype=np.float64) / scale
        self._std = np.asarray(std, dtype=np.float64) / scale

    def __call__(self, images: np.ndarray) -> Any:
        """``pixel_values`` (float32 ``[B, 3, h, w]``) of a uint8 ``[B, H, W, 3]`` RGB batch."""
        import torch
        from torchvision.transforms.v2 import functional as tvF

        batch = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
        if self.do_resize:
            batch = tvF.resize(batch, self._resized_hw(batch.shape[-2:]), interpolation=self.interpolation,
                               antialias=True)
        if self.do_center_crop:
            batch = _center_crop(batch, self.crop["height"], self.crop["width"])
        mean = torch.tensor(self._mean, dtype=torch.float32).view(1, 3, 1, 1)
        std = torch.tensor(self._std, dtype=torch.float32).view(1, 3, 1, 1)
        return (batch.to(torch.float32) - mean) / std

    def _resized_hw(self, hw: Sequence[int]) -> tuple[int, int]:
        height, width = int(hw[0]), int(hw[1])
        if "height" in self.size and "width" in self.size:
            return self.size["height"], self.size["width"]
        if "shortest_edge" not in self.size or "longest_edge" in self.size:
            raise ValueError(f"image processor size {self.size} is not covered")
        short, long = (height, width) if height <= width else (width, height)
        new_short, new_long = self.size["shortest_edge"], int(self.size["shortest_edge"] * long / short)
        return (new_short, new_long) if height <= width else (new_long, new_short)


def _size_dict(size: Any) -> dict[str, int]:
    """An image processor's ``size``/``crop_size`` (a dict or a ``SizeDict``) as a plain dict of ints."""
    if size is None:
        return {}
    items = size.items() if hasattr(size, "items") else vars(size).items()
    return {key: int(value) for key, value in items if value is not None}


def _center_crop(batch: Any, height: int, width: int) -> Any:
    """The transformers centre crop (top/left offsets truncated); refuses images smaller than the crop."""
    image_h, image_w = batch.shape[-2:]
    if height > image_h or width > image_w:
        raise ValueError(f"crop {height}x{width} is larger than the resized image {image_h}x{image_w}")
    top, left = int((image_h - height) / 2.0), int((image_w - width) / 2.0)
    return batch[..., top:top + height, left:left + width]


def chat_affixes(chat_text: Callable[[str], str], probes: Sequence[str]) -> tuple[str, str] | None:
    """``(prefix, suffix)`` with ``chat_text(p) == prefix + p + suffix`` for every probe, else None."""
    rendered = chat_text(PLACEHOLDER)
    if rendered.count(PLACEHOLDER) != 1:
        return None
    prefix, suffix = rendered.split(PLACEHOLDER)
    if any(chat_text(p) != prefix + p + suffix for p in probes):
        return None
    return prefix, suffix


def fast_inputs(
    processor: Any, chat_text: Callable[[str], str], probe_prompts: Sequence[str], image_hw: tuple[int, int]
) -> tuple[PromptIds, TorchPixels] | None:
    """``PromptIds`` and ``TorchPixels`` for ``processor`` when they reproduce it on probe inputs, else None.

    The probes are the server's own prompts (of different lengths, so padding is checked) and
    random ``image_hw`` images; a mismatch, or any processor this module does not understand,
    leaves the server on the processor (logged at INFO with the reason).
    """
    import torch
    from PIL import Image

    try:
        affixes = chat_affixes(chat_text, probe_prompts)
        if affixes is None:
            raise ValueError("the chat template does not place the prompt verbatim")
        tokenizer = getattr(processor, "tokenizer", None)
        image_token = getattr(processor, "image_token", None) or getattr(tokenizer, "image_token", None)
        if tokenizer is None or image_token is None or getattr(processor, "image_processor", None) is None:
            raise ValueError("no tokenizer, image token or image processor")
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, (len(probe_prompts), *image_hw, 3), dtype=np.uint8)
        reference = processor(
            text=[chat_text(p) for p in probe_prompts], images=[Image.fromarray(i) for i in images],
            return_tensors="pt", padding=True,
        )
        image_token_id = tokenizer.convert_tokens_to_ids(image_token)
        first = reference["input_ids"][0][reference["attention_mask"][0].bool()]
        prompt_ids = PromptIds(*affixes, tokenizer, image_token_id, int((first == image_token_id).sum()))
        pixels = TorchPixels(processor.image_processor)
        input_ids, attention_mask = prompt_ids.batch(probe_prompts)
        if set(reference.keys()) != {"input_ids", "attention_mask", "pixel_values"}:
            raise ValueError(f"the processor returns {sorted(reference.keys())}")
        same_ids = torch.equal(input_ids, reference["input_ids"])
        if not (same_ids and torch.equal(attention_mask, reference["attention_mask"])):
            raise ValueError("token ids differ from the processor's")
        values = pixels(images)
        if values.shape != reference["pixel_values"].shape or not torch.allclose(
            values, reference["pixel_values"], atol=PIXEL_ATOL, rtol=0
        ):
            raise ValueError("pixel values differ from the processor's")
    except Exception as exc:  # any surprise: the processor stays the path
        logger.info("HF advisor: processor inputs kept (%s)", exc)
        return None
    prompt_ids.hits = prompt_ids.misses = 0
    return prompt_ids, pixels
