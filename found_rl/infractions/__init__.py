"""Infractions of the ego (collisions, leaving the road, red lights, stop signs, route
deviation, blocked, outside the route's lanes), detected from exact geometry of snapshots.

:mod:`~found_rl.infractions.geometry` holds the pure geometry, :mod:`~found_rl.infractions.monitor`
the per-episode rules.
"""

from found_rl.infractions.geometry import (
    DrivableArea,
    box_corners,
    boxes_overlap,
    crossed_segments,
    crossed_stop_lines,
    drivable_area,
    ego_corners,
    ego_front_xy,
    ego_tail_segment,
    lane_direction,
    overlapping_boxes,
    route_lane_family,
    segments_cross,
    stop_zone_mask,
    tail_crossed_lines,
)
from found_rl.infractions.monitor import TERMINAL_KINDS, InfractionConfig, InfractionMonitor, InfractionReport

__all__ = [
    "TERMINAL_KINDS",
    "DrivableArea",
    "InfractionConfig",
    "InfractionMonitor",
    "InfractionReport",
    "box_corners",
    "boxes_overlap",
    "crossed_segments",
    "crossed_stop_lines",
    "drivable_area",
    "ego_corners",
    "ego_front_xy",
    "ego_tail_segment",
    "lane_direction",
    "overlapping_boxes",
    "route_lane_family",
    "segments_cross",
    "stop_zone_mask",
    "tail_crossed_lines",
]
