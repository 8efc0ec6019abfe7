"""Leaderboard arithmetic against hand-computed cases."""

import math

import pytest

from found_rl.events import EpisodeStatus, EpisodeSummary, Infraction, InfractionKind
from found_rl.metrics import count_infractions, global_scores, infraction_penalty, route_scores


def summary(
    completion: float,
    kinds: tuple[InfractionKind, ...] = (),
    status: EpisodeStatus = EpisodeStatus.FAILED_COLLISION,
    length_m: float = 1000.0,
    distance_m: float = 100.0,
    outside_m: float = 0.0,
) -> EpisodeSummary:
    infractions = tuple(Infraction(kind, step=i, xy=(float(i), 0.0)) for i, kind in enumerate(kinds))
    return EpisodeSummary("r0", status, completion, length_m, distance_m, outside_m, 10.0, 100, infractions)


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ((), 1.0),
        ((InfractionKind.COLLISION_PEDESTRIAN,), 0.50),
        ((InfractionKind.COLLISION_VEHICLE, InfractionKind.RED_LIGHT), 0.60 * 0.70),
        (
            (InfractionKind.COLLISION_LAYOUT, InfractionKind.STOP_SIGN, InfractionKind.STOP_SIGN),
            0.65 * 0.8 * 0.8,
        ),
        # Ending the route is their only cost, through route completion.
        ((InfractionKind.VEHICLE_BLOCKED, InfractionKind.ROUTE_TIMEOUT, InfractionKind.ROUTE_DEVIATION), 1.0),
    ],
)
def test_penalty_is_product_of_leaderboard_factors(kinds, expected):
    assert infraction_penalty([Infraction(k, 0, (0.0, 0.0)) for k in kinds]) == pytest.approx(expected)


def test_route_scores_hand_computed():
    scores = route_scores(
        summary(0.5, (InfractionKind.COLLISION_VEHICLE, InfractionKind.RED_LIGHT), length_m=800.0)
    )
    assert scores.route_completion == pytest.approx(0.5)
    assert scores.infraction_penalty == pytest.approx(0.42)
    assert scores.driving_score == pytest.approx(0.21)
    assert scores.driven_km == pytest.approx(0.4)


def test_outside_lane_distance_scales_penalty():
    # 10 m of 100 m driven outside the lanes, plus a pedestrian: 0.9 * 0.5.
    scores = route_scores(summary(0.2, (InfractionKind.COLLISION_PEDESTRIAN,), outside_m=10.0))
    assert scores.outside_lane_fraction == pytest.approx(0.1)
    assert scores.infraction_penalty == pytest.approx(0.45)
    assert scores.driving_score == pytest.approx(0.09)


def test_completed_route_scores_full_completion():
    scores = route_scores(summary(0.994, status=EpisodeStatus.COMPLETED))
    assert scores.route_completion == 1.0
    assert scores.driving_score == 1.0


def test_route_that_never_started_does_not_divide_by_zero():
    scores = route_scores(summary(0.0, (InfractionKind.COLLISION_VEHICLE,), distance_m=0.0))
    assert scores.driven_km == pytest.approx(0.001)
    assert scores.driving_score == 0.0


def test_global_scores_hand_computed():
    first = summary(1.0, (InfractionKind.COLLISION_VEHICLE,), EpisodeStatus.COMPLETED, length_m=1000.0)
    second = summary(
        0.4,
        (InfractionKind.COLLISION_VEHICLE, InfractionKind.COLLISION_VEHICLE),
        length_m=500.0,
        outside_m=50.0,
    )
    totals = global_scores(
        [route_scores(first), route_scores(second)],
        [count_infractions(first.infractions), count_infractions(second.infractions)],
    )
    # RC (1.0, 0.4); IP (0.6, 0.36 * 0.5); DS (0.6, 0.4 * 0.18).
    assert totals.route_completion == pytest.approx(0.7)
    assert totals.infraction_penalty == pytest.approx((0.6 + 0.18) / 2)
    assert totals.driving_score == pytest.approx((0.6 + 0.072) / 2)
    # Driven: 1.0 km + 0.2 km; three vehicle collisions.
    assert totals.driven_km == pytest.approx(1.2)
    assert totals.infractions_per_km[InfractionKind.COLLISION_VEHICLE] == pytest.approx(2.5)
    assert totals.infractions_per_km[InfractionKind.RED_LIGHT] == 0.0
    # Outside lanes: 50 % of the second route's 0.2 km, over 1.2 km driven.
    assert totals.infractions_per_km[InfractionKind.OUTSIDE_ROUTE_LANES] == pytest.approx(100 * 0.1 / 1.2)


def test_global_scores_of_nothing_is_zero_and_mismatch_raises():
    assert global_scores([], []).num_routes == 0
    with pytest.raises(ValueError, match="one of each per route"):
        global_scores([route_scores(summary(1.0))], [])


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_out_of_range_outside_fraction_raises(bad):
    with pytest.raises(ValueError, match="outside_lane_fraction"):
        infraction_penalty([], bad)


@pytest.mark.parametrize(
    ("kind", "factor"),
    [
        (InfractionKind.COLLISION_PEDESTRIAN, 0.50),
        (InfractionKind.COLLISION_VEHICLE, 0.60),
        (InfractionKind.COLLISION_LAYOUT, 0.65),
        (InfractionKind.RED_LIGHT, 0.70),
        (InfractionKind.STOP_SIGN, 0.80),
        # Scored through the outside-lane fraction instead (see below), never as an event.
        (InfractionKind.OUTSIDE_ROUTE_LANES, 1.0),
    ],
)
def test_each_leaderboard_factor_on_its_own(kind, factor):
    assert infraction_penalty([Infraction(kind, 0, (0.0, 0.0))]) == factor


def test_outside_lane_event_is_not_counted_twice():
    # The env adds one outside_route_lanes event to the summary besides the distance; only the
    # distance (10 m of 100 m) costs: IP 0.9, not 0.9 * some event factor.
    scores = route_scores(summary(0.5, (InfractionKind.OUTSIDE_ROUTE_LANES,), outside_m=10.0))
    assert scores.infraction_penalty == pytest.approx(0.9)
    assert scores.driving_score == pytest.approx(0.45)


def test_route_completion_is_capped_at_one():
    # Float error may put progress a hair above the route's length on a failed route.
    scores = route_scores(summary(1.0 + 5e-10, status=EpisodeStatus.FAILED_BLOCKED))
    assert scores.route_completion == 1.0
    assert scores.driving_score == 1.0


def test_outside_lane_fraction_is_capped_at_one():
    scores = route_scores(summary(0.5, outside_m=100.5, distance_m=100.0))
    assert scores.outside_lane_fraction == 1.0
    assert scores.infraction_penalty == 0.0
    assert scores.driving_score == 0.0


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize("field", ["length_m", "distance_m"])
def test_non_finite_distances_are_refused(field, value):
    # A NaN length would make every global per-km rate NaN; a NaN distance would score 0 % outside.
    with pytest.raises(ValueError, match="distances must be finite and >= 0"):
        route_scores(summary(0.5, **{field: value}))
