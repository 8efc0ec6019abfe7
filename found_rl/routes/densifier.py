"""Sampling a drive's lane spans into a dense route: the one densifier every planner uses.

A planner (``RoutePlanner`` on a SUMO network, ``TownRoutePlanner`` on a town's lanes) first
turns a drive into :class:`LaneSpan` s, stretches of one lane with a command each; its
:class:`RouteSampling` then samples their polylines every ``spacing_m`` metres into a
:class:`~found_rl.world.Route` whose waypoints carry the lane and command of their span and
the command look-ahead (:func:`~found_rl.world.route_command`). Frame: CARLA's world frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from found_rl.actions import RoadOption
from found_rl.errors import UserError
from found_rl.world import Route

if TYPE_CHECKING:
    from found_rl.scenario import RoutesConfig


@dataclass(frozen=True)
class LaneSpan:
    """The stretch ``[start_m, end_m]`` (arc length along the lane's polyline) of one lane."""

    lane_id: str
    start_m: float
    end_m: float
    command: RoadOption


def arc_length(points: np.ndarray) -> np.ndarray:
    """``(K,)`` cumulative length along a ``(K, 2)`` polyline, starting at 0."""
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])


def slice_polyline(points: np.ndarray, start_m: float, end_m: float) -> np.ndarray:
    """Points of a polyline between two arc lengths (clipped to it), endpoints interpolated."""
    s = arc_length(points)
    start_m, end_m = np.clip([start_m, end_m], 0.0, s[-1])
    inner = points[(s > start_m) & (s < end_m)]
    ends = [np.array([np.interp(v, s, points[:, 0]), np.interp(v, s, points[:, 1])]) for v in (start_m, end_m)]
    return np.vstack([ends[0], inner, ends[1]])


@dataclass(frozen=True)
class RouteSampling:
    """How a planner samples its drives into routes: waypoint spacing and command look-ahead.

    Attributes:
        spacing_m: distance between dense waypoints.
        command_lookahead_m: a manoeuvre is announced at least this far before it starts.
        command_lookahead_s: ... or this many seconds of driving at the ego's speed, if farther.
    """

    spacing_m: float = 1.0
    command_lookahead_m: float = 20.0
    command_lookahead_s: float = 3.0

    @classmethod
    def of_scenario(cls, routes: RoutesConfig) -> RouteSampling:
        """The sampling a scenario's ``routes`` section asks for (its look-ahead, 1 m spacing)."""
        return cls(command_lookahead_m=routes.command_lookahead_m, command_lookahead_s=routes.command_lookahead_s)

    def densify(self, spans: Sequence[LaneSpan], pieces: Sequence[np.ndarray], route_id: str) -> Route:
        """Sample the spans' polylines every ``spacing_m`` metres into a :class:`~found_rl.world.Route`.

        Args:
            spans: the drive, in order.
            pieces: ``(K_i, 2)`` world-frame points of each span (its lane's polyline sliced to
                the span, :func:`slice_polyline`), one per span.
            route_id: the route's id (named in errors).

        Raises:
            ValueError: the drive is shorter than ``spacing_m``; the message names the route.
        """
        if len(pieces) != len(spans):
            raise ValueError(f"route {route_id!r}: {len(spans)} spans but {len(pieces)} polylines")
        points = np.vstack(pieces)
        label = np.concatenate([np.full(len(piece), index) for index, piece in enumerate(pieces)])
        keep = np.concatenate([[True], np.linalg.norm(np.diff(points, axis=0), axis=1) > 1e-6])
        points, label = points[keep], label[keep]
        s = arc_length(points)
        if s[-1] < self.spacing_m:
            raise UserError(f"route {route_id!r}: shorter than {self.spacing_m} m")
        samples = np.append(np.arange(0.0, s[-1], self.spacing_m), s[-1])
        xy = np.stack([np.interp(samples, s, points[:, 0]), np.interp(samples, s, points[:, 1])], axis=1)
        # A segment belongs to the span of its end point (the first point of each span is dropped
        # above as a duplicate of the previous span's last point).
        segment_end = np.clip(np.searchsorted(s, samples, side="right"), 1, len(points) - 1)
        span_index = label[segment_end]
        heading = np.gradient(xy, axis=0)
        return Route(
            route_id=route_id,
            xy=xy,
            yaw_deg=np.degrees(np.arctan2(heading[:, 1], heading[:, 0])),
            commands=np.array([int(spans[i].command) for i in span_index], dtype=np.int8),
            lane_ids=tuple(spans[i].lane_id for i in span_index),
            length_m=float(s[-1]),
            command_lookahead_m=self.command_lookahead_m,
            command_lookahead_s=self.command_lookahead_s,
        )
