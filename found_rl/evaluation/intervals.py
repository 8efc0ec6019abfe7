"""95 % bootstrap confidence intervals of route-weighted means over towns, routes and traffic seeds.

A score of a town (or of a suite of towns) is the mean over its routes of each route's mean over
its repetitions (traffic seeds): every route weighs the same, whatever its length or its number
of repetitions, so a suite weighs its towns by their routes (route-weighted). The interval is a
percentile bootstrap that resamples at both levels where the variance comes from:

- the routes, with replacement, pooled over the towns of a suite (a suite's routes are a
  sample of the drives its kinds of town offer; holding each town's routes fixed instead
  would give a suite of one route per town no spread at all);
- the repetitions of each drawn route, with replacement (the same route scores differently
  under other traffic: the spread CARLA leaderboard users complain of).

Nothing here reads files or clocks; the generator is seeded, so a table repeats exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
SAMPLES = 10_000
"""Bootstrap draws: the interval's ends move by well under 0.01 between seeds."""
_CHUNK = 1_000


@dataclass(frozen=True)
class Interval:
    """A mean and its bootstrap confidence interval (``low <= mean <= high`` up to resampling)."""

    mean: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


Route = Sequence[float]
"""One route's scores, one per repetition (at least one)."""
Town = Sequence[Route]
"""One town's routes (at least one)."""


def route_weighted_mean(towns: Sequence[Town]) -> float:
    """Mean over every route of every town of the route's mean over its repetitions.

    Raises:
        ValueError: no route, a town without routes, or a route without a score.
    """
    _check(towns)
    return float(np.mean([np.mean(route) for town in towns for route in town]))


def bootstrap_interval(
    towns: Sequence[Town], *, confidence: float = CONFIDENCE, samples: int = SAMPLES, seed: int = 0
) -> Interval:
    """The route-weighted mean of ``towns`` and its percentile bootstrap interval (module docstring).

    Args:
        towns: per town, per route, the scores of its repetitions.
        confidence: the interval's coverage, in (0, 1).
        samples: bootstrap draws.
        seed: the generator's seed.

    Raises:
        ValueError: no route, a town without routes, a route without a score, or ``confidence``
            outside (0, 1).
    """
    _check(towns)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    scores, counts = _padded([route for town in towns for route in town])
    draws = np.concatenate([_resampled_means(scores, counts, min(_CHUNK, samples - start), rng)
                            for start in range(0, samples, _CHUNK)])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return Interval(route_weighted_mean(towns), float(low), float(high))


def _resampled_means(scores: np.ndarray, counts: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of the mean over resampled routes of their resampled repetitions' means."""
    num_routes, most = scores.shape
    routes = rng.integers(num_routes, size=(size, num_routes))
    drawn_counts = counts[routes]  # (size, routes)
    # a repetition index below each drawn route's own count, uniform
    reps = np.floor(rng.random((size, num_routes, most)) * drawn_counts[..., None]).astype(np.int64)
    values = scores[routes[..., None], reps]
    used = np.arange(most) < drawn_counts[..., None]
    route_means = np.where(used, values, 0.0).sum(axis=-1) / drawn_counts
    return route_means.mean(axis=-1)


def _padded(routes: Sequence[Route]) -> tuple[np.ndarray, np.ndarray]:
    """The routes' scores as a ``(routes, most repetitions)`` array (padding unused) and the counts."""
    counts = np.array([len(route) for route in routes], dtype=np.int64)
    scores = np.zeros((len(routes), int(counts.max())))
    for index, route in enumerate(routes):
        scores[index, : len(route)] = route
    return scores, counts


def _check(towns: Sequence[Town]) -> None:
    if not any(len(town) for town in towns):
        raise ValueError("no route to score")
    for town in towns:
        if not len(town):
            raise ValueError("a town without routes")
        if any(not len(route) for route in town):
            raise ValueError("a route without a score")
