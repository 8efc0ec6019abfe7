"""CLIP models to fine-tune: found-rl's small CPU configs and any open_clip architecture.

The small configs are sized for a CPU run of minutes on the 192 px BEV (area-resized to 64
px): a 4 x 4 patch ViT or a thin ModifiedResNet, and a 2-layer text tower whose context holds
the longest of the 720 captions (34 tokens). Larger models come from open_clip by name
(``ViT-B-16``) with a pretrained tag or weights file, on a GPU.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from found_rl.errors import UserError, as_user_error
from vlm_server.anchors import anchor_captions
from vlm_server.backends.hf_checks import is_image_size_failure
from vlm_server.clip_checkpoint import (
    FORMAT,
    build_model,
    load_model,
    read_checkpoint,
    text_tokenizer,
    widen_image_stem,
)
from vlm_server.clip_inputs import DEFAULT_IMAGE_INPUT, image_input_named
from vlm_server.clip_preprocess import OPENAI_MEAN, OPENAI_STD
from vlm_server.torch_files import UnreadableTorchFileError, load_torch_file

_TEXT_TINY = {"context_length": 36, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 2}
SMALL_CONFIGS: dict[str, dict[str, Any]] = {
    "found-rl-vit-tiny": {
        "embed_dim": 128,
        "vision_cfg": {"image_size": 64, "layers": 3, "width": 128, "patch_size": 16, "head_width": 32},
        "text_cfg": _TEXT_TINY,
    },
    "found-rl-vit-small": {
        "embed_dim": 128,
        "vision_cfg": {"image_size": 64, "layers": 4, "width": 192, "patch_size": 8, "head_width": 32},
        "text_cfg": _TEXT_TINY,
    },
    "found-rl-rn-tiny": {
        "embed_dim": 128,
        "vision_cfg": {"image_size": 64, "layers": [1, 1, 1, 1], "width": 16, "head_width": 32},
        "text_cfg": _TEXT_TINY,
    },
}
MODEL_IMAGE_SIZE_DEFAULT = 192  # open_clip architectures: the BEV side, as Found-RL's ViT-B-16 (METHOD §3)


@dataclass
class ClipModel:
    """A model ready to train and what a checkpoint must record to rebuild and feed it."""

    model: torch.nn.Module
    model_name: str
    model_cfg: dict[str, Any]
    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


def default_image_size(model_name: str) -> int:
    if model_name in SMALL_CONFIGS:
        return int(SMALL_CONFIGS[model_name]["vision_cfg"]["image_size"])
    return MODEL_IMAGE_SIZE_DEFAULT


def create_clip_model(
    model_name: str, pretrained: str | None, image_size: int, image_input: str = DEFAULT_IMAGE_INPUT
) -> ClipModel:
    """Build ``model_name`` at ``image_size``, randomly initialised or from ``pretrained``.

    Args:
        model_name: a key of ``SMALL_CONFIGS`` or an open_clip architecture (``open_clip.list_models()``).
        pretrained: None (from scratch), an open_clip tag (downloads), an open_clip weights file,
            or a ``found-rl clip finetune`` checkpoint of the same architecture, size and image input.
        image_size: the model's input side, px.
        image_input: ``vlm_server.clip_inputs.IMAGE_INPUTS`` name; a stack of frames widens the
            image tower's first convolution (``widen_image_stem``).

    Raises:
        ValueError: unknown name, an image size the architecture cannot take, or a checkpoint
            of another architecture or image input (each named).
    """
    import open_clip

    frames = image_input_named(image_input, "--image-input").frames

    if model_name in SMALL_CONFIGS:
        cfg = copy.deepcopy(SMALL_CONFIGS[model_name])
    else:
        cfg = open_clip.get_model_config(model_name)
        if cfg is None:
            raise UserError(
                f"--model {model_name!r}: not one of found-rl's {sorted(SMALL_CONFIGS)} nor an open_clip "
                "architecture (see open_clip.list_models())"
            )
        cfg = copy.deepcopy(cfg)
    _check_image_size(model_name, cfg, image_size)
    cfg["vision_cfg"]["image_size"] = image_size
    _check_context_length(model_name, cfg)
    mean, std = OPENAI_MEAN, OPENAI_STD
    if pretrained is not None and _is_found_rl_checkpoint(pretrained):
        with as_user_error():  # --pretrained is no CLIP checkpoint
            checkpoint = read_checkpoint(pretrained)
        if checkpoint.model_name != model_name or checkpoint.image_size != image_size:
            raise UserError(
                f"--pretrained {pretrained}: holds {checkpoint.model_name} at {checkpoint.image_size} px, "
                f"not --model {model_name} at --image-size {image_size}"
            )
        if checkpoint.image_input != image_input:
            raise UserError(
                f"--pretrained {pretrained}: reads image input {checkpoint.image_input!r}, "
                f"not --image-input {image_input}"
            )
        with as_user_error():
            model = _freeze_token_embedding(load_model(checkpoint, pretrained), model_name)
        return ClipModel(model.train(), model_name, checkpoint.model_cfg, image_size, checkpoint.mean, checkpoint.std)
    if pretrained is None:
        model = build_model(cfg)
    elif model_name in SMALL_CONFIGS:
        raise UserError(
            f"--pretrained {pretrained}: {model_name} has no open_clip weights; pass a found-rl checkpoint or none"
        )
    else:
        tag_cfg = open_clip.get_pretrained_cfg(model_name, pretrained) or {}
        if tag_cfg.get("quick_gelu"):
            cfg["quick_gelu"] = True  # as open_clip builds it for this tag; the checkpoint must rebuild the same
        model = open_clip.create_model(
            model_name, pretrained=pretrained, force_image_size=image_size, force_quick_gelu=bool(cfg.get("quick_gelu"))
        )
        preprocess = getattr(model.visual, "preprocess_cfg", {}) or {}
        mean = tuple(preprocess.get("mean", OPENAI_MEAN))
        std = tuple(preprocess.get("std", OPENAI_STD))
    model = widen_image_stem(model, frames)
    _check_forward(model_name, model, image_size, frames)
    return ClipModel(_freeze_token_embedding(model, model_name).train(), model_name, cfg, image_size, mean, std)


def _freeze_token_embedding(model: torch.nn.Module, model_name: str) -> torch.nn.Module:
    """Small configs train from scratch with a fixed random token embedding.

    The 720 captions use ~60 of the 49408 token rows; a fixed random embedding of them serves
    a 2-layer text tower as well, and skips a 6.3M-parameter AdamW update per step (measured:
    the optimiser step went from ~0.6 s to ~0.12 s of a ~3 s CPU step).
    """
    if model_name in SMALL_CONFIGS:
        model.token_embedding.requires_grad_(False)
    return model


def _is_found_rl_checkpoint(pretrained: str) -> bool:
    """Whether ``--pretrained`` names a found-rl CLIP checkpoint (else open_clip reads it: a weights
    file of its own format, or a tag)."""
    path = Path(pretrained)
    if not path.is_file():
        return False
    with as_user_error():  # a file the user cannot read
        try:
            data = load_torch_file(path, "--pretrained", weights_only=True, mmap=True)
        except UnreadableTorchFileError:  # another format: open_clip's to read, or to refuse naming it
            return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def _check_image_size(model_name: str, cfg: dict[str, Any], image_size: int) -> None:
    vision = cfg.get("vision_cfg", {})
    if image_size < 16:
        raise UserError(f"--image-size must be >= 16 px, got {image_size}")
    if isinstance(vision.get("layers"), (list, tuple)) and image_size % 32:
        raise UserError(f"--image-size {image_size}: {model_name} is a ResNet tower and needs a multiple of 32")
    patch = vision.get("patch_size")
    if isinstance(patch, int) and not isinstance(vision.get("layers"), (list, tuple)) and image_size % patch:
        raise UserError(
            f"--image-size {image_size}: {model_name} cuts {patch} px patches and needs a multiple of {patch}"
        )


def _check_context_length(model_name: str, cfg: dict[str, Any]) -> None:
    """Refuse a text tower that would truncate a caption (the action words come last).

    A caption fits when its tokens leave at least one padding position at the end.
    """
    tokens = text_tokenizer(cfg)(anchor_captions())
    if bool((tokens[:, -1] != 0).any()):
        raise UserError(
            f"--model {model_name}: its text context of {tokens.shape[1]} tokens cannot hold the longest "
            "METHOD §3 caption (34 tokens with start and end)"
        )


def _check_forward(model_name: str, model: torch.nn.Module, image_size: int, frames: int) -> None:
    """One pass of a blank image through the image tower: refuse an ``--image-size`` it cannot take.

    Only a size mismatch is the user's; any other failure (out of memory, a bug) keeps its traceback.
    """
    try:
        with torch.no_grad():
            model.eval().encode_image(torch.zeros(1, 3 * frames, image_size, image_size))
    except (ValueError, RuntimeError) as exc:
        if not is_image_size_failure(exc):
            raise
        raise UserError(f"--image-size {image_size}: {model_name} cannot take it ({str(exc)[:200]})") from None
