"""The infraction rules applied step by step to one ego during one episode.

A backend's own collision check (SUMO's is per lane and ignores the ego's box) is not trusted;
everything here is computed from the oriented boxes, stop lines, road polygons and route in a
:class:`~found_rl.world.WorldSnapshot`, so SUMO and CARLA runs are judged alike.
:class:`InfractionMonitor` holds the little state the leaderboard rules need across steps
(blocked timer, stop-sign stops, de-duplication); the geometry lives in
:mod:`found_rl.infractions.geometry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from found_rl.events import Infraction, InfractionKind
from found_rl.infractions.geometry import (
    DrivableArea,
    crossed_stop_lines,
    drivable_area,
    ego_corners,
    ego_front_xy,
    ego_tail_segment,
    overlapping_boxes,
    route_lane_family,
    stop_zone_mask,
    tail_crossed_lines,
)
from found_rl.routes.progress import RouteProgress
from found_rl.world import LightState, WorldSnapshot

TERMINAL_KINDS: frozenset[InfractionKind] = frozenset(
    {
        InfractionKind.COLLISION_VEHICLE,
        InfractionKind.COLLISION_PEDESTRIAN,
        InfractionKind.COLLISION_LAYOUT,
        InfractionKind.RED_LIGHT,
        InfractionKind.ROUTE_DEVIATION,
        InfractionKind.VEHICLE_BLOCKED,
    }
)
"""Infractions that end an episode (ARCHITECTURE §5; stop signs and lanes only cost score)."""

STANDING_MPS = 0.1


def _hit_while_stopped(ego, other_xy: np.ndarray) -> str:
    """A note for a collision the standing ego suffered from behind (it still counts; see docs)."""
    if ego.speed_mps >= STANDING_MPS:
        return ""
    yaw = np.radians(ego.yaw_deg)
    behind = float((other_xy - ego.xy) @ np.array([np.cos(yaw), np.sin(yaw)])) < 0.0
    return ", hit from behind while stopped" if behind else ""


@dataclass(frozen=True)
class InfractionConfig:
    """Thresholds of the infraction rules (defaults: CARLA leaderboard / Roach values).

    Attributes:
        route_deviation_m: ego centre farther than this from the route is a route deviation.
        blocked_speed_mps: below this speed the ego counts as standing.
        blocked_time_s: standing this long is ``vehicle_blocked``.
        offroad_tolerance_m: a box corner may stick out of the road polygons by this much
            (a wheel on the kerb) before it counts as leaving the drivable area.
        outside_lane_margin_m: the ego centre may be this far beyond the half-width of a route
            lane before it counts as outside the route's lanes.
        stop_zone_m: a stop at a stop sign counts when the ego's front is within this distance
            before the stop line.
        stop_speed_mps: speed below which the ego has stopped at a stop sign.
        completed_fraction: route completion at which the route counts as completed.
    """

    route_deviation_m: float = 30.0
    blocked_speed_mps: float = 0.1
    blocked_time_s: float = 90.0
    offroad_tolerance_m: float = 0.3
    outside_lane_margin_m: float = 0.5
    stop_zone_m: float = 5.0
    stop_speed_mps: float = 0.1
    completed_fraction: float = 0.99


class InfractionReport(NamedTuple):
    """Outcome of one step's checks (a NamedTuple: one is built every step).

    Attributes:
        infractions: infractions that started this step, in detection order.
        is_offroad: an ego box corner is off the drivable area (beyond the tolerance).
        is_outside_route_lanes: the ego centre is outside the route's lanes this step.
        outside_lane_m: distance driven outside the route's lanes since reset, metres.
        standing_s: how long the ego has been standing (below the blocked speed), seconds.
        route_completed: the route counts as completed.
    """

    infractions: tuple[Infraction, ...]
    is_offroad: bool
    is_outside_route_lanes: bool
    outside_lane_m: float
    standing_s: float
    route_completed: bool

    @property
    def is_terminal(self) -> bool:
        """The episode really ends: a terminal infraction or a completed route."""
        return self.route_completed or any(i.kind in TERMINAL_KINDS for i in self.infractions)


class InfractionMonitor:
    """Applies the infraction rules step by step for one ego during one episode.

    Each infraction is reported once when it starts: a collision with an actor again only
    after the boxes separated, leaving the road again only after coming back onto it.

    Args:
        config: rule thresholds.
    """

    def __init__(self, config: InfractionConfig | None = None) -> None:
        self.config = config or InfractionConfig()
        self._area: DrivableArea | None = None
        self._lane_family: frozenset[str] = frozenset()
        self._front = np.zeros(2)
        self._tail_near = (0.0, 0.0)
        self._last_red_light: str | None = None
        self._time_s = 0.0
        self._distance_m = 0.0
        self._touching: set[tuple[str, str]] = set()
        self._is_offroad = False
        self._stopped_at: set[str] = set()
        self._standing_s = 0.0
        self._has_deviated = False
        self._outside_lane_m = 0.0

    def reset(self, snapshot: WorldSnapshot) -> None:
        """Start a new episode at ``snapshot`` (the first observation after reset)."""
        self._area = drivable_area(snapshot.map)
        self._lane_family = route_lane_family(snapshot.route.lane_ids, snapshot.map)
        self._front = ego_front_xy(snapshot.ego)
        self._tail_near = ego_tail_segment(snapshot.ego)[0]
        self._last_red_light = None
        self._time_s = snapshot.time_s
        self._distance_m = 0.0
        self._touching = set()
        # An ego spawned with a corner off the road (a lane that starts at the map's edge) has
        # not left the road; only a later departure counts.
        outside_m = self._area.outside_distance_m(ego_corners(snapshot.ego))
        self._is_offroad = bool(outside_m.max() > self.config.offroad_tolerance_m)
        self._stopped_at = set()
        self._standing_s = 0.0
        self._has_deviated = False
        self._outside_lane_m = 0.0

    def has_stopped_at(self, sign_id: str) -> bool:
        """Whether the ego has already stopped at stop sign ``sign_id`` (and not yet passed it)."""
        return sign_id in self._stopped_at

    def step(self, snapshot: WorldSnapshot, progress: RouteProgress) -> InfractionReport:
        """Check one new snapshot; ``progress`` is the route tracker's result for it."""
        if self._area is None:
            raise RuntimeError("InfractionMonitor.step called before reset")
        cfg = self.config
        ego = snapshot.ego
        speed_mps = ego.speed_mps
        found: list[Infraction] = []

        def report(kind: InfractionKind, actor_id: str | None = None, detail: str = "") -> None:
            xy = (float(ego.xy[0]), float(ego.xy[1]))
            found.append(Infraction(kind, snapshot.step, xy, actor_id, speed_mps, detail))

        # Collisions with vehicles and walkers (oriented boxes).
        touching: set[tuple[str, str]] = set()
        for group, actors, kind in (
            ("vehicle", snapshot.vehicles, InfractionKind.COLLISION_VEHICLE),
            ("walker", snapshot.walkers, InfractionKind.COLLISION_PEDESTRIAN),
        ):
            for i in overlapping_boxes(ego.xy, ego.yaw_deg, ego.half_extent, actors):
                key = (group, actors.ids[i])
                touching.add(key)
                if key not in self._touching:
                    detail = f"collision with {group} {actors.ids[i]} at {speed_mps:.1f} m/s"
                    report(kind, actors.ids[i], detail + _hit_while_stopped(ego, actors.xy[i]))
        self._touching = touching

        # Leaving the drivable area (the SUMO world has no kerbs or walls to hit).
        outside_m = self._area.ego_outside_m(ego)
        corner_outside_m = max(outside_m[:4])
        is_offroad = corner_outside_m > cfg.offroad_tolerance_m
        if is_offroad and not self._is_offroad:
            report(InfractionKind.COLLISION_LAYOUT, None, f"left the road by {corner_outside_m:.2f} m")
        self._is_offroad = is_offroad

        # Red lights: the leaderboard's test, the ego's tail crossing a red light's stop line.
        lights = snapshot.traffic_lights
        tail_near, _ = ego_tail_segment(ego)
        for i in tail_crossed_lines(self._tail_near, ego, lights, snapshot.map):
            light_id = lights.ids[i]
            if lights.states[i] == LightState.RED and light_id != self._last_red_light:
                self._last_red_light = light_id  # one run per light, however long the tail takes
                report(InfractionKind.RED_LIGHT, light_id, f"ran red light {light_id}")
        self._tail_near = tail_near
        # Stop signs: the front bumper crossing a stop line of its lane.
        front = ego_front_xy(ego)
        signs = snapshot.stop_signs
        if len(signs):
            if speed_mps < cfg.stop_speed_mps:
                heading = (front - ego.xy) / max(float(ego.half_extent[0]), 1e-9)
                zone = stop_zone_mask(front, heading, signs, snapshot.map, cfg.stop_zone_m)
                self._stopped_at.update(signs.ids[i] for i in np.flatnonzero(zone))
            for i in crossed_stop_lines(self._front, front, signs, snapshot.map):
                if signs.ids[i] not in self._stopped_at:
                    report(InfractionKind.STOP_SIGN, signs.ids[i], f"did not stop at stop sign {signs.ids[i]}")
                self._stopped_at.discard(signs.ids[i])
        self._front = front

        # Route deviation.
        if progress.deviation_m > cfg.route_deviation_m and not self._has_deviated:
            self._has_deviated = True
            report(InfractionKind.ROUTE_DEVIATION, None, f"{progress.deviation_m:.1f} m off the route")

        # Blocked: standing too long (the leaderboard's ActorBlockedTest).
        dt_s = snapshot.time_s - self._time_s
        self._time_s = snapshot.time_s
        self._standing_s = self._standing_s + dt_s if speed_mps < cfg.blocked_speed_mps else 0.0
        if self._standing_s >= cfg.blocked_time_s - 1e-9:
            report(InfractionKind.VEHICLE_BLOCKED, None, f"standing for {self._standing_s:.0f} s")
            self._standing_s = 0.0

        # Distance outside the route's lanes (scored as a fraction, not as events).
        moved_m = progress.distance_driven_m - self._distance_m
        self._distance_m = progress.distance_driven_m
        is_outside = outside_m[4] > 0.0 or self._is_outside_lanes(snapshot, progress)
        if is_outside:
            self._outside_lane_m += moved_m

        return InfractionReport(
            infractions=tuple(found),
            is_offroad=is_offroad,
            is_outside_route_lanes=is_outside,
            outside_lane_m=self._outside_lane_m,
            standing_s=self._standing_s,
            route_completed=progress.completion >= cfg.completed_fraction,
        )

    def _is_outside_lanes(self, snapshot: WorldSnapshot, progress: RouteProgress) -> bool:
        route = snapshot.route
        lane = snapshot.map.lanes.get(route.lane_ids[min(progress.index, len(route.lane_ids) - 1)])
        half_width_m = lane.width_m / 2.0 if lane is not None else 1.75
        if progress.lateral_m <= half_width_m + self.config.outside_lane_margin_m:
            return False
        # Off the route's centreline: still fine on a same-direction neighbour lane.
        lane_id = snapshot.ego.lane_id
        return lane_id is None or lane_id not in self._lane_family
