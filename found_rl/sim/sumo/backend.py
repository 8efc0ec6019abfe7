"""The embedded SUMO world: libsumo traffic around a kinematic-bicycle ego, as WorldSnapshots.

One libsumo simulation per process runs at 10 Hz. Background traffic is warmed up once per
backend and saved as a few SUMO states (``warm_states``); a reset loads one of them (chosen by
the reset seed), thins traffic to the episode's counts and clears the spawn area
(``background``), starts the episode's walkers (``walkers``) and inserts the ego (``ego``), so a
reset takes milliseconds instead of restarting SUMO. Each step the ego moves by the bicycle
model and is placed into SUMO, so SUMO's drivers see it and react (ARCHITECTURE §2, §3); the
step's world is read into a snapshot (``snapshot``). This module composes those parts: it
starts and stops the simulation, and orders what a reset and a step do.

Determinism: SUMO's own driver randomness is switched off and every random choice comes from
the reset seed, so a process that makes the same resets with the same seeds and controls
replays exactly, and a reset's first snapshot depends on its seed alone. A fast reset first
removes every actor and runs one empty step (``warm_states.load_fast`` says why); after that an
episode replays exactly whatever ran before it, in any process (walkers restored from a saved
state did not, so each reset starts them afresh). ``traffic.reset: exact`` reloads the network
as well (``libsumo.load`` with ``--load-state``, tens of ms per reset) as a fallback
(tests/found_rl/sim/sumo/test_backend.py checks each guarantee).
"""

from __future__ import annotations

import warnings

import numpy as np

from found_rl.actions import Controls
from found_rl.maps import build_network, load_map_geometry, read_network
from found_rl.routes import RoutePlanner, RouteSampling
from found_rl.scenario import Scenario
from found_rl.sim.sumo import runtime, warm_states
from found_rl.sim.sumo.actors import ContextSubscription
from found_rl.sim.sumo.background import BackgroundTraffic
from found_rl.sim.sumo.ego import Ego
from found_rl.sim.sumo.lights import TrafficLightTable, running_programs, stop_sign_lines
from found_rl.sim.sumo.snapshot import SnapshotReader
from found_rl.sim.sumo.traffic import EGO_ID, TripPool, define_types
from found_rl.sim.sumo.walkers import Walkers
from found_rl.sim.sumo.warm_states import WarmStates
from found_rl.sim.sumo.world_checks import world_warnings
from found_rl.sim.vehicle_dynamics import VehicleParams
from found_rl.world import MapGeometry, Route, WorldSnapshot


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
        self.planner = RoutePlanner.of_network(self._net, RouteSampling.of_scenario(scenario.routes))
        self.frame = self.planner.frame
        self.map: MapGeometry = load_map_geometry(self._net_path, self._net)
        for line in world_warnings(scenario, self._net_path, self._net):
            warnings.warn(f"{scenario.source_path or 'scenario'}: {line}", stacklevel=2)
        routes = scenario.routes
        self._routes: list[Route] = [] if routes.file is None else self.planner.plan_file(routes.file, routes.town)
        self.num_routes = len(self._routes)
        self._options = warm_states.sumo_options(
            self._net_path, scenario.seed, warm_states.driver_action_step_s(self._net)
        )
        self._warm_states = WarmStates()
        context = ContextSubscription(self._libsumo, self.frame, scenario.traffic.observe_radius_m)
        self._ego = Ego(self._libsumo, self.planner, vehicle, context)
        self._reader = SnapshotReader(self._libsumo, context, self.map, stop_sign_lines(self._net, self.frame))
        # Made for each simulation start (the trips are drawn then).
        self._trips: TripPool | None = None
        self._lights: TrafficLightTable | None = None
        self._background: BackgroundTraffic | None = None
        self._walkers: Walkers | None = None
        self._closed = False
        self._resets = 0
        self._rng = np.random.default_rng(scenario.seed)
        self._route: Route | None = None
        self._step = 0

    # ------------------------------------------------------------------ simulation lifetime
    def _start_simulation(self) -> None:
        """Start libsumo on this network, draw trips, warm traffic up and save warm states."""
        import sumolib

        ts = self._libsumo
        ts.start([sumolib.checkBinary("sumo"), *self._options])
        define_types(ts, self.vehicle.length_m, self.vehicle.width_m)
        warm_rng = np.random.default_rng(self.scenario.seed)
        self._trips = TripPool.draw(ts, self._net, warm_rng)
        self._lights = TrafficLightTable(self._net, self.frame, running_programs(ts))
        self._background = BackgroundTraffic(ts, self._trips, self.scenario.traffic)
        self._walkers = Walkers(ts, self._trips, self.scenario.traffic)
        self._background.populate(warm_rng)
        # Respawn before each step: a car added after the last step would be saved as loaded
        # but not yet inserted, and appear at the first step of an episode (anywhere, next to
        # the ego too) without being listed as pending.
        self._warm_states.record(
            ts, self.scenario.traffic.warmup_s, lambda: self._respawn(warm_rng, with_ego=False)
        )

    def close(self) -> None:
        """Stop the simulation (if this backend holds it) and delete the warm states."""
        if self._closed:
            return
        self._closed = True
        runtime.release(self)
        self._warm_states.close()

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
        self._route = route = self._choose_route(rng, seed, route_index)
        state = self._warm_states.choose(rng)
        if self.scenario.traffic.reset == "exact":
            warm_states.load_exact(ts, self._options, state, self._trips)
        else:
            self._ego.detach()
            warm_states.load_fast(ts, state, self._lights.resync_ids)
        start = self._ego.spawn_index(route)
        # The ego's pose from here on (it stands at the spawn point): traffic is thinned and
        # topped up around it.
        self._ego.stand_at(route, start)
        start_xy = self.frame.to_sumo_xy(route.xy[start])
        envelope = self._ego.envelope()
        self._background.thin(rng, start_xy, envelope)
        self._walkers.start(rng, start_xy, envelope)
        self._ego.insert(route, start, f"ego_route{self._resets}")
        self._lights.set_route(route.lane_ids)
        self._reader.begin_episode(self._lights)
        ts.simulationStep()
        self._step = 0
        self._resets += 1
        return self._reader.read(self._step, self._ego, route)

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

    def _respawn(self, rng: np.random.Generator, with_ego: bool = True) -> None:
        """Replace background actors that reached their destination, away from the ego.

        ``with_ego`` is False while warming traffic up (there is no ego yet).
        """
        arrived = self._libsumo.simulation.getArrivedIDList()
        envelope = self._background.guard(rng, arrived, self._ego.envelope, self._step) if with_ego else None
        for vehicle in arrived:
            if vehicle == EGO_ID:
                self._ego.reinsert()
            else:
                self._background.add(vehicle, rng, envelope)
        self._walkers.top_up(rng, envelope, self._ego.envelope if with_ego else None)

    # ---------------------------------------------------------------------------- steps
    def step(self, controls: Controls) -> WorldSnapshot:
        """Apply ``controls`` to the ego for one 0.1 s step and advance the traffic."""
        if self._route is None or not runtime.owns(self):
            raise RuntimeError(
                "step() before reset(), or another SumoBackend took over libsumo: call reset() first"
            )
        self._ego.drive(controls)
        self._libsumo.simulation.step()  # without traci's step-listener bookkeeping
        self._respawn(self._rng)
        self._step += 1
        return self._reader.read(self._step, self._ego, self._route)
