"""Training batches for supervised fine-tuning: the server's prompt, then the answer, loss on the answer only.

The prompt part of each row is what ``vlm_server``'s Hugging Face advisor feeds the model for
the same frame: the same chat text (``chat_prompt_text``), the same image, through the same
processor, so its tokens and pixels are identical (a test pins this). The answer is tokenised
on its own and appended with the end-of-sequence token, which teaches the model to stop; its
labels are the answer tokens, every other label is ``IGNORE_INDEX``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from found_rl.errors import UserError
from found_rl.vlm.examples import ChatExample
from vlm_server.backends.hf_vlm import chat_prompt_text

IGNORE_INDEX = -100
"""Label of tokens outside the loss (PyTorch's cross-entropy default)."""


def encode_batch(processor: Any, examples: Sequence[ChatExample]) -> dict[str, torch.Tensor]:
    """Model inputs and labels for ``examples``, right-padded.

    Returns:
        The processor's outputs (``pixel_values`` and any model-specific image tensors as the
        processor made them), with ``input_ids``, ``attention_mask`` and every other per-token
        tensor of shape ``(B, L)`` extended by the answer, plus ``labels`` ``(B, L)`` int64.
    """
    tokenizer = getattr(processor, "tokenizer", processor)
    texts = [chat_prompt_text(processor, example.prompt) for example in examples]
    images = [Image.fromarray(example.image()) for example in examples]
    prompts = processor(text=texts, images=images, return_tensors="pt", padding=True, padding_side="right")
    answers = tokenizer([example.answer for example in examples], add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    if eos is None:
        raise UserError("the tokenizer has no eos_token, so the model could not learn where an answer ends")
    prompt_ids: torch.Tensor = prompts["input_ids"]
    prompt_lengths = prompts["attention_mask"].sum(dim=1).tolist()
    rows = [list(answer) + [eos] for answer in answers]
    length = max(n + len(row) for n, row in zip(prompt_lengths, rows))
    batch_size = len(examples)
    per_token = [k for k, v in prompts.items() if torch.is_tensor(v) and v.shape == prompt_ids.shape]
    out: dict[str, torch.Tensor] = {k: v for k, v in prompts.items() if k not in per_token}
    for key in per_token:
        out[key] = torch.zeros((batch_size, length), dtype=prompts[key].dtype)
    out["input_ids"].fill_(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos)
    labels = torch.full((batch_size, length), IGNORE_INDEX, dtype=torch.long)
    for i, (n, row) in enumerate(zip(prompt_lengths, rows)):
        answer = torch.tensor(row, dtype=prompt_ids.dtype)
        for key in per_token:
            out[key][i, :n] = prompts[key][i, :n]
        out["input_ids"][i, n : n + len(row)] = answer
        out["attention_mask"][i, : n + len(row)] = 1
        labels[i, n : n + len(row)] = answer
    out["labels"] = labels
    return out


def count_tokens(batch: dict[str, torch.Tensor]) -> tuple[int, int]:
    """``(input tokens, answer tokens)`` of a batch, padding excluded."""
    return int(batch["attention_mask"].sum()), int((batch["labels"] != IGNORE_INDEX).sum())
