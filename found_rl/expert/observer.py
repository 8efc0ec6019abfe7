"""Turn a privileged WorldSnapshot into the expert's ExpertObservation.

This is the stateful half of the expert: it tracks the ego's index on the route (so a route
that passes near itself never confuses it) and remembers the stop signs the ego has already
stopped at. The hazard geometry (leader, lights, walkers) comes from :mod:`found_rl.hazards`,
shared with the rewards.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from found_rl import hazards
from found_rl.expert.observation import ExpertObservation
from found_rl.routes.ahead import route_arc_m, route_points_ego
from found_rl.world import ActorBoxes, Route, WorldSnapshot, route_command


@dataclasses.dataclass(frozen=True)
class ObserverConfig:
    """How far and how finely the observer looks.

    Attributes:
        route_points: number of upcoming route points in ``route_ego``.
        route_spacing_m: spacing of those points along the route.
        light_horizon_m, leader_horizon_m, walker_horizon_m, stop_sign_horizon_m: search
            ranges along the route.
        walker_corridor_half_width_m: half-width of the path in which walkers count (the
            ego's half-width plus a margin).
        walker_predict_s: walkers also count where they will be after this many seconds.
        predict_crossing: treat vehicles predicted to cut into the path as obstacles (on by
            default since the second session: it avoids the junction collisions on town_spider).
        crossing_horizons_s: prediction horizons for vehicles cutting into the path.
        crossing_margin_m: a predicted vehicle counts if at most ``v·t + margin`` ahead.
        yield_at_unsignalised_junctions: give way to crossing traffic at junctions without lights.
        yield_horizon_m: how far ahead an unsignalised junction entry is looked for.
        yield_radius_m: vehicles this close to that entry may claim it.
        yield_min_speed_mps: vehicles slower than this are treated as waiting.
        index_window: waypoints searched around the last route index.
        stop_served_speed_mps: speed below which the ego counts as stopped at a stop sign.
        stop_served_distance_m: how close to the stop line that stop must happen.
    """

    route_points: int = 25
    route_spacing_m: float = 2.0
    light_horizon_m: float = 50.0
    leader_horizon_m: float = 40.0
    walker_horizon_m: float = 20.0
    stop_sign_horizon_m: float = 30.0
    walker_corridor_half_width_m: float = 1.7
    walker_predict_s: float = 1.0
    predict_crossing: bool = True
    crossing_horizons_s: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    crossing_margin_m: float = 6.0
    yield_at_unsignalised_junctions: bool = True
    yield_horizon_m: float = 25.0
    yield_radius_m: float = 20.0
    yield_min_speed_mps: float = 0.5
    index_window: int = 40
    stop_served_speed_mps: float = 0.1
    stop_served_distance_m: float = 4.0


class ExpertObserver:
    """Stateful feature extractor for one ego; call :meth:`reset` at every episode start."""

    def __init__(self, config: ObserverConfig | None = None) -> None:
        self.config = config or ObserverConfig()
        self._route: Route | None = None
        self._arc_m = np.zeros(0)
        self._index: int | None = None
        self._served_stops: set[str] = set()
        self._previous_vehicles: tuple[float, dict[str, np.ndarray]] | None = None

    def reset(self) -> None:
        self._route = None
        self._index = None
        self._served_stops = set()
        self._previous_vehicles = None

    @property
    def route_index(self) -> int | None:
        """The ego's current route waypoint index (None before the first observation)."""
        return self._index

    def observe(self, snapshot: WorldSnapshot) -> ExpertObservation:
        route = snapshot.route
        if route is not self._route or snapshot.step == 0:
            self.reset()
            self._route = route
            self._arc_m = route_arc_m(route)
        ego = snapshot.ego
        index = hazards.nearest_route_index(route, ego.xy, self._index, self.config.index_window)
        self._index = index
        arc_now = float(self._arc_m[index])

        # Other vehicles move as measured between observations: a simulator glitch that
        # reports a speed for a vehicle that does not move must not fool the predictions.
        snapshot = dataclasses.replace(snapshot, vehicles=self._measured_vehicles(snapshot))
        self._previous_vehicles = (
            snapshot.time_s,
            dict(zip(snapshot.vehicles.ids, snapshot.vehicles.xy, strict=True)),
        )
        leader = hazards.leading_vehicle(snapshot, index, horizon_m=self.config.leader_horizon_m)
        leader_gap_m, leader_speed_mps = None, None
        if leader is not None:
            leader_gap_m, leader_speed_mps = float(leader.distance_m), float(leader.speed_along_route_mps)
        crossing_gap_m = self._crossing_vehicle_m(snapshot, index) if self.config.predict_crossing else None
        if crossing_gap_m is not None and (leader_gap_m is None or crossing_gap_m < leader_gap_m):
            leader_gap_m, leader_speed_mps = crossing_gap_m, 0.0
        light = hazards.affecting_light(snapshot, index, horizon_m=self.config.light_horizon_m)
        walker_distance_m = self._nearest_walker_m(snapshot, index)
        yield_distance_m = None
        if self.config.yield_at_unsignalised_junctions:
            yield_distance_m = self._unsignalised_junction_conflict_m(snapshot, index, arc_now, light)
        return ExpertObservation(
            speed_mps=ego.forward_speed_mps,
            command=int(route_command(route, index, ego.forward_speed_mps)),
            route_ego=self._route_ahead_ego(snapshot, arc_now),
            leader_gap_m=leader_gap_m,
            leader_speed_mps=leader_speed_mps,
            light_state=0 if light is None else int(light.state),
            light_distance_m=None if light is None else float(light.distance_m),
            light_remaining_ratio=-1.0 if light is None else float(light.remaining_ratio),
            stop_sign_distance_m=self._unserved_stop_sign(snapshot, index),
            walker_distance_m=walker_distance_m,
            yield_distance_m=yield_distance_m,
            remaining_route_m=max(float(self._arc_m[-1]) - arc_now, 0.0),
        )

    def _measured_vehicles(self, snapshot: WorldSnapshot) -> ActorBoxes:
        """The snapshot's vehicles with velocities measured from their last two positions.

        A vehicle seen for the first time keeps its reported velocity.
        """
        vehicles = snapshot.vehicles
        previous = self._previous_vehicles
        if previous is None or len(vehicles) == 0:
            return vehicles
        time_s, positions = previous
        dt_s = snapshot.time_s - time_s
        if dt_s <= 0.0:
            return vehicles
        velocity = vehicles.velocity_xy.copy()
        for k, vehicle_id in enumerate(vehicles.ids):
            last_xy = positions.get(vehicle_id)
            if last_xy is not None:
                velocity[k] = (vehicles.xy[k] - last_xy) / dt_s
        return dataclasses.replace(vehicles, velocity_xy=velocity)

    def _unsignalised_junction_conflict_m(
        self, snapshot: WorldSnapshot, index: int, arc_now: float, light: hazards.LightHazard | None
    ) -> float | None:
        """Distance to the entry of the next junction without lights, if traffic is crossing it.

        Other drivers do not yield to the ego (it is placed, not driven, in SUMO), so before an
        unsignalised junction the expert gives way to any moving vehicle near the junction
        that is not heading the ego's way. Once inside, it does not stop (it clears the box).
        """
        route, lanes = snapshot.route, snapshot.map.lanes
        config = self.config

        def is_junction(k: int) -> bool:
            lane = lanes.get(route.lane_ids[k])
            return lane.is_junction if lane is not None else route.lane_ids[k].startswith(":")

        if is_junction(index):
            return None
        end = int(np.searchsorted(self._arc_m, arc_now + config.yield_horizon_m))
        entry = next((k for k in range(index, min(end, len(route.xy))) if is_junction(k)), None)
        if entry is None:
            return None
        distance_m = float(self._arc_m[entry] - arc_now) - float(snapshot.ego.half_extent[0])
        if light is not None and light.distance_m <= distance_m + 3.0:
            return None  # a light governs this junction
        vehicles = snapshot.vehicles
        if len(vehicles) == 0:
            return None
        entry_xy = route.xy[entry]
        route_yaw = math.radians(float(route.yaw_deg[entry]))
        to_entry = entry_xy - vehicles.xy
        distance_to_entry = np.hypot(to_entry[:, 0], to_entry[:, 1])
        speed = vehicles.speed_mps
        approaching = np.einsum("ij,ij->i", vehicles.velocity_xy, to_entry) > 0.0
        heading_gap = np.abs((np.radians(vehicles.yaw_deg) - route_yaw + np.pi) % (2 * np.pi) - np.pi)
        conflict = (
            (distance_to_entry < config.yield_radius_m)
            & (speed > config.yield_min_speed_mps)
            & approaching
            & (heading_gap > math.radians(30.0))
        )
        return distance_m if bool(conflict.any()) else None

    def _crossing_vehicle_m(self, snapshot: WorldSnapshot, index: int) -> float | None:
        """Gap to the nearest vehicle that will cut into the path ahead, if any.

        Each vehicle is moved along its velocity for a few horizons; one whose predicted box
        overlaps the path no farther ahead than the ego can reach by then (plus a margin) is
        an obstacle standing there. This makes the expert yield to cross traffic in
        junctions without lights, which the leader search (boxes in the path *now*) misses.
        """
        vehicles = snapshot.vehicles
        if len(vehicles) == 0:
            return None
        speed = max(snapshot.ego.forward_speed_mps, 0.0)
        gaps = []
        for horizon_s in self.config.crossing_horizons_s:
            moved = dataclasses.replace(vehicles, xy=vehicles.xy + horizon_s * vehicles.velocity_xy)
            hazard = hazards.leading_vehicle(
                dataclasses.replace(snapshot, vehicles=moved), index, horizon_m=self.config.leader_horizon_m
            )
            reach_m = speed * horizon_s + self.config.crossing_margin_m
            if hazard is not None and hazard.distance_m <= reach_m:
                gaps.append(float(hazard.distance_m))
        return min(gaps, default=None)

    def _nearest_walker_m(self, snapshot: WorldSnapshot, index: int) -> float | None:
        """Distance to the nearest walker in the path now or after ``walker_predict_s``.

        The corridor is about the ego's width plus a margin, so walkers on the sidewalk
        beside the lane do not stop the car unless they are walking into its path.
        """
        walkers = snapshot.walkers
        if len(walkers) == 0:
            return None
        distances = []
        for horizon_s in (0.0, self.config.walker_predict_s):
            moved = dataclasses.replace(walkers, xy=walkers.xy + horizon_s * walkers.velocity_xy)
            in_path = hazards.walkers_in_path(
                dataclasses.replace(snapshot, walkers=moved),
                index,
                horizon_m=self.config.walker_horizon_m,
                corridor_half_width_m=self.config.walker_corridor_half_width_m,
            )
            distances.extend(float(w.distance_m) for w in in_path)
        return min(distances, default=None)

    def _route_ahead_ego(self, snapshot: WorldSnapshot, arc_now: float) -> tuple[tuple[float, float], ...]:
        """Upcoming route points, evenly spaced by arc length, in the ego frame."""
        config = self.config
        wanted = arc_now + config.route_spacing_m * np.arange(config.route_points)
        wanted = wanted[wanted <= self._arc_m[-1] + 1e-6]
        points = route_points_ego(snapshot.route, wanted, snapshot.ego.xy, snapshot.ego.yaw_deg)
        return tuple((float(x), float(y)) for x, y in points)

    def _unserved_stop_sign(self, snapshot: WorldSnapshot, index: int) -> float | None:
        """Distance to the next stop sign the ego has not yet stopped at, if any."""
        sign = hazards.affecting_stop_sign(snapshot, index, horizon_m=self.config.stop_sign_horizon_m)
        if sign is None or sign.sign_id in self._served_stops:
            return None
        is_stopped = abs(snapshot.ego.forward_speed_mps) < self.config.stop_served_speed_mps
        if is_stopped and sign.distance_m < self.config.stop_served_distance_m:
            self._served_stops.add(sign.sign_id)
            return None
        return float(sign.distance_m)
