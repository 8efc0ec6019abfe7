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
