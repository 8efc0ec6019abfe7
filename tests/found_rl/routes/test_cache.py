"""``per_route``: one build per route object, never another route's value."""

import weakref

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
    built = []

    @per_route
    def token(route):  # holds no reference to the route, so a dead route's address can be reused
        built.append(object())
        return built[-1]

    seen, recycled = set(), 0
    for i in range(20):
        route = straight_route(30.0)
        recycled += id(route) in seen
        seen.add(id(route))
        assert token(route) is built[i] and token(route) is built[i]  # its own value, built once
        dead = weakref.ref(route)
        del route
        assert dead() is None  # freed at once (no cycle to wait for): its address is free again
    assert recycled > 0  # ids of dead routes were reused: the weak reference told them apart
