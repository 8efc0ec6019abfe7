"""VLM advisors built from scratch (``found-rl vlm init``): a small LLaVA that 2 CPU cores can train.

A laptop has no pretrained VLM, but the advisor's task is narrow: read a 192 px BEV and a
10-token prompt, write 11 answer tokens. So the model is a LLaVA (a CLIP vision tower, a
two-layer projector, a Llama decoder) sized for that task: the BEV is downscaled by the
processor (64 px for ``small``: road, route, markings, cars, walkers and light colours stay
visible), cut into 8 px patches (64 image tokens: at 16 px, 16 tokens, one token covered a
whole junction approach and the model could not tell its own light from the crossing
road's; docs/vlm.md has the study), and the tokenizer is ``advisor_tokenizer``'s, so a whole
training row is about 90 tokens. Two busy CPU cores train ``small`` at about 80 samples a
second. Its weights are random (seeded); ``vlm finetune`` trains every one of them
(``--full``, at the learning rate the advisor card suggests).

The folder is an ordinary transformers checkpoint: ``vlm finetune``, ``vlm evaluate`` and the
server's ``hf`` backend load it through ``AutoModelForImageTextToText`` like any other, and its
advisor card (``found_rl_advisor.json``) marks it untrained so fine-tuning picks full training.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from found_rl.errors import UserError
from vlm_server.backends.hf_checks import ADVISOR_CARD, DEFAULT_IMAGE_HW

INIT_MARK = "found-rl vlm init"
"""``trained_by`` of an untrained model's advisor card."""


@dataclass(frozen=True)
class Architecture:
    """The sizes of a from-scratch LLaVA.

    Attributes:
        image_px: side the processor resizes every BEV to (the vision tower's input).
        patch_px: vision patch side; ``(image_px / patch_px)²`` image tokens reach the decoder.
        vision_hidden, vision_layers, vision_heads: the CLIP vision transformer.
        text_hidden, text_layers, text_heads: the Llama decoder.
        mlp_ratio: feed-forward width over hidden width, both towers.
        learning_rate: the peak rate ``vlm finetune`` uses for it unless told otherwise.
    """

    image_px: int
    patch_px: int
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    text_hidden: int
    text_layers: int
    text_heads: int
    mlp_ratio: int = 4
    learning_rate: float = 1e-3

    def __post_init__(self) -> None:
        if self.image_px % self.patch_px:
            raise ValueError(f"image_px {self.image_px} must be a multiple of patch_px {self.patch_px}")
        for tower in ("vision", "text"):
            hidden, heads = getattr(self, f"{tower}_hidden"), getattr(self, f"{tower}_heads")
            if hidden % heads:
                raise ValueError(f"{tower}_hidden {hidden} must be a multiple of {tower}_heads {heads}")

    @property
    def image_tokens(self) -> int:
        return (self.image_px // self.patch_px) ** 2


PRESETS: dict[str, Architecture] = {
    "tiny": Architecture(
        image_px=32, patch_px=16, vision_hidden=32, vision_layers=1, vision_heads=2,
        text_hidden=32, text_layers=1, text_heads=2, mlp_ratio=2, learning_rate=3e-3,
    ),
    "small": Architecture(
        image_px=64, patch_px=8, vision_hidden=128, vision_layers=2, vision_heads=4,
        text_hidden=128, text_layers=2, text_heads=4, mlp_ratio=3, learning_rate=2e-3,
    ),
}
"""``tiny``: tests (a training step in milliseconds); ``small``: the 30-minute CPU run."""

HEAD_PX = 32
"""Hidden width per attention head when ``--hidden`` resizes a preset (both towers)."""


@dataclass(frozen=True)
class ArchitectureChanges:
    """What ``vlm init``'s size flags change in a preset (None: the preset's own)."""

    image_px: int | None = None
    patch_px: int | None = None
    hidden: int | None = None
    layers: int | None = None

    def apply(self, base: Architecture) -> Architecture:
        """``base`` with these changes; a width change keeps ``HEAD_PX`` per head.

        Raises:
            UserError: a combination the towers cannot take, naming the flags.
        """
        changes: dict[str, int] = {}
        if self.image_px is not None:
            changes["image_px"] = self.image_px
        if self.patch_px is not None:
            changes["patch_px"] = self.patch_px
        if self.hidden is not None:
            if self.hidden % HEAD_PX:
                raise UserError(
                    f"--hidden must be a multiple of {HEAD_PX} (the width of one attention head), got {self.hidden}"
                )
            heads = self.hidden // HEAD_PX
            changes.update(vision_hidden=self.hidden, text_hidden=self.hidden, vision_heads=heads, text_heads=heads)
        if self.layers is not None:
            changes.update(vision_layers=self.layers, text_layers=self.layers)
        image_px, patch_px = changes.get("image_px", base.image_px), changes.get("patch_px", base.patch_px)
        if image_px % patch_px:
            raise UserError(f"--image-px {image_px} must be a multiple of --patch-px {patch_px}")
        return replace(base, **changes)

    def as_dict(self) -> dict[str, int]:
        """The flags that were given, for the advisor card."""
        return {name: value for name, value in asdict(self).items() if value is not None}


def build_llava(
    directory: str | Path,
    tokenizer: Any,
    architecture: Architecture,
    chat_template: str | None,
    *,
    seed: int = 0,
    resize_images: bool = True,
) -> Any:
    """Save a random-weight LLaVA with ``tokenizer`` and a resizing CLIP processor to ``directory``; returns the model.

    Args:
        resize_images: False builds a processor that passes images through at their own size
            (which the vision tower then refuses; for the server's image-size check).
        chat_template: None saves a checkpoint without one (for the chat-template check).
    """
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    vocab_size = len(tokenizer)
    vision = CLIPVisionConfig(
        hidden_size=architecture.vision_hidden,
        intermediate_size=architecture.mlp_ratio * architecture.vision_hidden,
        num_hidden_layers=architecture.vision_layers,
        num_attention_heads=architecture.vision_heads,
        image_size=architecture.image_px,
        patch_size=architecture.patch_px,
    )
    text = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=architecture.text_hidden,
        intermediate_size=architecture.mlp_ratio * architecture.text_hidden,
        num_hidden_layers=architecture.text_layers,
        num_attention_heads=architecture.text_heads,
        num_key_value_heads=architecture.text_heads,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids(tokenizer.image_token),
        vision_feature_layer=-1,  # a from-scratch tower has no better penultimate layer
        vision_feature_select_strategy="default",  # patch tokens only, the class token dropped
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": architecture.image_px},
        crop_size={"height": architecture.image_px, "width": architecture.image_px},
        do_resize=resize_images,
        do_center_crop=resize_images,
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=architecture.patch_px,
        vision_feature_select_strategy="default",
        chat_template=chat_template,
        num_additional_image_tokens=1,  # the class token the strategy drops
    )
    directory = Path(directory)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return model


def init_advisor(
    directory: str | Path, preset: str = "small", seed: int = 0, changes: ArchitectureChanges | None = None
) -> dict[str, Any]:
    """Write an untrained advisor VLM of ``preset`` (resized by ``changes``) to ``directory``; returns its advisor card.

    Raises:
        ValueError: an unknown preset (naming the known ones).
    """
    from found_rl.vlm.advisor_tokenizer import CHAT_TEMPLATE, advisor_tokenizer

    if preset not in PRESETS:
        raise UserError(f"--preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    changes = changes or ArchitectureChanges()
    architecture = changes.apply(PRESETS[preset])
    model = build_llava(directory, advisor_tokenizer(), architecture, CHAT_TEMPLATE, seed=seed)
    card = {
        "image_hw": list(DEFAULT_IMAGE_HW),
        "trained_by": INIT_MARK,
        "preset": preset,
        "changes": changes.as_dict(),
        "architecture": asdict(architecture),
        "image_tokens": architecture.image_tokens,
        "parameters": sum(p.numel() for p in model.parameters()),
        "seed": seed,
        "steps": 0,
        "finetune": {"method": "full", "learning_rate": architecture.learning_rate},
    }
    (Path(directory) / ADVISOR_CARD).write_text(json.dumps(card, indent=2))
    return card


def untrained_card(model_dir: str | Path) -> dict[str, Any] | None:
    """The advisor card of a model that ``vlm init`` wrote and nothing has trained yet, else None."""
    path = Path(model_dir) / ADVISOR_CARD
    if not path.is_file():
        return None
    try:
        card = json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    return card if isinstance(card, dict) and card.get("trained_by") == INIT_MARK else None
