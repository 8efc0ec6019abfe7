"""A tiny random-weight LLaVA checkpoint for tests and CPU benchmarks (no download).

The tokenizer is character-level over printable ASCII, so every prompt and JSON answer is
representable and the model can in principle learn the answer format; the vision tower takes
32 px images and its processor resizes any BEV to that. About 60k parameters: a training step
takes milliseconds on one CPU core. It is a stand-in for pipelines, never a driver.
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
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *string.printable])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )
    vision = CLIPVisionConfig(
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=IMAGE_PX,
        patch_size=16,
    )
    text = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=vocab["<pad>"],
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
    )
    config = LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=vocab["<image>"], vision_feature_layer=-1
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = vocab["<pad>"]
    model.generation_config.eos_token_id = vocab["</s>"]
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_PX},
        crop_size={"height": IMAGE_PX, "width": IMAGE_PX},
        do_resize=resize_images,
        do_center_crop=resize_images,
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=fast,
        patch_size=16,
        vision_feature_select_strategy="full",
        chat_template=chat_template,
        num_additional_image_tokens=0,
    )
    directory = Path(directory)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


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
