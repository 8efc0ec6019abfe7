"""Background cars kept clear of the ego: thinning warm traffic at a reset, respawning during an episode.

A reset keeps the episode's number of cars, none in the ego's spawn area and each able to stop
before the standing ego (spawn_safety). During the episode a car that arrived is replaced where
the ego allows, or deferred to a later step; cars SUMO still holds back for insertion are
withdrawn when the ego comes near their departure point, and cars ending a teleport when they
reappear where the ego does not allow them (docs/architecture.md §8, ego-safe traffic).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

import numpy as np

from found_rl.scenario import TrafficConfig
from found_rl.sim.sumo.spawn_safety import EgoEnvelope
from found_rl.sim.sumo.traffic import EGO_ID, TripPool, VehicleDeparture, vehicle_id

SPAWN_CLEARANCE_M = 15.0
DEFERRED_RETRY_STEPS = 10  # a car with no safe spawn point tries again after this many steps


class BackgroundTraffic:
    """The background cars of one simulation, and those waiting for insertion or a safe spawn point.

    Args:
        libsumo: the running simulation.
        trips: the simulation's pooled routes.
        traffic: the scenario's traffic settings (the range of car counts).
    """

    def __init__(self, libsumo, trips: TripPool, traffic: TrafficConfig) -> None:
        self._libsumo = libsumo
        self._trips = trips
        self._traffic = traffic
        # Background cars SUMO has not inserted yet (re-checked against the ego while they
        # wait), and cars whose every drawn spawn point was too close to the ego.
        self._departures: dict[str, VehicleDeparture] = {}
        self._deferred: list[str] = []

    def populate(self, rng: np.random.Generator) -> None:
        """Add the most cars the scenario allows, anywhere (warm-up: there is no ego yet)."""
        for k in range(self._traffic.vehicles[1]):
            self._trips.add_vehicle(self._libsumo, vehicle_id(k), rng)

    def thin(self, rng: np.random.Generator, start_xy_sumo: np.ndarray, envelope: EgoEnvelope) -> None:
        """Keep the episode's number of cars, none of them in the ego's spawn area.

        A kept car must also be able to stop before the standing ego from its current speed
        (spawn_safety); cars SUMO still held back for insertion or teleporting are withdrawn
        and drawn afresh, so none of them appears next to the ego later.
        """
        ts = self._libsumo
        traffic = self._traffic
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
                self.add(vehicle, rng, envelope)
                missing -= 1
            except ts.TraCIException:
                pass  # the id still belongs to a vehicle SUMO has not released (e.g. teleporting)

    def add(self, vehicle: str, rng: np.random.Generator, envelope: EgoEnvelope | None) -> None:
        """Insert a background car where the ego allows, or defer it to a later step."""
        departure = self._trips.add_vehicle(self._libsumo, vehicle, rng, envelope)
        if departure is None:
            self._deferred.append(vehicle)
        elif envelope is not None:
            self._departures[vehicle] = departure

    def guard(
        self,
        rng: np.random.Generator,
        arrived: Iterable[str],
        envelope_of: Callable[[], EgoEnvelope],
        step: int,
    ) -> EgoEnvelope | None:
        """Before this step's cars that ``arrived`` are replaced: keep the ego clear, retry deferred cars.

        Withdraws waiting cars whose departure point the ego has come near and cars that ended a
        teleport where the ego does not allow them, and every :data:`DEFERRED_RETRY_STEPS` steps
        tries the deferred cars again.

        Returns:
            The ego's envelope these checks used, or None when nothing needed one.
        """
        ts = self._libsumo
        # A car ending a teleport (stuck for --time-to-teleport) reappears further along its
        # route without regard to the ego.
        reappeared = ts.simulation.getEndingTeleportIDList()
        retry = bool(self._deferred) and step % DEFERRED_RETRY_STEPS == 0
        if not (arrived or reappeared or retry or self._departures):
            return None
        envelope = envelope_of()
        if self._departures:
            self._keep_waiting_cars_clear(envelope)
        self._withdraw_unsafe(reappeared, envelope)
        deferred, self._deferred = (self._deferred, []) if retry else ([], self._deferred)
        for vehicle in deferred:
            try:
                self.add(vehicle, rng, envelope)
            except ts.TraCIException:
                known = (*ts.vehicle.getIDList(), *ts.simulation.getPendingVehicles())
                if vehicle not in known:
                    self._deferred.append(vehicle)  # SUMO has not released the id yet
        return envelope

    def _withdraw_unsafe(self, vehicles: Iterable[str], envelope: EgoEnvelope) -> None:
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
