"""A dense route with a command per waypoint, and the command announced to a driver on it.

Planned once per episode (``found_rl.routes``) and shared by reference between snapshots.
Frame: CARLA's world frame (x east, y south, metres; yaw in degrees, clockwise from east).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from found_rl.actions import RoadOption


@dataclass(frozen=True)
class Route:
    """A dense route (about 1 m spacing) with a command per waypoint.

    Attributes:
        route_id: id from the route file, or ``"random-<n>"``.
        xy: ``(R, 2)`` float64 waypoints, metres.
        yaw_deg: ``(R,)`` float64 heading of the route at each waypoint.
        commands: ``(R,)`` int8 :class:`RoadOption` value of each waypoint.
        lane_ids: ``(R,)`` lane id of each waypoint (for route-deviation and lane checks).
        length_m: total length.
        command_lookahead_m: a manoeuvre is announced at least this far before it starts
            (:func:`route_command`).
        command_lookahead_s: ... or this many seconds of driving at the ego's speed, if farther.
    """

    route_id: str
    xy: np.ndarray
    yaw_deg: np.ndarray
    commands: np.ndarray
    lane_ids: tuple[str, ...]
    length_m: float
    command_lookahead_m: float = 20.0
    command_lookahead_s: float = 3.0

    @functools.cached_property
    def _next_manoeuvre(self) -> tuple[list[int], list[int], float]:
        """(command of each waypoint, index of the first non-LANEFOLLOW waypoint at or after it,
        or R), as lists for scalar lookups every step; and the mean waypoint spacing."""
        count = len(self.commands)
        indices = np.where(self.commands != int(RoadOption.LANEFOLLOW), np.arange(count), count)
        following = np.minimum.accumulate(indices[::-1])[::-1]
        return self.commands.tolist(), following.tolist(), self.length_m / max(count - 1, 1)


_ROAD_OPTIONS = {int(option): option for option in RoadOption}


def route_command(route: Route, index: int, speed_mps: float = 0.0) -> RoadOption:
    """The command announced to a driver at route waypoint ``index`` (clipped into range).

    Inside a manoeuvre (a junction's LEFT/RIGHT/STRAIGHT, a lane change) it is that
    manoeuvre's; before one it is announced ``max(command_lookahead_m, command_lookahead_s
    × speed_mps)`` ahead of its first waypoint, as leaderboard agents get the command of the
    next target point; elsewhere LANEFOLLOW. ``route.commands`` keeps each waypoint's own.
    """
    commands, following, spacing_m = route._next_manoeuvre
    index = min(max(index, 0), len(commands) - 1)
    upcoming = following[index]
    if upcoming == len(commands):
        return RoadOption.LANEFOLLOW
    if upcoming != index:
        horizon_m = max(route.command_lookahead_m, route.command_lookahead_s * speed_mps)
        if (upcoming - index) * spacing_m > horizon_m:
            return RoadOption.LANEFOLLOW
    return _ROAD_OPTIONS[commands[upcoming]]
