"""Templated decoding: the answer's fixed tokens fed in, only its number slots chosen by the model.

A ``found-rl vlm init`` model's tokenizer makes every fixed stretch of the JSON answer one
token and every number two (integer part, then fraction), so its answer is always the same
ten-token pattern ``{"throttle": `` I F ``, "steer": `` I F ``, "brake": `` I F ``}``. Greedy
``generate`` spends a model call (plus its per-step overhead) on each of the 11 tokens, four of
which it can only get right by copying the pattern. Here the fixed tokens go in with the
previous choice, through the KV cache, in one forward each, and a slot takes the argmax of
the logits restricted to the tokens that can stand there (number words): 6 model calls an
answer, and the answer always parses.

Whenever greedy decoding writes the pattern (each fixed token is its argmax, each slot's argmax
is a number word, then the end token), the restricted argmax at each slot is that same token and
the cached prefix is the same sequence, so both give the same answer. ``AnswerTemplate.detect``
enables this only for tokenizers that encode a reference answer as exactly that pattern; any
other checkpoint keeps ``generate``.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any

from vlm_server.answers import KEYS

REFERENCE_VALUES = (0.25, -0.5, 0.0)
"""A reference answer (one value per key): it must encode as fixed, integer, fraction tokens."""
_NUMBER = re.compile(r"-?\d+\.\d+")
_INTEGER_WORD = re.compile(r"-?\d+")
_FRACTION_WORD = re.compile(r"\.\d+")


@dataclass(frozen=True)
class AnswerTemplate:
    """The answer as token segments: ``fixed[k]`` tokens, then a number (integer slot, fraction slot).

    Attributes:
        fixed: fixed token ids before each number, and after the last one (``len(KEYS) + 1`` runs).
        integers: sorted ids of the tokens an integer slot may take (``0``, ``-0``, ``12``, ...).
        fractions: sorted ids of the tokens a fraction slot may take (``.0``, ``.35``, ...).
        eos_token_id: the end token greedy decoding writes after the answer.
    """

    fixed: tuple[tuple[int, ...], ...]
    integers: tuple[int, ...]
    fractions: tuple[int, ...]
    eos_token_id: int

    @property
    def length(self) -> int:
        """Tokens of an answer, the end token not counted."""
        return sum(len(run) for run in self.fixed) + 2 * (len(self.fixed) - 1)

    @classmethod
    def detect(cls, tokenizer: Any) -> AnswerTemplate | None:
        """The template of ``tokenizer``, or None when it does not write answers as fixed/number words.

        Checks that the reference answer (``json.dumps`` of the three keys, as training writes it)
        encodes as one token per fixed stretch and two per number, and that the vocabulary has
        number words to choose from.
        """
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            return None
        answer = json.dumps(dict(zip(KEYS, REFERENCE_VALUES)))
        pieces = _NUMBER.split(answer)
        numbers = _NUMBER.findall(answer)
        try:
            fixed = tuple(tuple(_encode(tokenizer, piece)) for piece in pieces)
            expected: list[int] = []
            for run, number in zip(fixed, [*numbers, None]):
                expected += run
                if number is not None:
                    expected += _number_words(tokenizer, number)
        except ValueError:
            return None
        if _encode(tokenizer, answer) != expected or any(len(run) != 1 for run in fixed):
            return None
        special = set(getattr(tokenizer, "all_special_ids", []))
        vocab = {word: index for word, index in tokenizer.get_vocab().items() if index not in special}
        integers = sorted(i for w, i in vocab.items() if _INTEGER_WORD.fullmatch(w) and _decodes_to(tokenizer, i, w))
        fractions = sorted(i for w, i in vocab.items() if _FRACTION_WORD.fullmatch(w) and _decodes_to(tokenizer, i, w))
        if not integers or not fractions:
            return None
        return cls(fixed, tuple(integers), tuple(fractions), int(eos))


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _number_words(tokenizer: Any, number: str) -> list[int]:
    """``number``'s two tokens, integer part then fraction (a lone ``-0`` may split; in a number it must not)."""
    ids = _encode(tokenizer, number)
    integer, fraction = number.split(".")
    if len(ids) != 2 or [tokenizer.decode([i]) for i in ids] != [integer, "." + fraction]:
        raise ValueError(f"{number!r} is not an integer word and a fraction word")
    return ids


def _decodes_to(tokenizer: Any, token_id: int, word: str) -> bool:
    return tokenizer.decode([token_id]) == word


class TemplatedDecoder:
    """Answers of ``template`` from a batch of left-padded prompts, one forward per number slot.

    The forward calls go through the model's own KV cache (``DynamicCache``), with the position
    ids ``generate`` derives from the attention mask, so a slot sees what it would see in greedy
    decoding.
    """

    def __init__(self, model: Any, template: AnswerTemplate) -> None:
        import torch

        self.model = model
        self.template = template
        parameters = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self._keep_arg = next((n for n in ("logits_to_keep", "num_logits_to_keep") if n in parameters), None)
        self._slots = (torch.tensor(template.integers), torch.tensor(template.fractions))
        self.calls = 0

    def __call__(self, inputs: dict[str, Any]) -> Any:
        """The answer token ids, ``[B, template.length]`` (no end token), for the model's keyword ``inputs``.

        ``inputs`` holds ``input_ids`` and ``attention_mask`` (left-padded) and the image inputs
        (``pixel_values``, ...), which go to the first call only.
        """
        import torch

        input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
        device = input_ids.device
        fixed = [torch.tensor(run, device=device).expand(len(input_ids), -1) for run in self.template.fixed]
        integers, fractions = (s.to(device) for s in self._slots)
        # each number: its integer slot (nothing follows it), then its fraction slot and the fixed run after it
        plan = [step for run in fixed[1:] for step in ((integers, run[:, :0]), (fractions, run))]
        chosen = [fixed[0]]
        pending = torch.cat([input_ids, fixed[0]], dim=1)
        mask = torch.cat([attention_mask, torch.ones_like(fixed[0])], dim=1)
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generate derives them
        cache = None
        extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
        for allowed, follow in plan:
            logits, cache = self._forward(pending, mask, positions[:, -pending.shape[1]:], cache, extra)
            extra = {}  # the image goes in with the prompt only
            token = allowed[logits.index_select(-1, allowed).argmax(-1)].unsqueeze(1)
            chosen += [token, follow]
            pending = torch.cat([token, follow], dim=1)
            mask = torch.cat([mask, torch.ones_like(pending)], dim=1)
            steps = torch.arange(1, pending.shape[1] + 1, device=device)
            positions = torch.cat([positions, positions[:, -1:] + steps], dim=1)
        return torch.cat(chosen, dim=1)

    def _forward(self, input_ids: Any, mask: Any, positions: Any, cache: Any, extra: dict[str, Any]) -> tuple[Any, Any]:
        kwargs = {self._cache_arg: cache, "use_cache": True, **extra}
        if self._keep_arg:
            kwargs[self._keep_arg] = 1
        output = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, **kwargs)
        self.calls += 1
        cache = getattr(output, "cache", None) if self._cache_arg == "cache" else output.past_key_values
        return output.logits[:, -1, :], cache
