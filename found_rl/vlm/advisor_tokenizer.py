"""A word-level tokenizer cut for the advisor's prompts and JSON answers, for VLMs trained from scratch.

A model that starts from random weights on two CPU cores must not spend its time on spelling:
every fixed stretch of text the server's prompt (``vlm_server.answers.build_prompt``, for each
command, with and without the route-target line) and the expert's answer
(``found_rl.dataset.text.chat_answer``) contain is one token, and a number is two, its sign and
integer part (``-0``, ``12``) then its fraction (``.35``). A whole prompt is 10 tokens and
an answer 11 with its end token (``{"throttle": `` ``0`` ``.35`` ``, "steer": `` ``-0`` ``.12``
…). Anything else falls back to one token per printable ASCII character, so any text encodes
and decodes to itself; only other characters become ``<unk>``.

The fixed stretches are derived by rendering the server's own prompt and answer functions, so a
reworded prompt changes the vocabulary with it (and a model initialised before the change reads
the new words character by character: re-run ``vlm init``).
"""

from __future__ import annotations

import re
import string
from typing import Any

from found_rl.dataset.text import chat_answer
from vlm_server.actions import RoadOption
from vlm_server.answers import build_prompt

UNK, PAD, BOS, EOS, IMAGE = "<unk>", "<pad>", "<s>", "</s>", "<image>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (UNK, PAD, BOS, EOS, IMAGE, *ROLE_TOKENS)

CHAT_TEMPLATE = (
    "{%- for m in messages -%}<|{{ m['role'] }}|>"
    "{%- if m['content'] is string -%}{{ m['content'] }}"
    "{%- else -%}{%- for c in m['content'] -%}"
    "{%- if c['type'] == 'image' -%}<image>{%- elif c['type'] == 'text' -%}{{ c['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if m['role'] == 'assistant' -%}</s>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)
"""One turn is ``<|role|>`` then its parts with no separator; the answer follows ``<|assistant|>``."""

_NUMBER = re.compile(r"-?\d+\.\d+")
INTEGER_PATTERN = r"-?\d{1,2}(?=\.\d)"
FRACTION_PATTERN = r"\.\d{1,2}"
MAX_INTEGER = 99


def fixed_phrases() -> list[str]:
    """The text between the numbers of every prompt the server builds and of the expert's answer."""
    commands = [option.value for option in RoadOption if option != RoadOption.VOID]
    states = (None, {"target_ego_xy": [2.5, -0.5]})
    texts = [build_prompt(command, 1.5, state) for command in commands for state in states]
    texts.append(chat_answer(0.25, -0.5))
    phrases = {piece for text in texts for piece in _NUMBER.split(text) if piece}
    return sorted(phrases, key=lambda phrase: (-len(phrase), phrase))


def number_words() -> list[str]:
    """Integer parts ``-99`` … ``99`` (with ``-0``) and fractions ``.0`` … ``.99``."""
    integers = [str(i) for i in range(MAX_INTEGER + 1)] + [f"-{i}" for i in range(MAX_INTEGER + 1)]
    fractions = [f".{i}" for i in range(10)] + [f".{i:02d}" for i in range(100)]
    return integers + fractions


def split_pattern(phrases: list[str]) -> str:
    """The pre-tokenizer's regex: a fixed phrase (longest first), an integer part, a fraction, or one character."""
    literals = ["".join(_literal(char) for char in phrase) for phrase in phrases]
    return "|".join([*literals, INTEGER_PATTERN, FRACTION_PATTERN, r"[\s\S]"])


def _literal(char: str) -> str:
    """``char`` as an Oniguruma regex literal (hex escapes for anything but letters and digits)."""
    return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):X}}}"


def advisor_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` over ``SPECIAL_TOKENS``, the fixed phrases, number words and printable ASCII."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    phrases = fixed_phrases()
    words = [*SPECIAL_TOKENS, *phrases, *number_words(), *string.printable]
    vocab = {word: index for index, word in enumerate(dict.fromkeys(words))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(split_pattern(phrases)), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token=UNK,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        extra_special_tokens={"image_token": IMAGE},
        clean_up_tokenization_spaces=False,
    )
