"""The CARLA world as WorldSnapshots: a scenario's town, route, traffic and ego on a CARLA server.

The backend connects (bounded timeout and retries, version check), loads the scenario's town
or OpenDRIVE map, and runs it synchronously at 10 Hz with a seeded Traffic Manager in
synchronous mode. A reset destroys everything the previous episode spawned (one batch), spawns
the ego at its route start (moving along the route when the spot is blocked), the episode's
autopilot vehicles and AI walkers, and the ego's collision and lane-invasion sensors. Snapshots
carry the same content as the SUMO backend's (ARCHITECTURE §2), so the BEV, rewards,
infractions, expert and evaluation run unchanged; CARLA's frame is already the world frame.

A tick that times out or fails means a dead or hung server: with a supervised server
(``server=``) the server is restarted and the world rebuilt, and :class:`CarlaServerLost`
tells the sampler the step is lost (the clip ends truncated, as for a dead worker).
``close`` destroys the backend's actors and restores the server's settings.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Protocol

import numpy as np

from found_rl.actions import Controls
from found_rl.routes import RouteSampling, parse_routes
from found_rl.routes.town_planner import TownRoutePlanner
from found_rl.scenario import Scenario
from found_rl.sim.carla import actors as spawn
from found_rl.sim.carla.connection import CarlaEndpoint, connect, endpoint_from_env, import_carla, load_world
from found_rl.sim.carla.errors import CarlaServerLost, CarlaSetupError
from found_rl.sim.carla.sensors import EgoSensors
from found_rl.sim.carla.signals import TrafficLightTable, stop_sign_lines
from found_rl.sim.carla.town_geometry import lane_key, load_town_geometry
from found_rl.world import STEP_S, EgoState, MapGeometry, Route, WorldSnapshot

SPAWN_POINT_SPACING_M = 12.0


class SupervisedServer(Protocol):
    """A server the backend may restart (``found_rl.sim.carla.supervisor.ManagedServer``)."""

    @property
    def endpoint(self) -> CarlaEndpoint: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


class CarlaBackend:
    """A CARLA world for one scenario (see the module docstring).

    Args:
        scenario: a scenario with ``backend: carla``.
        endpoint: the server to use; default ``$FOUND_RL_CARLA`` or ``localhost:2000``.
        server: a supervised server (its endpoint is used); restarted when it dies or hangs.
        stop_server_on_close: stop ``server`` in :meth:`close` (a server started for this env).
        carla_module: the ``carla`` client module (tests pass a scripted stand-in).

    Attributes:
        map: static map geometry of the town.
        num_routes: routes in the scenario's route file (0 with random routes).
        lane_invasions: lane-marking types the sensor reported in the last step.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        endpoint: CarlaEndpoint | None = None,
        server: SupervisedServer | None = None,
        stop_server_on_close: bool = False,
        carla_module: ModuleType | None = None,
    ) -> None:
        if scenario.backend != "carla":
            raise ValueError(f"CarlaBackend needs backend: carla, got {scenario.backend!r}")
        self.scenario = scenario
        self._carla = carla_module or import_carla()
        self._server = server
        self._stop_server_on_close = stop_server_on_close and server is not None
        self.endpoint = server.endpoint if server is not None else endpoint or endpoint_from_env()
        self._ledger = spawn.ActorLedger()
        self._sensors: EgoSensors | None = None
        self._world = None
        self._route: Route | None = None
        self._step = 0
        self._closed = False
        self.lane_invasions: tuple[str, ...] = ()
        self._open_world()
        try:
            self.map: MapGeometry = load_town_geometry(self._map)
            self.planner = TownRoutePlanner(self.map, RouteSampling.of_scenario(scenario.routes))
            self._routes = self._plan_routes()
            self.num_routes = len(self._routes)
            self._spawn_points = self._map.get_spawn_points() or self._lane_spawn_points()
        except BaseException:
            # A server left in synchronous mode with nobody ticking it hangs for every client.
            self.close()
            raise

    # ------------------------------------------------------------------ server and world
    def _open_world(self) -> None:
        carla, endpoint = self._carla, self.endpoint
        self._client = connect(carla, endpoint)
        world = load_world(carla, self._client, self.scenario.map, endpoint)
        self._original_settings = world.get_settings()
        settings = world.get_settings()
        settings.synchronous_mode = True
        settings.fixed_delta_seconds = STEP_S
        settings.no_rendering_mode = True  # the BEV is drawn from snapshots; sensors need no frames
        settings.deterministic_ragdolls = True
        world.apply_settings(settings)
        self._traffic_manager = self._client.get_trafficmanager(endpoint.traffic_manager_port)
        self._traffic_manager.set_synchronous_mode(True)
        self._traffic_manager.set_random_device_seed(self.scenario.seed)
        self._world, self._map = world, world.get_map()
        self._world.tick(endpoint.timeout_s)
        actors = world.get_actors()
        self._lights = TrafficLightTable(list(actors.filter("traffic.traffic_light*")))
        self._stop_signs = stop_sign_lines(list(actors.filter("traffic.stop*")), self._map, carla)

    def _plan_routes(self) -> list[Route]:
        routes_file = self.scenario.routes.file
        if routes_file is None:
            return []
        town = self.scenario.map.town
        routes = []
        for spec in parse_routes(routes_file):
            if town is not None and spec.town and spec.town != town:
                raise CarlaSetupError(
                    f"{routes_file}: route {spec.route_id!r} is for town {spec.town}, map.town is {town}"
                )
            try:
                routes.append(self.planner.plan(spec))
            except ValueError as exc:
                raise CarlaSetupError(f"{routes_file}: {exc}") from None
        return routes

    def _ground_z(self, x: float, y: float) -> float:
        """Road height under ``(x, y)`` (from the nearest driving waypoint)."""
        carla = self._carla
        waypoint = self._map.get_waypoint(carla.Location(x=x, y=y, z=0.0), project_to_road=True,
                                          lane_type=carla.LaneType.Driving)  # fmt: skip
        return float(waypoint.transform.location.z) if waypoint is not None else 0.0

    def _lane_spawn_points(self) -> list:
        """Spawn points every 12 m along non-junction lanes, for maps that define none."""
        carla, points = self._carla, []
        for lane_id in sorted(self.map.lanes):
            lane = self.map.lanes[lane_id]
            if lane.is_junction:
                continue
            line = lane.centerline
            along = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(line, axis=0), axis=1))])
            for s in np.arange(SPAWN_POINT_SPACING_M / 2, along[-1] - 3.0, SPAWN_POINT_SPACING_M):
                i = min(int(np.searchsorted(along, s)), len(line) - 1)
                direction = line[min(i + 1, len(line) - 1)] - line[max(i - 1, 0)]
                yaw = math.degrees(math.atan2(direction[1], direction[0]))
                x, y = float(line[i, 0]), float(line[i, 1])
                location = carla.Location(x=x, y=y, z=self._ground_z(x, y) + 0.5)
                points.append(carla.Transform(location, carla.Rotation(yaw=yaw)))
        return points

    def _tick(self) -> None:
        try:
            self._world.tick(self.endpoint.timeout_s)
        except RuntimeError as exc:
            self._lose_server(exc)

    def _lose_server(self, exc: Exception) -> None:
        """The server died or hung: restart it when supervised, and say the step is lost."""
        address = self.endpoint.address
        self._forget_world()
        if self._server is None:
            raise CarlaServerLost(
                f"CARLA server at {address} did not answer a tick within {self.endpoint.timeout_s:g} s ({exc}); "
                "it is not supervised here: restart it, or let found-rl start it (`found-rl carla up`)"
            ) from exc
        self._server.restart()
        self._open_world()
        raise CarlaServerLost(
            f"CARLA server at {address} died or hung ({exc}); restarted it, this step is lost: reset the env"
        ) from exc

    def _forget_world(self) -> None:
        self._world, self._route, self._sensors = None, None, None
        self._ledger = spawn.ActorLedger()  # the actors died with the server

    # ------------------------------------------------------------------------- episodes
    def reset(self, *, seed: int, route_index: int | None = None) -> WorldSnapshot:
        """Start an episode; its traffic and walkers are drawn from ``seed``.

        A supervised server found dead or hung during the reset is restarted and the reset
        made again on the fresh server, so a server lost between episodes costs no episode.

        Args:
            seed: episode seed (traffic counts and placement, Traffic Manager, walkers, route).
            route_index: index into the route file; ``None`` draws one from ``seed``.

        Raises:
            CarlaServerLost: the server is gone and not supervised (or died again at once).
        """
        if self._closed:
            raise RuntimeError("reset() on a closed CarlaBackend")
        for attempt in range(2):
            rng = np.random.default_rng(seed)
            route = self._choose_route(rng, seed, route_index)
            try:
                if self._world is None:
                    self._open_world()
                return self._start_episode(route, rng, seed)
            except spawn.EgoSpawnBlocked:
                raise
            except CarlaServerLost:
                if self._server is None or attempt == 1:
                    raise
                # _lose_server restarted the server and rebuilt the world: reset again.
            except RuntimeError as exc:  # an RPC to a dead or hung server
                self._forget_world()
                if self._server is None or attempt == 1:
                    address = self.endpoint.address
                    raise CarlaServerLost(f"CARLA server at {address} failed during reset ({exc})") from exc
                self._server.restart()
        raise AssertionError("unreachable")

    def _start_episode(self, route: Route, rng: np.random.Generator, seed: int) -> WorldSnapshot:
        carla, world = self._carla, self._world
        self._destroy_actors()
        self._route = route
        self._traffic_manager.set_random_device_seed(seed)
        world.set_pedestrians_seed(seed)
        ego, _ = spawn.spawn_ego(world, carla, route.xy, route.yaw_deg, self._ground_z)
        self._ledger.ego = ego
        self._sensors = EgoSensors(world, carla, ego)
        self._ledger.sensors = [self._sensors.collision, self._sensors.lane_invasion]
        traffic = self.scenario.traffic
        start_xy = route.xy[0]
        num_vehicles = int(rng.integers(traffic.vehicles[0], traffic.vehicles[1] + 1))
        num_walkers = int(rng.integers(traffic.walkers[0], traffic.walkers[1] + 1))
        self._ledger.vehicles = spawn.spawn_vehicles(
            self._client, world, carla, num_vehicles, rng, self._spawn_points, start_xy,
            self.endpoint.traffic_manager_port,
        )  # fmt: skip
        walkers, controllers = spawn.spawn_walkers(self._client, world, carla, num_walkers, rng, start_xy)
        self._ledger.walkers, self._ledger.controllers = walkers, controllers
        self._tick()  # controllers start after their walkers exist on the server
        spawn.start_walkers(world, controllers, rng)
        self._tick()
        self._sensors.drain()  # settling onto the road is not an event of the episode
        self._step = 0
        return self._snapshot(Controls(0.0, 0.0, 0.0))

    def _choose_route(self, rng: np.random.Generator, seed: int, route_index: int | None) -> Route:
        if self.num_routes == 0:
            if route_index is not None:
                raise ValueError(f"route_index={route_index} given, but the scenario uses random routes")
            return self.planner.random_route(rng, self.scenario.routes.random_length_m, f"random-{seed}")
        if route_index is None:
            route_index = int(rng.integers(self.num_routes))
        if not 0 <= route_index < self.num_routes:
            raise ValueError(f"route_index must be in [0, {self.num_routes - 1}], got {route_index}")
        return self._routes[route_index]

    def step(self, controls: Controls) -> WorldSnapshot:
        """Apply ``controls`` to the ego for one 0.1 s step.

        Raises:
            CarlaServerLost: the server died or hung (restarted if supervised); reset next.
        """
        if self._route is None or self._ledger.ego is None:
            raise RuntimeError("step() before reset() (or after the server was lost): call reset() first")
        control = self._carla.VehicleControl(
            throttle=float(controls.throttle), steer=float(controls.steer), brake=float(controls.brake)
        )
        self._ledger.ego.apply_control(control)
        self._tick()
        self._step += 1
        return self._snapshot(controls)

    def _snapshot(self, controls: Controls) -> WorldSnapshot:
        carla, ego = self._carla, self._ledger.ego
        transform = ego.get_transform()
        location, yaw_deg = transform.location, float(transform.rotation.yaw)
        yaw = math.radians(yaw_deg)
        box = ego.bounding_box
        centre = np.array([
            location.x + box.location.x * math.cos(yaw) - box.location.y * math.sin(yaw),
            location.y + box.location.x * math.sin(yaw) + box.location.y * math.cos(yaw),
        ])  # fmt: skip
        velocity, accel = ego.get_velocity(), ego.get_acceleration()
        velocity_xy = np.array([velocity.x, velocity.y], dtype=np.float64)
        speed = float(np.hypot(*velocity_xy))
        waypoint = self._map.get_waypoint(location, project_to_road=False, lane_type=carla.LaneType.Driving)
        reverse = bool(getattr(ego.get_control(), "reverse", False))
        collided, self.lane_invasions = self._sensors.drain()
        radius = self.scenario.traffic.observe_radius_m
        return WorldSnapshot(
            step=self._step,
            time_s=self._step * STEP_S,
            ego=EgoState(
                xy=centre,
                yaw_deg=yaw_deg,
                velocity_xy=velocity_xy,
                half_extent=np.array([box.extent.x, box.extent.y], dtype=np.float64),
                throttle=controls.throttle,
                steer=controls.steer,
                brake=controls.brake,
                gear=-1 if reverse else (1 if speed > 0.0 else 0),
                lane_id=lane_key(waypoint) if waypoint is not None else None,
                acceleration_mps2=float(accel.x * math.cos(yaw) + accel.y * math.sin(yaw)),
            ),
            vehicles=spawn.actor_boxes(self._ledger.vehicles, centre, radius),
            walkers=spawn.actor_boxes(self._ledger.walkers, centre, radius),
            traffic_lights=self._lights.stop_lines(),
            stop_signs=self._stop_signs,
            route=self._route,
            map=self.map,
            ego_collided_with=collided,
        )

    # ------------------------------------------------------------------------- shutdown
    def _destroy_actors(self) -> None:
        if self._sensors is not None:
            self._sensors.stop()
            self._sensors = None
        spawn.destroy_all(self._client, self._carla, self._ledger)

    def close(self) -> None:
        """Destroy every actor this backend spawned, restore the server's settings (and stop a
        server started for this backend)."""
        if self._closed:
            return
        self._closed = True
        if self._world is not None:  # else the server is gone, and its actors and settings with it
            try:
                self._destroy_actors()
                self._traffic_manager.set_synchronous_mode(False)
                self._world.apply_settings(self._original_settings)
            except RuntimeError:
                pass  # the server went away meanwhile: nothing left to restore
            self._world = None
        if self._stop_server_on_close:
            self._server.stop()
