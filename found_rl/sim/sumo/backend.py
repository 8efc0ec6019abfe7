"""The embedded SUMO world: libsumo traffic around a kinematic-bicycle ego, as WorldSnapshots.

One libsumo simulation per process runs at 10 Hz. Background traffic is warmed up once per
backend and saved as a few SUMO states; a reset loads one of them (chosen by the reset seed),
thins traffic to the episode's counts, clears the spawn area and inserts the ego, so a reset
takes milliseconds instead of restarting SUMO. Each step the ego moves by the bicycle model
and is placed into SUMO with ``moveToXY`` (``keepRoute=3`` on its route's lanes, ``2`` off them),
so SUMO's drivers see it and react (ARCHITECTURE §2, §3). Warm states hold vehicles only; each
reset starts the episode's walkers afresh on seeded walking plans.

Determinism: SUMO's own driver randomness is switched off and every random choice comes from
the reset seed, so a process that makes the same resets with the same seeds and controls
replays exactly, and a reset's first snapshot depends on its seed alone. ``loadState`` over a
populated network leaves the replaced vehicles' lane and junction registrations behind (loaded
vehicles then freeze mid-lane while reporting a speed, and episodes depend on what ran
before), so a fast reset first removes every actor and runs one empty step; after that an
episode replays exactly whatever ran before it, in any process (walkers restored from a
saved state did not: some resumed at the wrong end of their sidewalk in some processes only).
``traffic.reset: exact`` reloads the network as
well (``libsumo.load`` with ``--load-state``, tens of ms per reset) as a fallback
(tests/found_rl/sim/sumo/test_backend.py checks each guarantee).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import warnings
import weakref
from pathlib import Path

import numpy as np

from found_rl.actions import Controls
from found_rl.errors import UserError
from found_rl.maps import build_network, load_map_geometry, read_network
from found_rl.routes import RoutePlanner, RouteSampling, parse_routes
from found_rl.scenario import Scenario
from found_rl.sim import vehicle_dynamics
from found_rl.sim.sumo import runtime
from found_rl.sim.sumo.actors import ContextSubscription
from found_rl.sim.sumo.lights import TrafficLightTable, running_programs, stop_sign_lines
from found_rl.sim.sumo.spawn_safety import EgoEnvelope
from found_rl.sim.sumo.traffic import (
    EGO_TYPE,
    TripPool,
    VehicleDeparture,
    define_types,
    vehicle_id,
    walker_id,
)
from found_rl.sim.sumo.world_checks import world_warnings
from found_rl.sim.vehicle_dynamics import VehicleParams, VehicleState
from found_rl.world import (
    STEP_S,
    EgoState,
    MapGeometry,
    Route,
    WorldSnapshot,
)
from found_rl.world.frames import SumoFrame

EGO_ID = "ego"
NUM_WARM_STATES = 4
WARM_STATE_SPACING_S = 15.0
SPAWN_CLEARANCE_M = 15.0
SPAWN_MARGIN_M = 0.5  # between the ego's rear and the start of its first lane
MOVE_MATCH_M = 5.0  # how far from a lane SUMO still maps the ego onto it
DEFERRED_RETRY_STEPS = 10  # a car with no safe spawn point tries again after this many steps
# Background drivers decide every 0.2 s (a reaction time) while positions update every 0.1 s;
# this halves SUMO's car-following work per step. Not on a network with a rail crossing: there
# SUMO 1.28 crashes (segfault) at the first step after a saved state with drivers between two
# decisions is loaded (tests/found_rl/sim/sumo/test_networks.py), so drivers decide every step.
DRIVER_ACTION_STEP_S = 0.2


class SumoBackend:
    """A SUMO world for one scenario (see the module docstring).

    Attributes:
        map: static map geometry in CARLA's frame.
        num_routes: routes in the scenario's route file (0 with random routes).
        frame: the network's SUMO → CARLA frame.
        planner: dense route planner on this network.
    """

    def __init__(
        self, scenario: Scenario, *, vehicle: VehicleParams | None = None
    ) -> None:
        if scenario.backend != "sumo":
            raise ValueError(
                f"SumoBackend needs backend: sumo, got {scenario.backend!r}"
            )
        self.scenario = scenario
        self.vehicle = vehicle = vehicle or VehicleParams()
        self._libsumo = runtime.import_libsumo()
        self._net_path = build_network(scenario.map)
        self._net = read_network(self._net_path)
        self.frame = SumoFrame(tuple(float(v) for v in self._net.getLocationOffset()))
        self.map: MapGeometry = load_map_geometry(self._net_path, self._net)
        for line in world_warnings(scenario, self._net_path, self._net):
            warnings.warn(f"{scenario.source_path or 'scenario'}: {line}", stacklevel=2)
        self.planner = RoutePlanner(self._net, self.frame, RouteSampling.of_scenario(scenario.routes))
        self._routes: list[Route] = []
        if scenario.routes.file is not None:
            for spec in parse_routes(scenario.routes.file, scenario.routes.town):
                try:
                    self._routes.append(self.planner.plan(spec))
                except ValueError as exc:
                    raise UserError(f"{scenario.routes.file}: {exc}") from None
        self.num_routes = len(self._routes)
        self._stop_signs = stop_sign_lines(self._net, self.frame)
        has_rail_crossing = any(node.getType() == "rail_crossing" for node in self._net.getNodes())
        self._driver_action_step_s = STEP_S if has_rail_crossing else DRIVER_ACTION_STEP_S
        self._state_dir = Path(tempfile.mkdtemp(prefix="found-rl-sumo-"))
        # Delete the warm states even if the backend is never closed.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._state_dir, True)
        self._warm_states: list[Path] = []
        self._lights: TrafficLightTable | None = None
        self._trips: TripPool | None = None
        self._closed = False
        self._resets = 0
        self._rng = np.random.default_rng(scenario.seed)
        self._route: Route | None = None
        self._ego = VehicleState(0.0, 0.0, 0.0)
        self._controls = Controls(0.0, 0.0, 0.0)
        self._step = 0
        self._num_walkers = 0
        self._ego_route_id = ""
        self._spawn_index = 0
        self._earliest_switch_s = -np.inf
        # Background cars SUMO has not inserted yet (re-checked against the ego while they
        # wait), and cars whose every drawn spawn point was too close to the ego.
        self._departures: dict[str, VehicleDeparture] = {}
        self._deferred: list[str] = []
        self._context = ContextSubscription(
            self._libsumo, self.frame, scenario.traffic.observe_radius_m
        )
        self._ego_half_extent = np.array(
            [vehicle.length_m / 2.0, vehicle.width_m / 2.0]
        )

    # ------------------------------------------------------------------ simulation lifetime
    def _sumo_options(self) -> list[str]:
        return [
            "--net-file", str(self._net_path),
            "--step-length", str(STEP_S), "--seed", str(self.scenario.seed),
            "--default.action-step-length", str(self._driver_action_step_s),
            "--no-step-log", "true", "--no-warnings", "true",
            "--collision.action", "warn",
            "--time-to-teleport", "120", "--ignore-route-errors", "true",
            "--pedestrian.model", "nonInteracting", "--save-state.rng", "true",
        ]  # fmt: skip

    def _start_simulation(self) -> None:
        """Start libsumo on this network, draw trips, warm traffic up and save warm states."""
        import sumolib

        ts = self._libsumo
        ts.start([sumolib.checkBinary("sumo"), *self._sumo_options()])
        define_types(ts, self.vehicle.length_m, self.vehicle.width_m)
        warm_rng = np.random.default_rng(self.scenario.seed)
        self._trips = TripPool.draw(ts, self._net, warm_rng)
        self._lights = TrafficLightTable(self._net, self.frame, running_programs(ts))
        traffic = self.scenario.traffic
        for k in range(traffic.vehicles[1]):
            self._trips.add_vehicle(ts, vehicle_id(k), warm_rng)
        # Warm states hold vehicles only: walkers never affect SUMO's drivers (nonInteracting
        # model), and each reset starts its own (see _start_walkers).
        self._warm_states = []
        steps_until_save = round(traffic.warmup_s / STEP_S)
        for index in range(NUM_WARM_STATES):
            for _ in range(steps_until_save):
                # Respawn before the step: a car added after the last step would be saved as
                # loaded but not yet inserted, and appear at the first step of an episode
                # (anywhere, next to the ego too) without being listed as pending.
                self._respawn(warm_rng, num_walkers=0, with_ego=False)
                ts.simulationStep()
            path = self._state_dir / f"warm{index}.sbx"
            ts.simulation.saveState(str(path))
            self._warm_states.append(path)
            steps_until_save = round(WARM_STATE_SPACING_S / STEP_S)

    def close(self) -> None:
        """Stop the simulation (if this backend holds it) and delete the warm states."""
        if self._closed:
            return
        self._closed = True
        runtime.release(self)
        self._cleanup()

    # ------------------------------------------------------------------------- episodes
    def reset(self, *, seed: int, route_index: int | None = None) -> WorldSnapshot:
        """Start an episode; its first snapshot depends only on ``seed`` and ``route_index``.

        Args:
            seed: episode seed (traffic counts, warm state, route when not given).
            route_index: index into the route file; ``None`` draws one from ``seed``
                (or a random route when the scenario uses random routes).
        """
        if self._closed:
            raise RuntimeError("reset() on a closed SumoBackend")
        runtime.acquire(self)
        ts = self._libsumo
        rng = np.random.default_rng(seed)
        self._rng = rng
        self._route = self._choose_route(rng, seed, route_index)
        warm_state = str(self._warm_states[int(rng.integers(len(self._warm_states)))])
        if self.scenario.traffic.reset == "exact":
            # A fresh network object: no junction bookkeeping survives from earlier episodes.
            ts.load([*self._sumo_options(), "--load-state", warm_state])
            self._trips.restore_routes(ts)
        else:
            self._empty_network()
            ts.simulation.loadState(warm_state)
            self._resync_traffic_lights()
        self._spawn_index = self._ego_spawn_index(self._route)
        start = self._spawn_index
        # The ego's pose from here on (it stands at the spawn point): traffic is thinned and
        # topped up around it.
        self._ego = VehicleState(
            float(self._route.xy[start, 0]), float(self._route.xy[start, 1]), float(self._route.yaw_deg[start])
        )
        start_xy = self.frame.to_sumo_xy(self._route.xy[start])
        self._thin_traffic(rng, start_xy)
        self._insert_ego()
        self._lights.set_route(self._route.lane_ids)
        self._earliest_switch_s = -np.inf
        ts.simulationStep()
        self._step = 0
        self._controls = Controls(0.0, 0.0, 0.0)
        self._resets += 1
        return self._snapshot()

    def _empty_network(self) -> None:
        """Remove every actor and let SUMO take them off its lanes before a ``loadState``.

        ``loadState`` over a populated network leaves stale lane and junction registrations of
        the replaced vehicles behind: some loaded vehicles then never move again while
        reporting their speed (about a third of the traffic on town_grid). Removals only take
        effect in the next step, so one (cheap, empty) step runs first.
        """
        ts = self._libsumo
        vehicles = (*ts.vehicle.getIDList(), *ts.simulation.getPendingVehicles())
        if EGO_ID in vehicles:
            # A subscription to a vehicle that is gone fails the step.
            ts.vehicle.unsubscribe(EGO_ID)
            self._context.unsubscribe(EGO_ID)
        for vehicle in vehicles:
            ts.vehicle.remove(vehicle)
        for walker in ts.person.getIDList():
            ts.person.remove(walker)
        ts.simulation.step()

    def _resync_traffic_lights(self) -> None:
        """Re-apply each light's loaded phase so its links forget the previous episode's signals.

        Rail signals have no phases to set (their links follow trains).
        """
        ts = self._libsumo
        now_s = ts.simulation.getTime()
        for tls_id in self._lights.resync_ids:
            program, phase = (
                ts.trafficlight.getProgram(tls_id),
                ts.trafficlight.getPhase(tls_id),
            )
            remaining_s = ts.trafficlight.getNextSwitch(tls_id) - now_s
            ts.trafficlight.setRedYellowGreenState(
                tls_id, "o" * len(ts.trafficlight.getRedYellowGreenState(tls_id))
            )
            ts.trafficlight.setProgram(tls_id, program)
            ts.trafficlight.setPhase(tls_id, phase)
            ts.trafficlight.setPhaseDuration(tls_id, remaining_s)

    def _choose_route(
        self, rng: np.random.Generator, seed: int, route_index: int | None
    ) -> Route:
        if self.num_routes == 0:
            if route_index is not None:
                raise ValueError(
                    f"route_index={route_index} given, but the scenario uses random routes"
                )
            return self.planner.random_route(
                rng, self.scenario.routes.random_length_m, f"random-{seed}"
            )
        if route_index is None:
            route_index = int(rng.integers(self.num_routes))
        if not 0 <= route_index < self.num_routes:
            raise ValueError(
                f"route_index must be in [0, {self.num_routes - 1}], got {route_index}"
            )
        return self._routes[route_index]

    def _envelope(self) -> EgoEnvelope:
        """The ego's current pose and speed in SUMO's frame, for judging spawn points."""
        ego = self._ego
        yaw = math.radians(ego.yaw_deg)
        xy = self.frame.to_sumo_xy(np.array([ego.x_m, ego.y_m]))
        ahead = self.frame.to_sumo_xy(np.array([ego.x_m + math.cos(yaw), ego.y_m + math.sin(yaw)]))
        half_length_m = self.vehicle.length_m / 2.0
        return EgoEnvelope(xy, ahead - xy, ego.speed_mps, half_length_m, self.vehicle.max_brake_mps2)

    def _thin_traffic(
        self, rng: np.random.Generator, start_xy_sumo: np.ndarray
    ) -> None:
        """Keep the episode's number of actors, none of them in the ego's spawn area.

        A kept car must also be able to stop before the standing ego from its current speed
        (spawn_safety); cars SUMO still held back for insertion or teleporting are withdrawn
        and drawn afresh, so none of them appears next to the ego later.
        """
        ts = self._libsumo
        traffic = self.scenario.traffic
        envelope = self._envelope()
        self._departures, self._deferred = {}, []
        vehicles = sorted(ts.vehicle.getIDList())
        # Cars waiting for insertion or mid-teleport are off the road now but would appear
        # anywhere later, next to the ego too. A loaded state does not list its waiting cars
        # as pending, so every warm-up id that is not on the road is tried.
        on_road = set(vehicles)
        withdrawn = set()
        for vehicle in map(vehicle_id, range(traffic.vehicles[1])):
            if vehicle not in on_road:
                with contextlib.suppress(ts.TraCIException):  # unknown to SUMO: nothing to withdraw
                    ts.vehicle.remove(vehicle)
                    withdrawn.add(vehicle)
        keep = int(rng.integers(traffic.vehicles[0], traffic.vehicles[1] + 1))
        dropped = set(
            rng.permutation(len(vehicles))[: max(len(vehicles) - keep, 0)].tolist()
        )
        kept = 0
        for index, vehicle in enumerate(vehicles):
            front_xy = np.asarray(ts.vehicle.getPosition(vehicle))
            near = np.hypot(*(front_xy - start_xy_sumo)) < SPAWN_CLEARANCE_M or not envelope.allows_vehicle(
                front_xy, ts.vehicle.getSpeed(vehicle), ts.vehicle.getLength(vehicle)
            )
            if index in dropped or near:
                ts.vehicle.remove(vehicle)
            else:
                ts.vehicle.setSpeedFactor(vehicle, float(rng.uniform(0.85, 1.15)))
                kept += 1
        # Top up (e.g. after clearing the spawn area); SUMO inserts them where there is room.
        missing = keep - kept
        candidates = (
            vehicle_id(k)
            for k in range(len(vehicles) + len(withdrawn) + 2 * traffic.vehicles[1] + 1)
        )
        for vehicle in candidates:
            if missing <= 0:
                break
            if vehicle in withdrawn or vehicle in vehicles:
                continue
            try:
                self._add_background(vehicle, rng, envelope)
                missing -= 1
            except ts.TraCIException:
                pass  # the id still belongs to a vehicle SUMO has not released (e.g. teleporting)
        self._start_walkers(rng, start_xy_sumo, envelope)

    def _add_background(self, vehicle: str, rng: np.random.Generator, envelope: EgoEnvelope | None) -> None:
        """Insert a background car where the ego allows, or defer it to a later step."""
        departure = self._trips.add_vehicle(self._libsumo, vehicle, rng, envelope)
        if departure is None:
            self._deferred.append(vehicle)
        elif envelope is not None:
            self._departures[vehicle] = departure

    def _withdraw_unsafe(self, vehicles, envelope: EgoEnvelope) -> None:
        """Remove (and defer) those of ``vehicles`` that appeared where the ego does not allow."""
        ts = self._libsumo
        for vehicle in vehicles:
            if vehicle == EGO_ID or vehicle not in ts.vehicle.getIDList():
                continue
            front_xy = np.asarray(ts.vehicle.getPosition(vehicle))
            if not envelope.allows_vehicle(front_xy, ts.vehicle.getSpeed(vehicle), ts.vehicle.getLength(vehicle)):
                ts.vehicle.remove(vehicle)
                self._deferred.append(vehicle)

    def _keep_waiting_cars_clear(self, envelope: EgoEnvelope) -> None:
        """Withdraw cars SUMO still holds back whose departure point the ego has come near."""
        ts = self._libsumo
        pending = set(ts.simulation.getPendingVehicles())
        for vehicle, departure in list(self._departures.items()):
            if vehicle not in pending:
                del self._departures[vehicle]
            elif not envelope.allows_vehicle(departure.xy, departure.speed_mps, departure.reach_m):
                ts.vehicle.remove(vehicle)
                del self._departures[vehicle]
                self._deferred.append(vehicle)

    def _start_walkers(
        self, rng: np.random.Generator, start_xy_sumo: np.ndarray, envelope: EgoEnvelope
    ) -> None:
        """Start the episode's walkers on seeded plans, first those beginning near the ego.

        Plans that start within the observation radius where the ego allows a walker
        (spawn_safety) are used first (each once), so an episode meets walkers in a town of
        any size; the rest start anywhere the ego allows. Walkers are never restored from a
        saved state: SUMO's restored walking stages put some walkers at the other end of their
        sidewalk in some processes only, which broke same-seed replay across processes.
        """
        traffic = self.scenario.traffic
        self._num_walkers = int(rng.integers(traffic.walkers[0], traffic.walkers[1] + 1))
        if not self._trips.walker_plans:
            self._num_walkers = 0  # no sidewalks to walk on (world_warnings said so)
        near = [
            plan
            for plan in self._trips.walker_plans_between(start_xy_sumo, 0.0, traffic.observe_radius_m)
            if envelope.allows_walker(self._trips.walker_starts_xy[plan])
        ]
        plans = rng.permutation(np.array(near, dtype=np.int64))[: self._num_walkers].tolist()
        for k in range(self._num_walkers):
            plan = plans[k] if k < len(plans) else None
            self._trips.add_walker(self._libsumo, walker_id(k), rng, plan, envelope)

    def _insert_ego(self) -> None:
        """Add the ego at the route start, standing, and subscribe to what it sees."""
        ts = self._libsumo
        route = self._route
        start = self._spawn_index
        start_lane = route.lane_ids[start]
        self._ego = VehicleState(
            float(route.xy[start, 0]),
            float(route.xy[start, 1]),
            float(route.yaw_deg[start]),
        )
        self._ego_route_id = f"ego_route{self._resets}"
        edges = [
            lane.rsplit("_", 1)[0]
            for lane in dict.fromkeys(route.lane_ids[start:])
            if not lane.startswith(":")
        ]
        edges = list(dict.fromkeys(edges)) or [start_lane.rsplit("_", 1)[0]]
        ts.route.add(self._ego_route_id, edges)
        shape = self.planner.shape(start_lane)
        front = self.planner.project_onto(
            shape, self.frame.to_sumo_xy(route.xy[min(start + 3, len(route.xy) - 1)])
        )
        lane_length = self.planner.lane_length(start_lane)
        depart_pos = float(
            np.clip(front, min(self.vehicle.length_m, lane_length), lane_length)
        )
        lane_index = (
            start_lane.rsplit("_", 1)[1] if not start_lane.startswith(":") else "best"
        )
        self._add_ego_vehicle(depart_lane=lane_index, depart_pos=f"{depart_pos:.2f}")

    def _ego_spawn_index(self, route: Route) -> int:
        """First route waypoint with the whole ego box on its lane.

        A route may start at the very beginning of a lane; on an edge that starts at the map
        border the rear of a car centred there would hang off the road.
        """
        lane = route.lane_ids[0]
        lane_pos_m = self.planner.project_onto(
            self.planner.shape(lane), self.frame.to_sumo_xy(route.xy[0])
        )
        missing_m = self.vehicle.length_m / 2.0 + SPAWN_MARGIN_M - lane_pos_m
        if missing_m <= 0.0 or len(route.xy) < 2:
            return 0
        along_m = np.cumsum(np.linalg.norm(np.diff(route.xy, axis=0), axis=1))
        return min(int(np.searchsorted(along_m, missing_m)) + 1, len(route.xy) - 1)

    def _add_ego_vehicle(
        self, depart_lane: str = "best", depart_pos: str = "base"
    ) -> None:
        """Insert the ego into SUMO and subscribe to what it sees (again after SUMO dropped it)."""
        ts = self._libsumo
        ts.vehicle.add(
            EGO_ID,
            self._ego_route_id,
            typeID=EGO_TYPE,
            departLane=depart_lane,
            departPos=depart_pos,
            departSpeed="0",
        )
        ts.vehicle.subscribe(EGO_ID, [ts.VAR_LANE_ID])
        self._context.subscribe(EGO_ID)
        self._place_ego()

    def _place_ego(self) -> None:
        x, y, angle = self.frame.centre_to_front_sumo_scalar(
            self._ego.x_m, self._ego.y_m, self._ego.yaw_deg, self.vehicle.length_m / 2.0
        )
        move, error = self._libsumo.vehicle.moveToXY, self._libsumo.TraCIException
        try:
            # On its route, the ego is matched to the route's own lanes: inside a junction the
            # nearest lane is often another connection's, and SUMO's drivers would then judge
            # conflicts (who yields to whom) against a path the ego is not taking.
            move(EGO_ID, "", -1, x, y, angle, keepRoute=3, matchThreshold=MOVE_MATCH_M)
        except error:
            # Off every lane, this fails too: SUMO keeps its last pose, our model keeps the truth.
            with contextlib.suppress(error):
                move(EGO_ID, "", -1, x, y, angle, keepRoute=2, matchThreshold=MOVE_MATCH_M)

    def _respawn(self, rng: np.random.Generator, num_walkers: int, with_ego: bool = True) -> None:
        """Replace background actors that reached their destination, away from the ego.

        ``with_ego`` is False while warming traffic up (there is no ego yet).
        """
        ts = self._libsumo
        envelope = None
        arrived = ts.simulation.getArrivedIDList()
        # A car ending a teleport (stuck for --time-to-teleport) reappears further along its
        # route without regard to the ego.
        reappeared = ts.simulation.getEndingTeleportIDList() if with_ego else ()
        retry = bool(self._deferred) and self._step % DEFERRED_RETRY_STEPS == 0
        if with_ego and (arrived or reappeared or retry or self._departures):
            envelope = self._envelope()
            if self._departures:
                self._keep_waiting_cars_clear(envelope)
            self._withdraw_unsafe(reappeared, envelope)
            deferred, self._deferred = (self._deferred, []) if retry else ([], self._deferred)
            for vehicle in deferred:
                try:
                    self._add_background(vehicle, rng, envelope)
                except ts.TraCIException:
                    known = (*ts.vehicle.getIDList(), *ts.simulation.getPendingVehicles())
                    if vehicle not in known:
                        self._deferred.append(vehicle)  # SUMO has not released the id yet
        for vehicle in arrived:
            if vehicle == EGO_ID:
                self._add_ego_vehicle()
            else:
                self._add_background(vehicle, rng, envelope)
        if num_walkers and ts.person.getIDCount() < num_walkers:
            present = set(ts.person.getIDList())
            if envelope is None and with_ego:
                envelope = self._envelope()
            for k in range(num_walkers):
                if walker_id(k) not in present:
                    # Fails while the id is still pending insertion from an earlier respawn.
                    with contextlib.suppress(ts.TraCIException):
                        self._trips.add_walker(ts, walker_id(k), rng, ego=envelope)

    # ---------------------------------------------------------------------------- steps
    def step(self, controls: Controls) -> WorldSnapshot:
        """Apply ``controls`` to the ego for one 0.1 s step and advance the traffic."""
        if self._route is None or not runtime.owns(self):
            raise RuntimeError(
                "step() before reset(), or another SumoBackend took over libsumo: call reset() first"
            )
        self._controls = controls
        self._ego = vehicle_dynamics.step_vehicle(
            self._ego, controls, STEP_S, self.vehicle
        )
        self._place_ego()
        self._libsumo.simulation.step()  # without traci's step-listener bookkeeping
        self._respawn(self._rng, self._num_walkers)
        self._step += 1
        return self._snapshot()

    def _snapshot(self) -> WorldSnapshot:
        ts = self._libsumo
        vehicles, walkers = self._context.boxes(ts.vehicle.getContextSubscriptionResults(EGO_ID))
        lane = ts.vehicle.getSubscriptionResults(EGO_ID).get(ts.VAR_LANE_ID) or None
        time_s = ts.simulation.getTime()
        if time_s >= self._earliest_switch_s - 1e-6:
            # Fixed-time programs only change at their announced switch times: poll then.
            tls_ids = self._lights.tls_ids
            phases = np.array(
                [ts.trafficlight.getPhase(t) for t in tls_ids], dtype=np.int64
            )
            switches = np.array(
                [ts.trafficlight.getNextSwitch(t) for t in tls_ids], dtype=np.float64
            )
            self._earliest_switch_s = float(switches.min()) if len(tls_ids) else np.inf
            self._lights.set_phases(phases, switches)
        if self._lights.signal_ids:
            # Actuated, delay-based and rail programs switch on events: read them every step.
            state = ts.trafficlight.getRedYellowGreenState
            self._lights.set_signal_states([state(t) for t in self._lights.signal_ids])
        collided = ()
        if ts.simulation.getCollidingVehiclesNumber():
            collided = tuple(
                c.victim if c.collider == EGO_ID else c.collider
                for c in ts.simulation.getCollisions()
                if EGO_ID in (c.collider, c.victim)
            )
        ego = self._ego
        yaw = math.radians(ego.yaw_deg)
        return WorldSnapshot(
            step=self._step,
            time_s=self._step * STEP_S,
            ego=EgoState(
                xy=np.array([ego.x_m, ego.y_m]),
                yaw_deg=ego.yaw_deg,
                velocity_xy=np.array(
                    [ego.speed_mps * math.cos(yaw), ego.speed_mps * math.sin(yaw)]
                ),
                half_extent=self._ego_half_extent.copy(),
                throttle=self._controls.throttle,
                steer=self._controls.steer,
                brake=self._controls.brake,
                gear=1 if ego.speed_mps > 0.0 else 0,
                lane_id=lane,
                acceleration_mps2=ego.accel_mps2,
            ),
            vehicles=vehicles,
            walkers=walkers,
            traffic_lights=self._lights.stop_lines(time_s),
            stop_signs=self._stop_signs,
            route=self._route,
            map=self.map,
            ego_collided_with=collided,
        )
