"""Image-blind answers to score a VLM advisor against: the majority class and the prompt-only answer.

A class agreement of 0.5 means little until one knows that always answering the most frequent
class already scores 0.3, or that the command, speed and route target alone predict most of
the steering. Two baselines, both fitted on the model's training data and never shown an image:

- ``majority``: always the most frequent action class (METHOD §3, after the answer's rounding,
  ``vlm_server.answers.answer_class``), with the per-component median ``(acc, steer)`` of the
  fitted samples in that class (the median: the constant with the least absolute error).
- ``prompt_only``: the same per prompt bucket, which holds what the prompt tells apart
  (:func:`prompt_buckets`: command, METHOD §3 speed bin, bearing of the route target); a
  bucket the fitted data lacks falls back to the coarser one, then to the majority answer.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from vlm_server.anchors import command_index, speed_bin
from vlm_server.answers import answer_class

BEARING_EDGES_DEG = (-15.0, -3.0, 3.0, 15.0)
"""Bins of the route target's bearing (y right positive): left, slightly left, ahead, slightly right, right."""

Bucket = tuple[int, ...]


class PromptContext(NamedTuple):
    """What a prompt says: command (RoadOption value), speed (m/s), route target ``(x fwd, y right)`` m."""

    command: int
    speed_mps: float
    target_ego: tuple[float, float]


@dataclass(frozen=True)
class BaselineAnswer:
    """A baseline's answer: the class it names and the action whose errors are scored."""

    action_class: int
    action: tuple[float, float]


def prompt_buckets(context: PromptContext) -> tuple[Bucket, ...]:
    """The prompt's buckets, finest first: (command, speed bin, bearing bin), (command, speed bin), ()."""
    bearing_deg = math.degrees(math.atan2(context.target_ego[1], context.target_ego[0]))
    bearing = int(np.searchsorted(BEARING_EDGES_DEG, bearing_deg))
    coarse = (command_index(context.command), speed_bin(context.speed_mps))
    return (*coarse, bearing), coarse, ()


def answer_of(actions: Sequence[tuple[float, float]]) -> BaselineAnswer:
    """The most frequent class of ``actions`` (ties: the lowest index) and the median action within it."""
    classes = [answer_class(action) for action in actions]
    counts = Counter(classes)
    majority = min(counts, key=lambda c: (-counts[c], c))
    members = np.array([a for a, c in zip(actions, classes) if c == majority], dtype=np.float64)
    acc, steer = np.median(members, axis=0)
    return BaselineAnswer(majority, (float(acc), float(steer)))


@dataclass(frozen=True)
class Baseline:
    """A fitted table ``{bucket: answer}``; :meth:`answer` takes the finest bucket present."""

    table: dict[Bucket, BaselineAnswer]

    def answer(self, context: PromptContext) -> BaselineAnswer:
        for bucket in prompt_buckets(context):
            if bucket in self.table:
                return self.table[bucket]
        raise ValueError("a fitted baseline always has the empty bucket")  # internal: fit() puts it there


def fit(contexts: Sequence[PromptContext], actions: Sequence[tuple[float, float]], *, prompt_only: bool) -> Baseline:
    """The majority (``prompt_only=False``) or prompt-only baseline of these samples.

    Raises:
        ValueError: no samples, or the sequences differ in length.
    """
    if len(contexts) != len(actions) or not actions:
        raise ValueError(f"need as many contexts as actions (> 0), got {len(contexts)} and {len(actions)}")
    grouped: dict[Bucket, list[tuple[float, float]]] = defaultdict(list)
    for context, action in zip(contexts, actions):
        for bucket in prompt_buckets(context) if prompt_only else ((),):
            grouped[bucket].append(action)
    return Baseline({bucket: answer_of(members) for bucket, members in grouped.items()})


BASELINES = ("majority", "prompt_only")


def fit_baselines(contexts: Sequence[PromptContext], actions: Sequence[tuple[float, float]]) -> dict[str, Baseline]:
    """``{"majority": ..., "prompt_only": ...}`` fitted on the same samples."""
    return {name: fit(contexts, actions, prompt_only=name == "prompt_only") for name in BASELINES}


def cross_fitted_answers(
    contexts: Sequence[PromptContext],
    actions: Sequence[tuple[float, float]],
    episodes: Sequence[int],
    seed: int = 0,
) -> tuple[dict[str, list[BaselineAnswer]], bool]:
    """Each baseline's answer to every sample, fitted on the other half of the episodes.

    For when the model's training data is unknown: the episodes are split in two by a seeded
    shuffle and each half is answered by baselines fitted on the other, so no sample is answered
    by a table that saw it. With a single episode nothing can be held apart, and the baselines
    are fitted on all samples (in-sample; the second value says so: False).

    Returns:
        ``({baseline name: answers in sample order}, is_cross_fitted)``.
    """
    unique = sorted(set(episodes))
    if len(unique) < 2:
        fitted = fit_baselines(contexts, actions)
        return {name: [b.answer(c) for c in contexts] for name, b in fitted.items()}, False
    order = np.random.default_rng(seed).permutation(len(unique))
    first_half = {unique[i] for i in order[: len(unique) // 2]}
    answers: dict[str, list[BaselineAnswer | None]] = {name: [None] * len(contexts) for name in BASELINES}
    for is_first in (True, False):
        fitted_on = [i for i, e in enumerate(episodes) if (e in first_half) != is_first]
        answered = [i for i, e in enumerate(episodes) if (e in first_half) == is_first]
        fitted = fit_baselines([contexts[i] for i in fitted_on], [actions[i] for i in fitted_on])
        for name, baseline in fitted.items():
            for i in answered:
                answers[name][i] = baseline.answer(contexts[i])
    return {name: [a for a in column if a is not None] for name, column in answers.items()}, True
