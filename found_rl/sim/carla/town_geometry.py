"""Static map geometry of a CARLA town from its OpenDRIVE map, sampled through waypoints.

Lanes are the topology's driving lanes (id ``road_section_lane``) sampled every metre with
``next_until_lane_end``; road polygons, lane markings (from each lane's marking types),
sidewalks (the sidewalk lanes beside them) and crosswalks follow. The result is cached per
town, in memory and on disk under the hash of the town's OpenDRIVE text, so a later process
(or reset) pays nothing for it.
"""

from __future__ import annotations

import hashlib
import pickle

import numpy as np

from found_rl.atomic import replaced_atomically
from found_rl.maps.build import cache_root
from found_rl.maps.geometry import lane_polygon, offset_polyline
from found_rl.world import Lane, MapGeometry, Polyline

GEOMETRY_VERSION = 2
"""Bumped when the pickled types change (2: they moved to ``found_rl.world``)."""
SAMPLE_M = 1.0
SOLID_MARKINGS = frozenset({"Solid", "SolidSolid", "SolidBroken", "BrokenSolid", "Curb", "Grass"})
BROKEN_MARKINGS = frozenset({"Broken", "BrokenBroken", "BottsDots"})

_MEMORY: dict[str, MapGeometry] = {}


def lane_key(waypoint) -> str:
    """A lane's id in snapshots: ``road_section_lane`` (lane ids repeat across sections)."""
    return f"{waypoint.road_id}_{waypoint.section_id}_{waypoint.lane_id}"


def town_map_id(opendrive_text: str) -> str:
    return "carla-" + hashlib.sha256(opendrive_text.encode("utf-8")).hexdigest()[:20]


def _kind(value) -> str:
    """``carla.LaneType.Driving`` → ``Driving`` (enums print as their name)."""
    return str(value).rsplit(".", 1)[-1]


def _xy(waypoint) -> tuple[float, float]:
    location = waypoint.transform.location
    return (float(location.x), float(location.y))


def _same_direction_driving(neighbour, lane_id: int) -> str | None:
    if neighbour is None or _kind(neighbour.lane_type) != "Driving" or neighbour.lane_id * lane_id <= 0:
        return None
    return lane_key(neighbour)


def _sidewalk_beside(waypoint):
    """The first sidewalk lane to the right of a driving waypoint, if any (kerb side)."""
    neighbour = waypoint.get_right_lane()
    for _ in range(4):
        if neighbour is None:
            return None
        if _kind(neighbour.lane_type) == "Sidewalk":
            return neighbour
        neighbour = neighbour.get_right_lane()
    return None


def _crosswalk_polygons(carla_map) -> list[np.ndarray]:
    """``get_crosswalks`` lists each crosswalk's corners, repeating the first to close it."""
    polygons, ring = [], []
    for location in carla_map.get_crosswalks():
        point = (float(location.x), float(location.y))
        if ring and np.hypot(point[0] - ring[0][0], point[1] - ring[0][1]) < 1e-3 and len(ring) >= 3:
            polygons.append(np.asarray(ring, dtype=np.float64))
            ring = []
        else:
            ring.append(point)
    return polygons


def extract_town_geometry(carla_map, map_id: str) -> MapGeometry:
    """Build :class:`MapGeometry` (CARLA frame) from a ``carla.Map``."""
    samples_by_lane: dict[str, list] = {}
    successors: dict[str, set[str]] = {}
    for entry, exit_ in carla_map.get_topology():
        key = lane_key(entry)
        # A topology exit sits on the lane's end and carries its successor's ids.
        successors.setdefault(key, set()).add(lane_key(exit_))
        if key not in samples_by_lane:
            samples_by_lane[key] = [entry, *entry.next_until_lane_end(SAMPLE_M)]
    lanes: dict[str, Lane] = {}
    road, solid, broken, sidewalks = [], [], [], []
    for key, samples in samples_by_lane.items():
        entry = samples[0]
        points = np.asarray([_xy(wp) for wp in samples], dtype=np.float64)
        keep = np.concatenate([[True], np.linalg.norm(np.diff(points, axis=0), axis=1) > 1e-3])
        points = points[keep]
        if len(points) < 2:
            yaw = np.radians(entry.transform.rotation.yaw)
            points = np.vstack([points[:1], points[:1] + 0.01 * np.array([np.cos(yaw), np.sin(yaw)])])
        successors[key].update(lane_key(wp) for wp in samples[-1].next(SAMPLE_M))
        successors[key].discard(key)
        width = float(entry.lane_width)
        lanes[key] = Lane(
            lane_id=key,
            centerline=points,
            width_m=width,
            is_junction=bool(entry.is_junction),
            successors=tuple(sorted(successors[key])),
            left_neighbor=_same_direction_driving(entry.get_left_lane(), entry.lane_id),
            right_neighbor=_same_direction_driving(entry.get_right_lane(), entry.lane_id),
        )
        road.append(lane_polygon(points, width))
        if entry.is_junction:
            continue  # CARLA paints no lines inside junctions
        # offset_polyline shifts to the right-handed left, which is the driver's right in
        # CARLA's left-handed frame.
        for side, marking in ((-1.0, entry.left_lane_marking), (1.0, entry.right_lane_marking)):
            kind = _kind(marking.type)
            line = Polyline(offset_polyline(points, side * width / 2.0))
            if kind in SOLID_MARKINGS:
                solid.append(line)
            elif kind in BROKEN_MARKINGS:
                broken.append(line)
        kerb = [_sidewalk_beside(wp) for wp in samples]
        walk = [wp for wp in kerb if wp is not None]
        if len(walk) >= 2:
            sidewalk = np.asarray([_xy(wp) for wp in walk], dtype=np.float64)
            sidewalks.append(lane_polygon(sidewalk, float(walk[0].lane_width)))
    crossings = _crosswalk_polygons(carla_map)
    everything = np.concatenate(road + sidewalks + crossings) if road else np.zeros((1, 2))
    bounds = (*everything.min(axis=0), *everything.max(axis=0))
    return MapGeometry(
        map_id=map_id,
        road_polygons=tuple(road),
        solid_markings=tuple(solid),
        broken_markings=tuple(broken),
        sidewalk_polygons=tuple(sidewalks),
        crossing_polygons=tuple(crossings),
        lanes=lanes,
        bounds=tuple(float(v) for v in bounds),
    )


def load_town_geometry(carla_map) -> MapGeometry:
    """:func:`extract_town_geometry`, cached per town in memory and on disk."""
    map_id = town_map_id(carla_map.to_opendrive())
    geometry = _MEMORY.get(map_id)
    if geometry is not None:
        return geometry
    cache_file = cache_root() / "carla-geometry" / f"{map_id}-v{GEOMETRY_VERSION}.pkl"
    if cache_file.is_file():
        try:
            with cache_file.open("rb") as handle:
                geometry = pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            geometry = None  # a stale or foreign file: rebuild it below
    if geometry is None:
        geometry = extract_town_geometry(carla_map, map_id)
        with replaced_atomically(cache_file) as tmp:
            tmp.write_bytes(pickle.dumps(geometry, protocol=pickle.HIGHEST_PROTOCOL))
    _MEMORY[map_id] = geometry
    return geometry
