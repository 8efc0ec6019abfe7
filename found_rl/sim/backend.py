"""The simulator-backend contract and the factory that picks a backend for a scenario.

A backend advances one world and returns :class:`~found_rl.world.WorldSnapshot`s;
it knows nothing of observations or rewards (ARCHITECTURE §2). Backends register by import
path, so the CARLA backend slots in without touching callers.
"""

from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

from found_rl.actions import Controls
from found_rl.scenario import Scenario
from found_rl.world import MapGeometry, WorldSnapshot

# backend name -> "module:Class", built with the scenario as only argument
BACKENDS: dict[str, str] = {
    "sumo": "found_rl.sim.sumo.backend:SumoBackend",
    "carla": "found_rl.sim.carla.backend:CarlaBackend",
}


@runtime_checkable
class Backend(Protocol):
    """A simulated world driven one 0.1 s step at a time: what the env needs of a backend.

    ``map`` and ``num_routes`` are read-only here, so a plain attribute (the SUMO and CARLA
    backends) and a property (a test's scripted world) both satisfy the protocol.
    """

    @property
    def map(self) -> MapGeometry:
        """Static map geometry (CARLA frame), shared by every snapshot."""
        ...

    @property
    def num_routes(self) -> int:
        """Routes in the scenario's route file (0 means random routes)."""
        ...

    def reset(self, *, seed: int, route_index: int | None = None) -> WorldSnapshot:
        """Start an episode; ``route_index=None`` draws the route from ``seed``."""
        ...

    def step(self, controls: Controls) -> WorldSnapshot:
        """Apply the ego's controls for one 0.1 s step."""
        ...

    def close(self) -> None:
        """Release the simulator."""
        ...


def make_backend(scenario: Scenario) -> Backend:
    """Build the backend a scenario asks for.

    Raises:
        ValueError: the backend cannot start from this scenario; for CARLA a
            :class:`~found_rl.sim.carla.errors.CarlaSetupError` (no client installed, no server
            answering, a version mismatch, an unknown town, a route off the map).
    """
    module_name, class_name = BACKENDS[scenario.backend].split(":")
    return getattr(importlib.import_module(module_name), class_name)(scenario)
