"""Reading one step of the SUMO world into a WorldSnapshot: nearby actors, light states, collisions.

Actors come from the ego's context subscriptions (``actors.ContextSubscription``); fixed-time
light programs are polled only at their announced switch times, actuated and rail signals every
step (``lights.TrafficLightTable``).
"""

from __future__ import annotations

import numpy as np

from found_rl.sim.sumo.actors import ContextSubscription
from found_rl.sim.sumo.ego import Ego
from found_rl.sim.sumo.lights import TrafficLightTable
from found_rl.sim.sumo.traffic import EGO_ID
from found_rl.world import STEP_S, MapGeometry, Route, StopLines, WorldSnapshot


class SnapshotReader:
    """Builds each step's :class:`WorldSnapshot` from libsumo's answers.

    Args:
        libsumo: the libsumo module.
        context: the ego's subscriptions to nearby actors.
        map: the static map geometry (CARLA frame).
        stop_signs: the network's stop lines of stop signs (CARLA frame).
    """

    def __init__(
        self, libsumo, context: ContextSubscription, map: MapGeometry, stop_signs: StopLines
    ) -> None:
        self._libsumo = libsumo
        self._context = context
        self._map = map
        self._stop_signs = stop_signs
        self._lights: TrafficLightTable | None = None
        self._earliest_switch_s = -np.inf

    def begin_episode(self, lights: TrafficLightTable) -> None:
        """Read ``lights`` (the running simulation's) from now on, polling all of them at the next read."""
        self._lights = lights
        self._earliest_switch_s = -np.inf

    def read(self, step: int, ego: Ego, route: Route) -> WorldSnapshot:
        """The world after ``step`` steps of the episode on ``route``."""
        ts = self._libsumo
        lights = self._lights
        vehicles, walkers = self._context.boxes(ts.vehicle.getContextSubscriptionResults(EGO_ID))
        lane = ts.vehicle.getSubscriptionResults(EGO_ID).get(ts.VAR_LANE_ID) or None
        time_s = ts.simulation.getTime()
        if time_s >= self._earliest_switch_s - 1e-6:
            # Fixed-time programs only change at their announced switch times: poll then.
            tls_ids = lights.tls_ids
            phases = np.array(
                [ts.trafficlight.getPhase(t) for t in tls_ids], dtype=np.int64
            )
            switches = np.array(
                [ts.trafficlight.getNextSwitch(t) for t in tls_ids], dtype=np.float64
            )
            self._earliest_switch_s = float(switches.min()) if len(tls_ids) else np.inf
            lights.set_phases(phases, switches)
        if lights.signal_ids:
            # Actuated, delay-based and rail programs switch on events: read them every step.
            state = ts.trafficlight.getRedYellowGreenState
            lights.set_signal_states([state(t) for t in lights.signal_ids])
        collided = ()
        if ts.simulation.getCollidingVehiclesNumber():
            collided = tuple(
                c.victim if c.collider == EGO_ID else c.collider
                for c in ts.simulation.getCollisions()
                if EGO_ID in (c.collider, c.victim)
            )
        return WorldSnapshot(
            step=step,
            time_s=step * STEP_S,
            ego=ego.ego_state(lane),
            vehicles=vehicles,
            walkers=walkers,
            traffic_lights=lights.stop_lines(time_s),
            stop_signs=self._stop_signs,
            route=route,
            map=self._map,
            ego_collided_with=collided,
        )
