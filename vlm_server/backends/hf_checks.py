"""Checks that a Hugging Face checkpoint can serve as a BEV advisor, each failing with the fix.

A wrong checkpoint otherwise fails deep inside transformers (a text-only model in
``AutoModelForImageTextToText``, a processor without a chat template, a vision tower that
cannot take the BEV size), far from the flag that chose it. The fine-tuning command
(``found-rl vlm finetune``) runs the same checks, so a checkpoint that trains also serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlm_server.errors import MissingPathError

ADVISOR_CARD = "found_rl_advisor.json"
"""Written beside a fine-tuned model: ``{"image_hw": [H, W], ...}``, the BEV size it was trained on."""

DEFAULT_IMAGE_HW = (192, 192)
"""The RGB BEV the advisor requests carry (ARCHITECTURE §4)."""


def check_image_text_to_text(model_path: str | Path, trust_remote_code: bool = False) -> None:
    """Refuse a local folder that is not an ``AutoModelForImageTextToText`` checkpoint.

    Hub ids (no such local folder) are left to ``from_pretrained``.

    Raises:
        ValueError: the folder has no ``config.json``, or its model type has no image-text-to-text class.
        FileNotFoundError: a path that looks local (absolute, ``./``, ``~``) does not exist.
    """
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING

    path = Path(model_path).expanduser()
    if not path.exists():
        if str(model_path).startswith(("/", ".", "~")):
            raise MissingPathError(f"model {model_path}: no such folder")
        return
    if not (path / "config.json").is_file():
        raise ValueError(
            f"model {model_path}: no config.json there ({_contents(path)}), so it is not a Hugging Face "
            "checkpoint folder; pass the folder that holds config.json, e.g. a `found-rl vlm init --out` "
            "folder or a fine-tuning run's model/"
        )
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    auto_map = getattr(config, "auto_map", None) or {}
    if type(config) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING or "AutoModelForImageTextToText" in auto_map:
        return
    architectures = ", ".join(getattr(config, "architectures", None) or []) or "none named"
    raise ValueError(
        f"model {model_path}: model type {config.model_type!r} (architectures: {architectures}) is not an "
        "image-text-to-text model "
        "(AutoModelForImageTextToText has no class for it); pass a vision-language checkpoint such as "
        "LLaVA, Qwen2.5-VL or InternVL (transformers-format, e.g. OpenGVLab/InternVL3-1B-hf)"
    )


def _contents(path: Path, shown: int = 6) -> str:
    """What a folder that should be a checkpoint holds, for the error message."""
    if not path.is_dir():
        return "it is a file, not a folder"
    names = sorted(entry.name for entry in path.iterdir())
    if not names:
        return "the folder is empty"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return "it holds " + ", ".join(names[:shown]) + more


def check_chat_template(processor: Any, model_path: str | Path | None) -> None:
    """Refuse a processor without a chat template: the prompt could not be built as the server builds it.

    Raises:
        ValueError: naming the checkpoint and how to add a template.
    """
    if getattr(processor, "chat_template", None):
        return
    raise ValueError(
        f"model {model_path}: its processor has no chat template, so the advisor prompt cannot be built; "
        "copy chat_template.jinja (or the 'chat_template' entry of processor_config.json) from the base "
        "model's folder into this one, or set processor.chat_template and run processor.save_pretrained(PATH)"
    )


def card_image_hw(model_path: str | Path | None) -> tuple[int, int] | None:
    """The BEV size recorded by fine-tuning in ``ADVISOR_CARD``, or None when there is no card."""
    import json

    if model_path is None:
        return None
    card = Path(model_path).expanduser() / ADVISOR_CARD
    if not card.is_file():
        return None
    try:
        height, width = json.loads(card.read_text())["image_hw"]
        return int(height), int(width)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{card}: expected {{\"image_hw\": [H, W]}}: {exc}") from None


def vision_image_size(model: Any) -> int | None:
    """The square input size the model's vision tower was built for, where its config says so."""
    vision = getattr(model.config, "vision_config", None)
    size = getattr(vision, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    return int(size) if isinstance(size, int) else None


IMAGE_SIZE_MISMATCH_MARKERS = (
    "must match the size of tensor",  # position embeddings added to another number of patches
    "Kernel size can't be greater than actual input size",  # a convolution stem fed a too-small image
)
"""Texts of the ``RuntimeError`` torch raises when a vision tower is fed an image of a size it cannot take."""


def is_image_size_failure(exc: BaseException) -> bool:
    """Whether ``exc``, raised while a processor and vision tower read one image, says its size does not fit.

    A ``ValueError`` is the models' own input check (transformers: "Image features and image
    tokens do not match", "Input image size (48*48) doesn't match model (32*32)"); a
    ``RuntimeError`` counts only with a shape-mismatch text, so running out of memory or a dtype
    bug is never blamed on the image.
    """
    if isinstance(exc, ValueError):
        return True
    return isinstance(exc, RuntimeError) and any(marker in str(exc) for marker in IMAGE_SIZE_MISMATCH_MARKERS)


def check_image_size(processor: Any, model: Any, image_hw: tuple[int, int], prompt_text: str, model_path: Any) -> None:
    """Run one forward pass on a blank ``image_hw`` image; refuse the model if it cannot take it.

    A processor that does not resize (or resizes to a size the vision tower was not built for)
    turns the BEV into the wrong number of patches; transformers then fails on the first
    request with a message about image tokens. Failing at load names both sizes instead. Any
    other failure of the pass (out of memory, a dtype bug) is raised as it is, with its traceback.

    Raises:
        ValueError: naming the model, the BEV size and, when known, the size the model expects.
    """
    import torch
    from PIL import Image

    height, width = image_hw
    try:
        inputs = processor(
            text=[prompt_text], images=[Image.new("RGB", (width, height))], return_tensors="pt"
        ).to(model.device)
        with torch.inference_mode():
            model(**inputs)
    except (ValueError, RuntimeError) as exc:
        if not is_image_size_failure(exc):
            raise
        expected = vision_image_size(model)
        built_for = f" (its vision tower is built for {expected}x{expected} px)" if expected else ""
        reason = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"model {model_path}: its processor cannot take {height}x{width} BEV images{built_for}: {reason}; "
            "use a checkpoint whose processor resizes images to its vision tower, or BEVs of the size it takes"
        ) from None
