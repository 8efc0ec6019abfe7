"""The label budget: which observations the advisor is asked about (ARCHITECTURE §6).

A slow teacher (a VLM served on the same CPU) cannot label every observation of a loop that
steps 80 times a second. The loop asks about a deterministic subset instead: an observation is
asked about when a hash of its step id ``(clip, episode, step)`` falls below the rate. The
subset is a pure function of the step id and the rate, so a seed still gives the same run, and
it is spread evenly over clips, episodes and the steps of an episode (a stride would always
skip the same phase of every episode).

``rate = "auto"`` is resolved once at start-up by :func:`probe_answers_per_s` and
:func:`rate_for`; the run config records the number, so the run and its resume repeat.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_UNIT = 2.0**-53


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele et al. 2014): a fixed, well-mixed 64-bit hash."""
    z = values + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


def step_uniforms(clips: Any, episodes: Any, steps: Any) -> np.ndarray:
    """A number in [0, 1) per step id, the same on every machine and in every run.

    Args:
        clips, episodes, steps: integer arrays (or scalars) of equal shape, each >= 0.
    """
    with np.errstate(over="ignore"):
        h = _splitmix64(np.asarray(clips, np.int64).astype(np.uint64))
        h = _splitmix64(h ^ np.asarray(episodes, np.int64).astype(np.uint64))
        h = _splitmix64(h ^ np.asarray(steps, np.int64).astype(np.uint64))
    return (h >> np.uint64(11)).astype(np.float64) * _UNIT


def is_labelled(clips: Any, episodes: Any, steps: Any, rate: float) -> np.ndarray:
    """Which step ids the advisor is asked about at ``rate`` (all of them at rate 1)."""
    if rate >= 1.0:
        return np.ones(np.shape(np.asarray(clips)), bool)
    return step_uniforms(clips, episodes, steps) < rate


def check_rate(rate: float, source: str | None = "advisor.label_rate") -> float:
    """``rate`` as a float in (0, 1].

    Raises:
        ValueError: naming ``source`` (when given) for a rate outside (0, 1] or not a number.
    """
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or not 0 < rate <= 1:
        prefix = f"{source}: " if source else ""
        raise ValueError(f"{prefix}expected a number in (0, 1] or 'auto', got {rate!r}")
    return float(rate)


def rate_for(answers_per_s: float, env_steps_per_s: float, *, cpu_share: float = 0.15,
             floor: float = 0.01) -> float:
    """The share of env steps an advisor answering ``answers_per_s`` (alone, on its own threads)
    labels while taking ``cpu_share`` of its core: on a laptop the advisor and the loop share
    the CPU, so every answer is time the learner does not get.

    Rounded down to two significant digits, so the recorded number reads as chosen.
    """
    if answers_per_s <= 0:
        return floor
    rate = min(1.0, cpu_share * answers_per_s / max(env_steps_per_s, 1e-9))
    if rate >= 1.0:
        return 1.0
    digits = 1 - math.floor(math.log10(rate))
    return max(floor, math.floor(rate * 10**digits) / 10**digits)


def probe_answers_per_s(client: Any, payloads: Sequence[tuple[dict[str, Any], str]], *,
                        items: int = 64, rounds: int = 3, timeout_s: float = 60.0) -> float:
    """Answers per second the advisor serves for requests like ``payloads``.

    Sends ``rounds`` bursts of ``items`` requests through the run's own client (so the client's
    in-flight cap and batching are those the loop will see); the first burst warms the server
    up and is not timed. Ids start with ``probe:`` and never reach the storage.

    Args:
        client: a :class:`~vlm_server.client.BackgroundClient` (``submit`` / ``poll``).
        payloads: ``(payload, kind)`` pairs to cycle through, e.g. one per clip.
        items: requests per burst.
        rounds: bursts, the first untimed.
        timeout_s: the longest a burst may take.

    Returns:
        Answered items per second over the timed bursts (failed answers do not count).
    """
    answered, elapsed = 0, 0.0
    for round_index in range(rounds):
        started = time.perf_counter()
        for index in range(items):
            payload, kind = payloads[index % len(payloads)]
            client.submit(f"probe:{round_index}.{index}", payload, kind)
        ok, waiting = 0, items
        deadline = time.monotonic() + timeout_s
        while waiting and time.monotonic() < deadline:
            replies = client.poll(wait_s=0.2)
            waiting -= len(replies)
            ok += sum(bool(reply.get("ok")) for _, reply in replies)
        if waiting:
            raise TimeoutError(f"advisor probe: {waiting} of {items} answers missing after {timeout_s:.0f} s")
        if round_index:
            answered += ok
            elapsed += time.perf_counter() - started
    return answered / max(elapsed, 1e-9)
