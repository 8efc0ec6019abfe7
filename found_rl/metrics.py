"""CARLA-leaderboard route metrics: pure arithmetic over episode summaries (ARCHITECTURE §7).

Per route: route completion RC in ``[0, 1]`` (1 when the route was completed), infraction
penalty IP = product of one factor per infraction times ``1 - outside_lane_fraction`` (the
leaderboard's outside-route-lanes rule), driving score DS = RC × IP. Route deviation, agent
blocked and route timeout end the route but carry no factor of their own: as on the
leaderboard they cost through the route completion they cut short.

Global: mean RC, IP and DS over routes, and infractions per kilometre driven, where a route's
driven kilometres are ``route_length × RC`` (leaderboard 2.0's definition; at least 1 m so a
route that never started does not divide by zero).

Nothing here touches files, simulators or clocks; :mod:`found_rl.evaluation.results` turns
these numbers into the leaderboard's JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from found_rl.events import EpisodeStatus, EpisodeSummary, Infraction, InfractionKind

PENALTY_FACTORS: dict[InfractionKind, float] = {
    InfractionKind.COLLISION_PEDESTRIAN: 0.50,
    InfractionKind.COLLISION_VEHICLE: 0.60,
    InfractionKind.COLLISION_LAYOUT: 0.65,
    InfractionKind.RED_LIGHT: 0.70,
    InfractionKind.STOP_SIGN: 0.80,
}
"""Multiplicative penalty per infraction (leaderboard values); other kinds have no factor."""

MIN_DRIVEN_KM = 0.001
"""Floor on a route's driven distance when dividing by it (the leaderboard's guard)."""


@dataclass(frozen=True)
class RouteScores:
    """Scores of one route, all fractions in ``[0, 1]`` (the JSON writer scales them to %).

    Attributes:
        route_completion: RC, 1.0 if the route was completed.
        infraction_penalty: IP, product of the penalty factors.
        driving_score: DS = RC × IP.
        outside_lane_fraction: share of the driven distance spent outside the route's lanes.
        driven_km: ``route_length × RC`` in kilometres (the denominator of per-km rates).
    """

    route_completion: float
    infraction_penalty: float
    driving_score: float
    outside_lane_fraction: float
    driven_km: float


@dataclass(frozen=True)
class GlobalScores:
    """Scores over a set of routes.

    Attributes:
        route_completion: mean RC over routes.
        infraction_penalty: mean IP over routes.
        driving_score: mean DS over routes.
        infractions_per_km: per kind, total count over total driven km (``outside_route_lanes``
            is instead the percentage of driven distance outside the lanes, as on the
            leaderboard).
        driven_km: total driven kilometres.
        num_routes: routes scored.
    """

    route_completion: float
    infraction_penalty: float
    driving_score: float
    infractions_per_km: dict[InfractionKind, float]
    driven_km: float
    num_routes: int


def count_infractions(infractions: Iterable[Infraction]) -> dict[InfractionKind, int]:
    """Number of infractions of every kind (kinds that never happened count 0)."""
    counts = dict.fromkeys(InfractionKind, 0)
    for infraction in infractions:
        counts[infraction.kind] += 1
    return counts


def infraction_penalty(infractions: Iterable[Infraction], outside_lane_fraction: float = 0.0) -> float:
    """IP: product of the penalty factors of ``infractions``, times ``1 - outside_lane_fraction``.

    Raises:
        ValueError: if ``outside_lane_fraction`` is outside ``[0, 1]``.
    """
    if not 0.0 <= outside_lane_fraction <= 1.0:
        raise ValueError(f"outside_lane_fraction must be in [0, 1], got {outside_lane_fraction}")
    penalty = 1.0 - outside_lane_fraction
    for infraction in infractions:
        penalty *= PENALTY_FACTORS.get(infraction.kind, 1.0)
    return penalty


def route_scores(summary: EpisodeSummary) -> RouteScores:
    """RC, IP and DS of one finished episode.

    Raises:
        ValueError: if the summary's completion or distances are out of range.
    """
    if not 0.0 <= summary.route_completion <= 1.0 + 1e-9:
        raise ValueError(f"route_completion must be in [0, 1], got {summary.route_completion}")
    distances = (summary.distance_m, summary.outside_lane_m, summary.route_length_m)
    if not all(math.isfinite(d) and d >= 0 for d in distances):
        raise ValueError(
            "distances must be finite and >= 0, got "
            f"distance_m={summary.distance_m}, outside_lane_m={summary.outside_lane_m}, "
            f"route_length_m={summary.route_length_m}"
        )
    completion = 1.0 if summary.status is EpisodeStatus.COMPLETED else min(summary.route_completion, 1.0)
    outside = min(summary.outside_lane_m / summary.distance_m, 1.0) if summary.distance_m > 0 else 0.0
    penalty = infraction_penalty(summary.infractions, outside)
    driven_km = max(summary.route_length_m * completion / 1000.0, MIN_DRIVEN_KM)
    return RouteScores(
        route_completion=completion,
        infraction_penalty=penalty,
        driving_score=completion * penalty,
        outside_lane_fraction=outside,
        driven_km=driven_km,
    )


def global_scores(
    scores: Sequence[RouteScores], infraction_counts: Sequence[dict[InfractionKind, int]]
) -> GlobalScores:
    """Aggregate per-route scores and infraction counts (same order, one entry per route).

    Raises:
        ValueError: if the two sequences differ in length.
    """
    if len(scores) != len(infraction_counts):
        raise ValueError(
            f"got {len(scores)} route scores but {len(infraction_counts)} infraction counts; "
            "pass one of each per route"
        )
    if not scores:
        zero_rates = dict.fromkeys(InfractionKind, 0.0)
        return GlobalScores(0.0, 0.0, 0.0, zero_rates, 0.0, 0)
    driven_km = math.fsum(s.driven_km for s in scores)
    rates = {
        kind: math.fsum(counts.get(kind, 0) for counts in infraction_counts) / driven_km
        for kind in InfractionKind
    }
    # The leaderboard reports outside-route-lanes globally as a percentage of distance.
    rates[InfractionKind.OUTSIDE_ROUTE_LANES] = 100.0 * (
        math.fsum(s.outside_lane_fraction * s.driven_km for s in scores) / driven_km
    )
    count = len(scores)
    return GlobalScores(
        route_completion=math.fsum(s.route_completion for s in scores) / count,
        infraction_penalty=math.fsum(s.infraction_penalty for s in scores) / count,
        driving_score=math.fsum(s.driving_score for s in scores) / count,
        infractions_per_km=rates,
        driven_km=driven_km,
        num_routes=count,
    )
