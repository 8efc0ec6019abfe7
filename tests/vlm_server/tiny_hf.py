"""A tiny randomly initialised LLaVA (CLIP vision + Llama text) and processor, built offline."""

from __future__ import annotations

ANSWER_WORDS = ["{", "}", '"throttle"', '"steer"', '"brake"', ":", ",", "0.5", "-0.2", "0.0"]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def build_tiny_llava(seed: int = 0):
    """``(processor, model)``: a word-level tokenizer of 64 words, 32 px images, 1-layer towers."""
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

    words = ["<unk>", "<pad>", "<s>", "</s>", "<image>", "user", "assistant", *ANSWER_WORDS]
    words += [f"w{i}" for i in range(64 - len(words))]
    tokenizer = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )
    vision = CLIPVisionConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=16
    )
    text = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512, pad_token_id=1, bos_token_id=2, eos_token_id=3,
    )
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=4, vision_feature_layer=-1)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=fast,
        patch_size=16,
        vision_feature_select_strategy="full",
        chat_template=CHAT_TEMPLATE,
        num_additional_image_tokens=0,
    )
    return processor, model
