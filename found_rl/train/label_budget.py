"""The label budget: which observations the advisor is asked about (ARCHITECTURE §6).

A slow teacher (a VLM served on the same CPU) cannot label every observation of a loop that
steps 80 times a second. The loop asks about a deterministic subset instead: an observation is
asked about when a hash of its step id ``(clip, episode, step)`` falls below the rate. The
subset is a pure function of the step id and the rate, so a seed still gives the same run, and
it is spread evenly over clips, episodes and the steps of an episode (a stride would always
skip the same phase of every episode).

``rate = "auto"`` is resolved once at start-up: :func:`probe_answers_per_s` measures the
advisor at several request sizes and :func:`rate_at_own_batch` picks the rate the advisor
affords at the size of the requests that rate makes; the run config records the number, so the
run and its resume repeat.

A low rate makes small requests, and a served model answers small requests several times
slower per item than a batch. ``label_lag_steps = "auto"`` therefore lengthens the label lag
with the rate (:func:`lag_for`): requests wait in the outbox for up to half the lag, so a lag
long enough for a full request lets a slow teacher answer in batches. Off-policy learners
lose nothing by it: an entry waits L lock-steps for its label out of the replay's thousands.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
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
                        items: int = 64, rounds: int = 3, timeout_s: float = 60.0,
                        clock: Callable[[], float] = time.perf_counter) -> float:
    """Answers per second of ``clock`` the advisor serves for requests of ``items`` items like
    ``payloads``.

    Sends ``rounds`` requests of ``items`` items one after another, as the loop does, through
    the run's own client (so its in-flight cap and pacing are those the loop will see); the
    first warms the server up and is not timed. Ids start with ``probe:`` and never reach the
    storage.

    Args:
        client: a :class:`~vlm_server.client.BackgroundClient` (``submit_many`` / ``poll``).
        payloads: ``(payload, kind)`` pairs to cycle through, e.g. one per clip.
        items: items per request.
        rounds: requests, the first untimed.
        timeout_s: the longest a request may take.
        clock: seconds of what the answers cost: wall time by default; a spawned server's CPU
            time measures what it takes from the loop, without the round trips' idle waits.

    Returns:
        Answered items per second of ``clock`` over the timed requests (failed answers do not
        count).
    """
    answered, spent = 0, 0.0
    for round_index in range(rounds):
        started, deadline = clock(), time.monotonic() + timeout_s
        client.submit_many([(f"probe:{items}.{round_index}.{index}", *payloads[index % len(payloads)])
                            for index in range(items)])
        ok, waiting = 0, items
        while waiting and time.monotonic() < deadline:
            replies = client.poll(wait_s=0.2)
            waiting -= len(replies)
            ok += sum(bool(reply.get("ok")) for _, reply in replies)
        if waiting:
            raise TimeoutError(f"advisor probe: {waiting} of {items} answers missing after {timeout_s:.0f} s")
        if round_index:
            answered += ok
            spent += clock() - started
    return answered / max(spent, 1e-9)


SHORTEST_AUTO_LAG = 16
"""``label_lag_steps: auto``'s lag for a fast advisor (every observation labelled)."""
LONGEST_AUTO_LAG = 256
"""``label_lag_steps: auto``'s cap: 1,024 env steps of 4 clips, a few percent of a short run."""


def lag_for(rate: float, items_per_lock_step: float, request_items: int) -> int:
    """The shortest label lag whose half fills a request of ``request_items`` at ``rate``.

    Args:
        rate: the label rate.
        items_per_lock_step: items a lock-step asks about at rate 1 (clips x items per observation).
        request_items: the request size the outbox waits for.

    Returns:
        A lag in lock-steps, between :data:`SHORTEST_AUTO_LAG` and :data:`LONGEST_AUTO_LAG`.
    """
    per_lock_step = rate * items_per_lock_step
    needed = math.ceil(2 * request_items / per_lock_step) if per_lock_step > 0 else LONGEST_AUTO_LAG
    return min(LONGEST_AUTO_LAG, max(SHORTEST_AUTO_LAG, needed))


def request_sizes(largest: int) -> list[int]:
    """The request sizes the probe measures: 1, 2, 4, ... up to ``largest`` (included)."""
    sizes = [1]
    while sizes[-1] * 2 < largest:
        sizes.append(sizes[-1] * 2)
    return sorted({*sizes, max(1, largest)})


def rate_at_own_batch(answers_per_s_by_size: Mapping[int, float], env_steps_per_s: float,
                      items_per_request: Callable[[float], float], *,
                      cpu_share: float = 0.15) -> tuple[float, float, float]:
    """The label rate whose own requests the advisor answers within its CPU share.

    An advisor answers a batch of 16 several times faster per item than single items, and the
    loop's requests hold ``items_per_request(rate)`` items: a rate chosen from the speed at 16
    items, at which the loop sends 3, takes several times its share. The rate is the largest
    fixed point of ``rate = rate_for(answers_per_s(items_per_request(rate)))``, the speed
    interpolated between the measured sizes (flat beyond them); iterating from the rate of the
    largest size reaches it from above, as both functions grow with their argument.

    Returns:
        ``(rate, items, answers_per_s)``: the rate, the size of the requests it makes, and the
        advisor's speed at that size.
    """
    if not answers_per_s_by_size:
        raise ValueError("rate_at_own_batch: no request size measured")
    sizes = sorted(answers_per_s_by_size)
    speeds = [answers_per_s_by_size[size] for size in sizes]

    def answers_per_s(items: float) -> float:
        return float(np.interp(items, sizes, speeds))

    rate = rate_for(speeds[-1], env_steps_per_s, cpu_share=cpu_share)
    for _ in range(50):
        following = rate_for(answers_per_s(items_per_request(rate)), env_steps_per_s, cpu_share=cpu_share)
        if following >= rate:
            break
        rate = following
    items = items_per_request(rate)
    return rate, items, answers_per_s(items)
