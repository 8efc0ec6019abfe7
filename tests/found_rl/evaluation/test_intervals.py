"""Bootstrap intervals of route-weighted means, checked on examples worked out by hand."""

import pytest

from found_rl.evaluation.intervals import bootstrap_interval, route_weighted_mean


def test_two_routes_of_one_town():
    # Resampling 2 routes with replacement gives means 0 (1/4), 0.5 (1/2), 1 (1/4): the 2.5 % and
    # 97.5 % percentiles are the two outer atoms.
    interval = bootstrap_interval([[[0.0], [1.0]]])
    assert (interval.mean, interval.low, interval.high) == (0.5, 0.0, 1.0)


def test_one_route_driven_twice_spreads_like_its_traffic():
    # One route, repetitions 0 and 1: the route's resampled mean is 0, 0.5 or 1, as above.
    interval = bootstrap_interval([[[0.0, 1.0]]])
    assert (interval.low, interval.high) == (0.0, 1.0)


def test_a_suite_pools_its_routes_so_one_route_per_town_still_has_a_spread():
    # Towns A (one route, 0) and B (one route, 1): the suite's two routes resample like the two
    # routes of one town above.
    interval = bootstrap_interval([[[0.0]], [[1.0]]])
    assert (interval.mean, interval.low, interval.high) == (0.5, 0.0, 1.0)
    # Three routes 0, 1 (town A) and 0.5 (town B): the resampled mean is 0 when all three draws
    # are the 0 route (1/27 = 3.7 % > 2.5 %), 1 when all are the 1 route: the interval is [0, 1].
    interval = bootstrap_interval([[[0.0], [1.0]], [[0.5]]])
    assert (interval.low, interval.high) == (0.0, 1.0)


def test_route_weighting_counts_routes_and_averages_repetitions_first():
    # Town A: one route (0.2, 0.4) → 0.3; town B: routes 1.0 and (1, 0, 1) → 2/3: three routes.
    assert route_weighted_mean([[[0.2, 0.4]], [[1.0], [1.0, 0.0, 1.0]]]) == pytest.approx((0.3 + 1.0 + 2 / 3) / 3)


def test_a_single_episode_has_no_spread_and_draws_repeat_with_the_seed():
    assert bootstrap_interval([[[0.7]]]).low == pytest.approx(0.7)
    towns = [[[0.1, 0.9], [0.4]], [[0.3], [0.8, 0.6]]]
    assert bootstrap_interval(towns, seed=3) == bootstrap_interval(towns, seed=3)


@pytest.mark.parametrize(("towns", "match"), [([], "no route"), ([[[]]], "a route without a score"),
                                              ([[[1.0]], []], "a town without routes")])
def test_empty_inputs_are_refused(towns, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_interval(towns)
