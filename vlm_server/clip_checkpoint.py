"""The fine-tuned CLIP checkpoint: its contents, how it is read and checked, and the model it builds.

One ``torch.save`` file holds everything a server needs to score with the model exactly as it
was trained (``found-rl clip finetune`` writes it, the ``openclip`` backend reads it)::

    format          "found-rl-clip", format_version 2 (1 is read: no context, image_input, objective)
    model_name      label of the architecture ("found-rl-vit-tiny", "ViT-B-16", ...)
    model_cfg       the open_clip model config (embed_dim, vision_cfg, text_cfg, ...)
    image_size      side of the model's input, px
    input_size      side of the RGB BEV it was trained from (what clients send), px
    mean, std       pixel normalisation
    anchors_sha256  hash of the 720 METHOD §3 captions it was trained on
    context         the prior's context definition (``clip_inputs.CONTEXTS``)
    image_input     what the image tower reads (``clip_inputs.IMAGE_INPUTS``)
    objective       "contrastive" (softmax = p(a | image, context)) or "logit-adjusted"
                    (softmax ∝ p(a | image, context) / p(a | context): the image's evidence)
    state_dict      the weights
    training        optional: optimiser, schedule, progress, split (resuming only)

A checkpoint is refused, with the file named, when its architecture, image size, caption
anchors, context definition or image input differ from what the server is asked to serve.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vlm_server.anchors import anchor_captions
from vlm_server.clip_inputs import (
    DEFAULT_CONTEXT,
    DEFAULT_IMAGE_INPUT,
    OBJECTIVES,
    context_named,
    image_input_named,
)
from vlm_server.torch_files import load_torch_file

FORMAT = "found-rl-clip"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
REQUIRED_FIELDS = (
    "model_name", "model_cfg", "image_size", "input_size", "mean", "std", "anchors_sha256", "state_dict"
)


def anchors_sha256(captions: list[str] | None = None) -> str:
    """Hash of the caption anchors (default: this version's 720 METHOD §3 captions)."""
    text = "\n".join(anchor_captions() if captions is None else captions)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ClipCheckpoint:
    """A fine-tuned open_clip model and the preprocessing it was trained with (see module doc)."""

    model_name: str
    model_cfg: dict[str, Any]
    image_size: int
    input_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    anchors_sha256: str
    state_dict: dict[str, torch.Tensor]
    training: dict[str, Any] = field(default_factory=dict)
    context: str = DEFAULT_CONTEXT
    image_input: str = DEFAULT_IMAGE_INPUT
    objective: str = "contrastive"

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model_name": self.model_name,
            "model_cfg": self.model_cfg,
            "image_size": self.image_size,
            "input_size": self.input_size,
            "mean": list(self.mean),
            "std": list(self.std),
            "anchors_sha256": self.anchors_sha256,
            "context": self.context,
            "image_input": self.image_input,
            "objective": self.objective,
            "state_dict": self.state_dict,
            "training": self.training,
        }


def read_checkpoint(path: str | Path) -> ClipCheckpoint:
    """Load and check a checkpoint file (on the CPU).

    Raises:
        MissingPathError: no such file (a ``ValueError`` and a ``FileNotFoundError``).
        ValueError: truncated or corrupt, not a found-rl CLIP checkpoint, or a field is missing;
            the message names the file.
    """
    data = load_torch_file(path, "CLIP checkpoint")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(
            f"CLIP checkpoint {path}: format is {found!r}, expected {FORMAT!r} "
            "(written by `found-rl clip finetune`; a plain open_clip weights file goes in pretrained=)"
        )
    if data.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(
            f"CLIP checkpoint {path}: format_version {data.get('format_version')!r}, "
            f"this server reads {list(READABLE_VERSIONS)}"
        )
    missing = [key for key in REQUIRED_FIELDS if key not in data]
    if missing:
        raise ValueError(f"CLIP checkpoint {path}: lacks {missing}")
    context = str(data.get("context", DEFAULT_CONTEXT))
    image_input = str(data.get("image_input", DEFAULT_IMAGE_INPUT))
    objective = str(data.get("objective", "contrastive"))
    context_named(context, f"CLIP checkpoint {path}")
    image_input_named(image_input, f"CLIP checkpoint {path}")
    if objective not in OBJECTIVES:
        raise ValueError(f"CLIP checkpoint {path}: objective {objective!r} is not one of {list(OBJECTIVES)}")
    return ClipCheckpoint(
        model_name=str(data["model_name"]),
        model_cfg=dict(data["model_cfg"]),
        image_size=int(data["image_size"]),
        input_size=int(data["input_size"]),
        mean=tuple(float(v) for v in data["mean"]),
        std=tuple(float(v) for v in data["std"]),
        anchors_sha256=str(data["anchors_sha256"]),
        state_dict=dict(data["state_dict"]),
        training=dict(data.get("training") or {}),
        context=context,
        image_input=image_input,
        objective=objective,
    )


def check_compatible(
    checkpoint: ClipCheckpoint,
    path: str | Path,
    model_name: str | None,
    image_size: int | None,
    context: str = DEFAULT_CONTEXT,
    image_input: str = DEFAULT_IMAGE_INPUT,
) -> None:
    """Refuse a checkpoint that is not the model, image size, anchor set, context or input expected.

    Args:
        checkpoint: the loaded checkpoint.
        path: its file (named in errors).
        model_name: the architecture the server was told to serve, or None for "whatever it holds".
        image_size: the side of the images clients will send, or None for the checkpoint's own.
        context: the context definition the server is configured for.
        image_input: the image input the server is configured for (what its clients send).
    """
    if model_name is not None and model_name != checkpoint.model_name:
        raise ValueError(
            f"CLIP checkpoint {path} holds a {checkpoint.model_name!r} model, not model_name={model_name!r} "
            "(drop model_name or pass the checkpoint's)"
        )
    if image_size is not None and image_size != checkpoint.input_size:
        raise ValueError(
            f"CLIP checkpoint {path} was trained on {checkpoint.input_size} px BEV images "
            f"(resized to {checkpoint.image_size} px), not image_size={image_size}"
        )
    if checkpoint.anchors_sha256 != anchors_sha256():
        raise ValueError(
            f"CLIP checkpoint {path} was trained on another caption anchor set "
            f"(sha256 {checkpoint.anchors_sha256[:12]}…, this server's 720 METHOD §3 anchors are "
            f"{anchors_sha256()[:12]}…): fine-tune it again on data captioned by this version"
        )
    if checkpoint.context != context:
        raise ValueError(
            f"CLIP checkpoint {path} was trained with context {checkpoint.context!r} "
            f"({context_named(checkpoint.context, str(path)).description}), the server is configured for "
            f"context={context!r} ({context_named(context, 'context').description})"
        )
    if checkpoint.image_input != image_input:
        raise ValueError(
            f"CLIP checkpoint {path} was trained on image input "
            f"{image_input_named(checkpoint.image_input, str(path)).describe()}, the server is configured for "
            f"image_input={image_input_named(image_input, 'image_input').describe()}"
        )


def build_model(model_cfg: dict[str, Any]) -> torch.nn.Module:
    """A randomly initialised open_clip model from its config (as ``open_clip.create_model`` builds it)."""
    import open_clip

    cfg = copy.deepcopy(model_cfg)
    is_custom_text = bool(cfg.pop("custom_text", False)) or "hf_model_name" in cfg.get("text_cfg", {})
    try:
        return open_clip.CustomTextCLIP(**cfg) if is_custom_text else open_clip.CLIP(**cfg)
    except TypeError as exc:
        raise ValueError(f"model_cfg: not an open_clip CLIP config ({exc})") from None


def load_model(checkpoint: ClipCheckpoint, path: str | Path) -> torch.nn.Module:
    """The checkpoint's model with its weights, in eval mode on the CPU.

    Raises:
        ValueError: the weights do not fit the architecture (names the file and the first keys).
    """
    model = build_model(checkpoint.model_cfg)
    model = widen_image_stem(model, image_input_named(checkpoint.image_input, f"CLIP checkpoint {path}").frames)
    try:
        result = model.load_state_dict(checkpoint.state_dict, strict=False)
    except RuntimeError as exc:  # a tensor of another shape
        raise ValueError(
            f"CLIP checkpoint {path}: weights do not fit its {checkpoint.model_name} config ({_first_line(exc)})"
        ) from None
    problems = []
    if result.missing_keys:
        problems.append(f"missing {result.missing_keys[:3]}")
    if result.unexpected_keys:
        problems.append(f"unexpected {result.unexpected_keys[:3]}")
    if problems:
        raise ValueError(
            f"CLIP checkpoint {path}: weights do not fit its {checkpoint.model_name} config ({'; '.join(problems)})"
        )
    return model.eval()


def widen_image_stem(model: torch.nn.Module, frames: int) -> torch.nn.Module:
    """Let an open_clip image tower take ``frames`` stacked RGB images (``3 * frames`` channels).

    The first convolution (``visual.conv1`` in open_clip's ViT and ModifiedResNet) gets a kernel
    per frame: o_t keeps the original weights (the last frame, as stacks are oldest first) and the
    past frames start at zero, so a pretrained tower starts out exactly as the one-frame model.

    Raises:
        ValueError: the tower has no ``conv1`` taking 3 channels (names the tower's class).
    """
    if frames == 1:
        return model
    stem = getattr(model.visual, "conv1", None)
    if not isinstance(stem, torch.nn.Conv2d) or stem.in_channels != 3:
        raise ValueError(
            f"image input with {frames} frames: the {type(model.visual).__name__} image tower has no 3-channel "
            "conv1 to widen (use an open_clip ViT or ModifiedResNet)"
        )
    wide = torch.nn.Conv2d(
        3 * frames,
        stem.out_channels,
        stem.kernel_size,
        stem.stride,
        stem.padding,
        bias=stem.bias is not None,
    )
    with torch.no_grad():
        wide.weight.zero_()
        wide.weight[:, -3:] = stem.weight
        if stem.bias is not None:
            wide.bias.copy_(stem.bias)
    model.visual.conv1 = wide
    return model


def text_tokenizer(model_cfg: dict[str, Any]) -> Any:
    """The tokenizer the model's text tower was built for (context length from its config)."""
    import open_clip

    text_cfg = model_cfg.get("text_cfg", {})
    context_length = int(text_cfg.get("context_length", 77))
    if text_cfg.get("hf_tokenizer_name"):
        return open_clip.HFTokenizer(text_cfg["hf_tokenizer_name"], context_length=context_length)
    return open_clip.SimpleTokenizer(context_length=context_length)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
