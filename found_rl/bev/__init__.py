"""Roach-style bird's-eye view of a :class:`~found_rl.world.WorldSnapshot` (ARCHITECTURE §4).

``BevRenderer(config).render(snapshot)`` gives the ``(15, 96, 96)`` uint8 policy input;
``render_rgb()`` the ``(192, 192, 3)`` picture for the VLM, CLIP and videos. Channel layout:
0 road, 1 route, 2 lane markings, then vehicles, walkers and stop lines with one channel per
history frame each (``BevConfig.vehicle_channels`` and friends give the indices).
``found-rl bench bev`` (``found_rl.bench.bev.time_render``) times the renderer on synthetic scenes.
"""

from found_rl.bev.config import MARKING_CHANNEL, ROAD_CHANNEL, ROUTE_CHANNEL, BevConfig
from found_rl.bev.renderer import BevRenderer

__all__ = [
    "MARKING_CHANNEL",
    "ROAD_CHANNEL",
    "ROUTE_CHANNEL",
    "BevConfig",
    "BevRenderer",
]
