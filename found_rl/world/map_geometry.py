"""Static map geometry in the world frame: lanes, polylines and the map a renderer caches.

Built once per map (from a SUMO network by ``found_rl.maps``, from a CARLA town by
``found_rl.sim.carla.town_geometry``) and shared by reference between snapshots. Frame:
CARLA's world frame (x east, y south, metres).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Polyline:
    """An open polyline in the world frame.

    Attributes:
        xy: ``(K, 2)`` float64 points, metres.
    """

    xy: np.ndarray


@dataclass(frozen=True)
class Lane:
    """One lane of the road network (static).

    Attributes:
        lane_id: backend lane id (SUMO ``edge_index``; CARLA ``road_section_lane``).
        centerline: ``(K, 2)`` float64 centre points, metres, in driving direction.
        width_m: lane width.
        is_junction: True for internal/junction lanes.
        successors: ids of lanes reachable from the end of this lane.
        left_neighbor: id of the lane to the left in the same direction, if any.
        right_neighbor: id of the lane to the right in the same direction, if any.
    """

    lane_id: str
    centerline: np.ndarray
    width_m: float
    is_junction: bool = False
    successors: tuple[str, ...] = ()
    left_neighbor: str | None = None
    right_neighbor: str | None = None


@dataclass(frozen=True)
class MapGeometry:
    """Static map geometry, built once per map and cached by the renderer under ``map_id``.

    Attributes:
        map_id: content hash of the compiled network; a cache key.
        road_polygons: drivable-area polygons, each ``(K, 2)`` float64.
        solid_markings: solid lane markings (road borders, no-crossing lines).
        broken_markings: broken lane markings between same-direction lanes.
        sidewalk_polygons: walkable area polygons (for walker spawning and rendering).
        crossing_polygons: pedestrian crossings on the road.
        lanes: every drivable lane by id.
        bounds: ``(min_x, min_y, max_x, max_y)`` of everything above, metres.
    """

    map_id: str
    road_polygons: tuple[np.ndarray, ...]
    solid_markings: tuple[Polyline, ...]
    broken_markings: tuple[Polyline, ...]
    sidewalk_polygons: tuple[np.ndarray, ...] = ()
    crossing_polygons: tuple[np.ndarray, ...] = ()
    lanes: dict[str, Lane] = field(default_factory=dict)
    bounds: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
