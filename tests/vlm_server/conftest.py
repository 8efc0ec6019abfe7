"""Fixtures for the advisor server tests: config and image factories, tiny open_clip and LLaVA models.

Helpers are fixtures (not imports) so the tests work under any pytest import mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vlm_server.config import BackendConfig, BatchingConfig, ServerConfig

TINY_CLIP_NAME = "found-rl-tiny-test-clip"
TINY_CLIP_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {
        "image_size": 32,
        "layers": 1,
        "width": 32,
        "patch_size": 16,
        "head_width": 16,
    },
    "text_cfg": {
        "context_length": 32,
        "vocab_size": 49408,
        "width": 32,
        "heads": 2,
        "layers": 1,
    },
}
LLAVA_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)
LLAVA_ANSWER_WORDS = [
    "{",
    "}",
    '"throttle"',
    '"steer"',
    '"brake"',
    ":",
    ",",
    "0.5",
    "-0.2",
    "0.0",
]


def _server_config(**overrides) -> ServerConfig:
    batching = overrides.pop("batching", {"max_batch_size": 8, "max_wait_ms": 2.0})
    options = overrides.pop("options", {"base_ms": 1.0, "per_item_ms": 0.0})
    data = {
        "advisor": BackendConfig(
            spec="fixed-cost", options=options, batching=BatchingConfig(**batching)
        )
    }
    data.update(overrides)
    return ServerConfig(**data)


def _rgb(height: int = 8, width: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(
        0, 256, size=(height, width, 3), dtype=np.uint8
    )


@pytest.fixture
def server_config():
    """Factory: a loopback ``ServerConfig`` with a fast fixed-cost advisor unless overridden."""
    return _server_config


@pytest.fixture
def rgb():
    """Factory: a random ``[H, W, 3]`` uint8 image."""
    return _rgb


@pytest.fixture(scope="session")
def tiny_clip_config_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("open_clip") / f"{TINY_CLIP_NAME}.json"
    path.write_text(json.dumps(TINY_CLIP_CONFIG))
    return path


@pytest.fixture(scope="session")
def tiny_clip_scorer(tiny_clip_config_path):
    """A loaded ``OpenClipScorer`` with random weights at 64 px (shared: loading is the slow part)."""
    import torch

    from vlm_server.backends.clip import OpenClipScorer

    torch.manual_seed(0)
    scorer = OpenClipScorer(
        model_name=TINY_CLIP_NAME,
        pretrained=None,
        model_config_path=str(tiny_clip_config_path),
        image_size=64,
    )
    scorer.load()
    return scorer


@pytest.fixture(scope="session")
def tiny_llava():
    """``(processor, model)``: random 1-layer LLaVA (CLIP vision + Llama), 64-word tokenizer, 32 px images."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    words = [
        "<unk>",
        "<pad>",
        "<s>",
        "</s>",
        "<image>",
        "user",
        "assistant",
        *LLAVA_ANSWER_WORDS,
    ]
    words += [f"w{i}" for i in range(64 - len(words))]
    tokenizer = Tokenizer(
        models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>")
    )
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )
    vision = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=16,
    )
    text = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=3,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=4,
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=fast,
        patch_size=16,
        vision_feature_select_strategy="full",
        chat_template=LLAVA_CHAT_TEMPLATE,
        num_additional_image_tokens=0,
    )
    return processor, model
