"""``per_route``: one build per route object, never another route's value."""

import gc

from found_rl.routes.cache import per_route
from tests.scenes import straight_route


def test_builds_once_per_route_object_and_keeps_routes_apart():
    calls = []

    @per_route
    def length(route):
        calls.append(route)
        return route.length_m

    short, long = straight_route(50.0), straight_route(80.0)
    assert length(short) == length(short) == short.length_m
    assert length(long) == long.length_m
    assert calls == [short, long]


def test_a_new_route_at_a_recycled_address_is_built_afresh():
    @per_route
    def identity(route):
        return route

    for _ in range(20):  # ids of dead routes get reused; the weak reference tells them apart
        route = straight_route(30.0)
        assert identity(route) is route
        del route
        gc.collect()
