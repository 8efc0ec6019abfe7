"""Warmed-up traffic kept as a few saved SUMO states, and loading one of them for a reset.

Background traffic is warmed up once per simulation and saved every
:data:`WARM_STATE_SPACING_S` (:class:`WarmStates`); a reset loads one of the states instead of
restarting SUMO. ``loadState`` over a populated network leaves the replaced vehicles' lane and
junction registrations behind (loaded vehicles then freeze mid-lane while reporting a speed,
and episodes depend on what ran before), so :func:`load_fast` first removes every actor and runs
one empty step, then re-applies each light's loaded phase. :func:`load_exact` reloads the
network as well (``traffic.reset: exact``, tens of ms per reset), the fallback.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np

from found_rl.sim.sumo.traffic import TripPool
from found_rl.world import STEP_S

NUM_WARM_STATES = 4
WARM_STATE_SPACING_S = 15.0
# Background drivers decide every 0.2 s (a reaction time) while positions update every 0.1 s;
# this halves SUMO's car-following work per step. Not on a network with a rail crossing: there
# SUMO 1.28 crashes (segfault) at the first step after a saved state with drivers between two
# decisions is loaded (tests/found_rl/sim/sumo/test_networks.py), so drivers decide every step.
DRIVER_ACTION_STEP_S = 0.2


def driver_action_step_s(net) -> float:
    """How often SUMO's drivers decide on this sumolib network (every step with a rail crossing)."""
    has_rail_crossing = any(node.getType() == "rail_crossing" for node in net.getNodes())
    return STEP_S if has_rail_crossing else DRIVER_ACTION_STEP_S


def sumo_options(net_path: Path, seed: int, action_step_s: float) -> list[str]:
    """SUMO's command line (without the binary) for the network at ``net_path``."""
    return [
        "--net-file", str(net_path),
        "--step-length", str(STEP_S), "--seed", str(seed),
        "--default.action-step-length", str(action_step_s),
        "--no-step-log", "true", "--no-warnings", "true",
        "--collision.action", "warn",
        "--time-to-teleport", "120", "--ignore-route-errors", "true",
        "--pedestrian.model", "nonInteracting", "--save-state.rng", "true",
    ]  # fmt: skip


class WarmStates:
    """The saved states of one simulation, in a temporary folder deleted with this object.

    Attributes:
        paths: the saved states, in the order they were taken.
    """

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="found-rl-sumo-"))
        # Delete the states even if the backend is never closed.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)
        self.paths: list[Path] = []

    def record(self, libsumo, warmup_s: float, before_step: Callable[[], None]) -> None:
        """Run the simulation and save :data:`NUM_WARM_STATES` states, the first after ``warmup_s``.

        Args:
            before_step: called before every step (respawns the cars that arrived).
        """
        self.paths = []
        steps_until_save = round(warmup_s / STEP_S)
        for index in range(NUM_WARM_STATES):
            for _ in range(steps_until_save):
                before_step()
                libsumo.simulationStep()
            path = self._dir / f"warm{index}.sbx"
            libsumo.simulation.saveState(str(path))
            self.paths.append(path)
            steps_until_save = round(WARM_STATE_SPACING_S / STEP_S)

    def choose(self, rng: np.random.Generator) -> str:
        """One saved state, drawn from ``rng``."""
        return str(self.paths[int(rng.integers(len(self.paths)))])

    def close(self) -> None:
        """Delete the saved states."""
        self._cleanup()


def load_exact(libsumo, options: list[str], state: str, trips: TripPool) -> None:
    """Reload the network with ``state``: a fresh network object, so no junction bookkeeping
    survives from earlier episodes."""
    libsumo.load([*options, "--load-state", state])
    trips.restore_routes(libsumo)


def load_fast(libsumo, state: str, resync_ids) -> None:
    """Load ``state`` into the running network, emptied first; re-apply the lights ``resync_ids``.

    The caller drops its subscriptions to vehicles that are about to go (the ego's) first.
    """
    _empty_network(libsumo)
    libsumo.simulation.loadState(state)
    _resync_traffic_lights(libsumo, resync_ids)


def _empty_network(libsumo) -> None:
    """Remove every actor and let SUMO take them off its lanes before a ``loadState``.

    ``loadState`` over a populated network leaves stale lane and junction registrations of
    the replaced vehicles behind: some loaded vehicles then never move again while
    reporting their speed (about a third of the traffic on town_grid). Removals only take
    effect in the next step, so one (cheap, empty) step runs first.
    """
    ts = libsumo
    for vehicle in (*ts.vehicle.getIDList(), *ts.simulation.getPendingVehicles()):
        ts.vehicle.remove(vehicle)
    for walker in ts.person.getIDList():
        ts.person.remove(walker)
    ts.simulation.step()


def _resync_traffic_lights(libsumo, tls_ids) -> None:
    """Re-apply each light's loaded phase so its links forget the previous episode's signals.

    Rail signals have no phases to set (their links follow trains).
    """
    ts = libsumo
    now_s = ts.simulation.getTime()
    for tls_id in tls_ids:
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
