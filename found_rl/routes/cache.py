"""Values derived from a route, computed once per route object.

Routes are static and shared by every snapshot of an episode, so whatever a per-step query
derives from one (arc lengths, segment tables) is worth keeping while the route lives. Entries
are keyed by the route's identity and hold a weak reference to it, so a recycled ``id`` never
returns another route's value.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

from found_rl.world import Route

T = TypeVar("T")

_MAX_ROUTES = 64
"""Routes are few; past this many the cache is dropped whole rather than aged."""


def per_route(build: Callable[[Route], T]) -> Callable[[Route], T]:
    """Decorate ``build(route)`` so it runs once per route object."""
    cache: dict[int, tuple[weakref.ref, T]] = {}

    @functools.wraps(build)
    def cached(route: Route) -> T:
        entry = cache.get(id(route))
        if entry is not None and entry[0]() is route:
            return entry[1]
        value = build(route)
        if len(cache) > _MAX_ROUTES:
            cache.clear()
        cache[id(route)] = (weakref.ref(route), value)
        return value

    return cached
