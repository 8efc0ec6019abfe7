"""A tiny random-weight LLaVA checkpoint for tests and CPU benchmarks (no download).

The tokenizer is character-level over printable ASCII, so every prompt and JSON answer is
representable and the model can in principle learn the answer format; the vision tower takes
32 px images and its processor resizes any BEV to that. About 60k parameters: a training step
takes milliseconds on one CPU core. It stands in for a pretrained checkpoint with a general
tokenizer in pipeline tests, never a driver; ``found_rl.vlm.scratch`` builds the advisor that
is meant to learn (``found-rl vlm init``).
"""

from __future__ import annotations

import string
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
SPECIAL_TOKENS = ("<unk>", "<pad>", "<s>", "</s>", "<image>")
IMAGE_PX = 32


def build_tiny_vlm(
    directory: str | Path,
    *,
    hidden_size: int = 32,
    layers: int = 2,
    seed: int = 0,
    resize_images: bool = True,
    chat_template: str | None = CHAT_TEMPLATE,
) -> Path:
    """Write a tiny LLaVA (model, processor, chat template) to ``directory``; returns it.

    Args:
        resize_images: False builds a processor that passes images through at their own size,
            which the 32 px vision tower then refuses (for the server's image-size check).
        chat_template: None saves a checkpoint without one (for the chat-template check).
    """
    from found_rl.vlm.scratch import Architecture, build_llava

    architecture = Architecture(
        image_px=IMAGE_PX, patch_px=16, vision_hidden=hidden_size, vision_layers=1, vision_heads=2,
        text_hidden=hidden_size, text_layers=layers, text_heads=2, mlp_ratio=2,
    )
    build_llava(
        directory, character_tokenizer(), architecture, chat_template, seed=seed, resize_images=resize_images
    )
    return Path(directory)


def character_tokenizer():
    """One token per printable ASCII character, plus the special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *string.printable])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )


def write_tiny_dataset(directory: str | Path, episodes: int = 4, steps: int = 5, image_px: int = 192, seed: int = 0):
    """An expert dataset of ``episodes`` x ``steps`` chat samples with random blocky BEVs and varied actions.

    Blocky (8 px cells) images are varied yet quick to PNG-encode. Returns the folder.
    """
    import numpy as np

    from found_rl.dataset import ShardWriter, chat_sample, clip_caption

    rng = np.random.default_rng(seed)
    with ShardWriter(directory, samples_per_shard=7) as writer:
        for episode in range(episodes):
            for step in range(steps):
                acc, steer = float(rng.uniform(-1, 1)), float(rng.uniform(-0.5, 0.5))
                command, speed = int(rng.choice([1, 2, 3, 4])), float(rng.uniform(0, 8))
                target = (float(rng.uniform(2, 10)), float(rng.uniform(-3, 3)))
                cells = rng.integers(0, 256, (image_px // 8, image_px // 8, 3), dtype=np.uint8)
                writer.write(
                    bev_rgb=np.repeat(np.repeat(cells, 8, axis=0), 8, axis=1),
                    masks=np.zeros((15, 4, 4), dtype=np.uint8),
                    metadata={
                        "state": [0.0] * 10,
                        "command": command,
                        "speed_mps": speed,
                        "action": [acc, steer],
                        "executed_action": [acc, steer],
                        "target_ego": list(target),
                        "meta": {"route_id": "synthetic", "episode": episode, "step": step, "is_perturbed": False},
                    },
                    caption=clip_caption(command, speed, acc, steer),
                    chat=chat_sample(speed, target, command, acc, steer),
                )
    return Path(directory)
