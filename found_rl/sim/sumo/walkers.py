"""The episode's walkers: started afresh at each reset on seeded plans, topped up when they arrive.

Warm states hold vehicles only (walkers never affect SUMO's drivers under the
``nonInteracting`` model). Walkers are never restored from a saved state: SUMO's restored
walking stages put some walkers at the other end of their sidewalk in some processes only,
which broke same-seed replay across processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from found_rl.scenario import TrafficConfig
from found_rl.sim.sumo.spawn_safety import EgoEnvelope
from found_rl.sim.sumo.traffic import TripPool, walker_id


class Walkers:
    """The walkers of one simulation.

    Args:
        libsumo: the running simulation.
        trips: the simulation's pooled walking plans.
        traffic: the scenario's traffic settings (walker counts, observation radius).

    Attributes:
        count: walkers in the current episode (0 before the first reset).
    """

    def __init__(self, libsumo, trips: TripPool, traffic: TrafficConfig) -> None:
        self._libsumo = libsumo
        self._trips = trips
        self._traffic = traffic
        self.count = 0

    def start(self, rng: np.random.Generator, start_xy_sumo: np.ndarray, envelope: EgoEnvelope) -> None:
        """Start the episode's walkers on seeded plans, first those beginning near the ego.

        Plans that start within the observation radius where the ego allows a walker
        (spawn_safety) are used first (each once), so an episode meets walkers in a town of
        any size; the rest start anywhere the ego allows.
        """
        traffic = self._traffic
        self.count = int(rng.integers(traffic.walkers[0], traffic.walkers[1] + 1))
        if not self._trips.walker_plans:
            self.count = 0  # no sidewalks to walk on (world_warnings said so)
        near = [
            plan
            for plan in self._trips.walker_plans_between(start_xy_sumo, 0.0, traffic.observe_radius_m)
            if envelope.allows_walker(self._trips.walker_starts_xy[plan])
        ]
        plans = rng.permutation(np.array(near, dtype=np.int64))[: self.count].tolist()
        for k in range(self.count):
            plan = plans[k] if k < len(plans) else None
            self._trips.add_walker(self._libsumo, walker_id(k), rng, plan, envelope)

    def top_up(
        self,
        rng: np.random.Generator,
        envelope: EgoEnvelope | None,
        envelope_of: Callable[[], EgoEnvelope] | None,
    ) -> None:
        """Replace the walkers that arrived, where the ego allows.

        Args:
            envelope: the ego's envelope, if this step made one already.
            envelope_of: makes one when needed (None: there is no ego, as in the warm-up).
        """
        ts = self._libsumo
        if not (self.count and ts.person.getIDCount() < self.count):
            return
        present = set(ts.person.getIDList())
        if envelope is None and envelope_of is not None:
            envelope = envelope_of()
        for k in range(self.count):
            if walker_id(k) not in present:
                # Fails while the id is still pending insertion from an earlier respawn.
                with contextlib.suppress(ts.TraCIException):
                    self._trips.add_walker(ts, walker_id(k), rng, ego=envelope)
