"""Per-route arrays every hazard query needs, computed once per route object, and the ego's
place on the route (arc length along it, metres)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from found_rl.route_cache import per_route
from found_rl.sim.snapshot import Route, WorldSnapshot

if TYPE_CHECKING:
    from found_rl.hazards.corridor import StraightFrame

FAST_PATH_LIMIT = 1e12
"""Coordinates and extents below this magnitude cannot overflow in the fast paths (here, in
``found_rl.infractions`` and ``found_rl.route_progress``)."""

REACH_SLACK = 1e-9
"""Relative slack of the pure-Python twins of exact numpy tests: far above their rounding
differences from numpy (a few ulp), far below anything geometric."""


@dataclass(frozen=True)
class RouteGeometry:
    """Per-route arrays every query needs, computed once per route object.

    Points and directions are complex numbers ``x + iy``: numpy broadcasts ``(N, 1) - (1, K)``
    complex arrays many times faster than ``(N, 1, 2) - (1, K, 2)`` float ones.

    Attributes:
        arclength_m: ``(R,)`` arc length of each waypoint.
        xy: ``(R,)`` complex waypoints.
        direction: ``(R,)`` complex unit heading of each waypoint (from ``yaw_deg``).
    """

    arclength_m: np.ndarray
    xy: np.ndarray
    direction: np.ndarray
    arclength_list: list[float] = field(init=False, repr=False)
    xy_list: list[complex] = field(init=False, repr=False)
    direction_list: list[complex] = field(init=False, repr=False)
    frames: list[StraightFrame] | None = field(default=None, init=False, repr=False)
    is_tame: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        numbers = np.concatenate(
            [self.arclength_m, self.xy.real, self.xy.imag, self.direction.real, self.direction.imag]
        )
        # Finite and far from overflow: Python-float fast paths cannot meet a NaN or an infinity.
        object.__setattr__(self, "is_tame", bool(np.all(np.abs(numbers) < FAST_PATH_LIMIT)))
        # Python numbers for per-step scalar look-ups (indexing numpy arrays makes numpy scalars).
        object.__setattr__(self, "arclength_list", self.arclength_m.tolist())
        object.__setattr__(self, "xy_list", self.xy.tolist())
        object.__setattr__(self, "direction_list", self.direction.tolist())


@per_route
def route_geometry(route: Route) -> RouteGeometry:
    xy = np.asarray(route.xy, dtype=np.float64).reshape(-1, 2)
    steps = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
    geometry = RouteGeometry(
        arclength_m=np.concatenate([[0.0], np.cumsum(steps)]),
        xy=xy[:, 0] + 1j * xy[:, 1],
        direction=np.exp(1j * np.deg2rad(np.asarray(route.yaw_deg, dtype=np.float64))),
    )
    return geometry


def ego_arclength(snapshot: WorldSnapshot, route_index: int, geometry: RouteGeometry) -> float:
    """Arc length of the ego centre projected onto the route near ``route_index``."""
    index = min(max(int(route_index), 0), len(geometry.xy_list) - 1)
    ego_x, ego_y = snapshot.ego.xy[0], snapshot.ego.xy[1]
    offset = complex(float(ego_x), float(ego_y)) - geometry.xy_list[index]
    along = (offset * geometry.direction_list[index].conjugate()).real  # Python's complex product
    return geometry.arclength_list[index] + along


def window_end(arclength: np.ndarray, until_m: float) -> int:
    """One past the first waypoint at or beyond arc length ``until_m``."""
    return min(int(np.searchsorted(arclength, until_m)) + 1, len(arclength))
