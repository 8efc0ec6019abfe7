"""The world's shared types: what a backend produces and everything downstream reads.

The ground floor of ``found_rl``: snapshots (:mod:`~found_rl.world.snapshot`), static map
geometry (:mod:`~found_rl.world.map_geometry`), dense routes (:mod:`~found_rl.world.route`) and
the map from a SUMO network's frame to the world frame (:mod:`~found_rl.world.frames`).
Backends, maps, routes, the BEV renderer, hazards, infractions, rewards, the expert and the env
all import these types from here; this package imports nothing of ``found_rl`` but
``found_rl.actions`` (docs/architecture.md §1).
"""

from found_rl.world.map_geometry import Lane, MapGeometry, Polyline
from found_rl.world.route import Route, route_command
from found_rl.world.snapshot import STEP_S, ActorBoxes, EgoState, LightState, StopLines, WorldSnapshot

__all__ = [
    "STEP_S",
    "ActorBoxes",
    "EgoState",
    "Lane",
    "LightState",
    "MapGeometry",
    "Polyline",
    "Route",
    "StopLines",
    "WorldSnapshot",
    "route_command",
]
