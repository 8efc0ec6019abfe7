"""The tests' tiny random-weight LLaVA (no download): ``found_rl.vlm.scratch.build_llava`` at tiny sizes.

The tokenizer is character-level over printable ASCII, so every prompt and JSON answer is
representable (and no answer template applies: the server's ``generate`` path decodes); the
vision tower takes 32 px images and its processor resizes any BEV to that. About 60k
parameters: a training step takes milliseconds on one CPU core. It stands in for a pretrained
checkpoint with a general tokenizer in pipeline tests, never a driver.
"""

from __future__ import annotations

import string
from dataclasses import replace
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
SPECIAL_TOKENS = ("<unk>", "<pad>", "<s>", "</s>", "<image>")


def build_tiny_vlm(directory: str | Path, *, seed: int = 0, chat_template: str | None = CHAT_TEMPLATE) -> Path:
    """Write a tiny LLaVA (model, processor, chat template) to ``directory``; returns it.

    Args:
        chat_template: None saves a checkpoint without one (for the chat-template check).
    """
    from found_rl.vlm.scratch import PRESETS, build_llava

    architecture = replace(PRESETS["tiny"], text_layers=2)  # 32 px images, 16 px patches, width 32
    build_llava(directory, character_tokenizer(), architecture, chat_template, seed=seed)
    return Path(directory)


def load_tiny_vlm(directory: str | Path):
    """``(processor, model)`` of a checkpoint :func:`build_tiny_vlm` wrote, the model in eval mode."""
    from transformers import AutoProcessor, LlavaForConditionalGeneration

    return AutoProcessor.from_pretrained(directory), LlavaForConditionalGeneration.from_pretrained(directory).eval()


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
