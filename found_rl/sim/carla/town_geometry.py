"""Static map geometry of a CARLA town from its OpenDRIVE map, sampled through waypoints.

Lanes are the driving lanes (id ``road_section_lane``) of the topology and of
``generate_waypoints`` (the topology leaves out some dead-end lanes, and an isolated road may
have none), sampled every metre with ``next_until_lane_end``; road polygons, lane markings
(from each lane's marking types), sidewalks (the sidewalk lanes beside them) and crosswalks
follow. libcarla repeats a lane's last waypoint when its length is a whole number of metres,
so every polyline drops repeated points. The result is cached per town, in memory and on disk
under the hash of the town's OpenDRIVE text, so a later process (or reset) pays nothing for it.
"""

from __future__ import annotations

import hashlib
import pickle
import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np

from found_rl.atomic import replaced_atomically
from found_rl.maps.build import cache_root
from found_rl.maps.geometry import lane_polygon, offset_polyline
from found_rl.world import Lane, MapGeometry, Polyline

GEOMETRY_VERSION = 3
"""Bumped when the pickled geometry changes (2: the types moved to ``found_rl.world``; 3: repeated
waypoints dropped and lanes taken from the waypoints too)."""
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


def distinct_points(points: np.ndarray, tolerance_m: float = 1e-3) -> np.ndarray:
    """``points`` without a point that repeats the one before it (within ``tolerance_m``)."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if len(points) < 2:
        return points
    keep = np.concatenate([[True], np.linalg.norm(np.diff(points, axis=0), axis=1) > tolerance_m])
    return points[keep]


def crosswalk_corner_counts(opendrive_text: str) -> list[int]:
    """Corners of each crosswalk outline in an OpenDRIVE file (a closed outline repeats its first)."""
    try:
        root = ET.fromstring(opendrive_text)
    except ET.ParseError:
        return []
    return [
        len(outline.findall("cornerLocal"))
        for crosswalk in root.iter("object")
        if crosswalk.get("type") == "crosswalk"
        for outline in crosswalk.iter("outline")
    ]


def crosswalk_outlines(points: np.ndarray, corner_counts: list[int]) -> list[np.ndarray]:
    """Split ``get_crosswalks`` points into one polygon per crosswalk.

    libcarla lists every crosswalk's outline corners one after another, as the OpenDRIVE file
    gives them: a closed outline repeats its first corner, an open one does not, and nothing
    else marks where one ends. ``corner_counts`` (:func:`crosswalk_corner_counts`, in any order)
    says how long outlines are: at each start a closing corner decides, else the commonest
    length that fits. Without counts, outlines of 4 (open) or 5 (closed) corners are assumed.
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    tally = Counter(corner_counts or [4, 5])
    polygons, start = [], 0
    while start < len(points):
        fitting = [n for n in tally if n >= 3 and start + n <= len(points)]
        if not fitting:
            break
        closing = [n for n in fitting if n >= 4 and np.allclose(points[start + n - 1], points[start], atol=1e-3)]
        count = min(closing) if closing else max(fitting, key=lambda n: (tally[n], -n))
        ring = distinct_points(points[start : start + count])
        if len(ring) > 1 and np.allclose(ring[-1], ring[0], atol=1e-3):
            ring = ring[:-1]
        if len(ring) >= 3:
            polygons.append(ring)
        start += count
    return polygons


def _crosswalk_polygons(carla_map) -> list[np.ndarray]:
    points = np.asarray([(float(p.x), float(p.y)) for p in carla_map.get_crosswalks()], dtype=np.float64)
    return crosswalk_outlines(points, crosswalk_corner_counts(carla_map.to_opendrive()))


def _lane_start(waypoint, key: str):
    """The first waypoint of lane ``key``, at most :data:`SAMPLE_M` before ``waypoint``.

    The farthest ``previous`` step that stays on the lane (``previous_until_lane_start`` crashes
    libcarla 0.9.16 on a lane without predecessor).
    """

    def on_lane(distance_m: float) -> list:
        return [wp for wp in waypoint.previous(distance_m) if lane_key(wp) == key]

    found = on_lane(SAMPLE_M)
    if found:
        return found[0]
    best, low, high = waypoint, 0.0, SAMPLE_M
    for _ in range(12):  # to a quarter millimetre
        middle = (low + high) / 2.0
        found = on_lane(middle)
        if found:
            best, low = found[0], middle
        else:
            high = middle
    return best


def _lane_samples(carla_map) -> tuple[dict[str, list], dict[str, set[str]]]:
    """Every driving lane's waypoints every metre from its start, and the topology's successors."""
    samples_by_lane: dict[str, list] = {}
    successors: dict[str, set[str]] = {}
    for entry, exit_ in carla_map.get_topology():
        key = lane_key(entry)
        # A topology exit sits on the lane's end and carries its successor's ids.
        successors.setdefault(key, set()).add(lane_key(exit_))
        if key not in samples_by_lane:
            samples_by_lane[key] = [entry, *entry.next_until_lane_end(SAMPLE_M)]
    earliest: dict[str, object] = {}
    for waypoint in carla_map.generate_waypoints(SAMPLE_M):
        key = lane_key(waypoint)
        if key in samples_by_lane:
            continue
        # Right lanes (negative ids) run along the road's s, left lanes against it.
        first = earliest.get(key)
        if first is None or (waypoint.s < first.s) == (waypoint.lane_id < 0):
            earliest[key] = waypoint
    for key, waypoint in sorted(earliest.items()):
        start = _lane_start(waypoint, key)
        samples_by_lane[key] = [start, *start.next_until_lane_end(SAMPLE_M)]
        successors.setdefault(key, set())
    return samples_by_lane, successors


def extract_town_geometry(carla_map, map_id: str) -> MapGeometry:
    """Build :class:`MapGeometry` (CARLA frame) from a ``carla.Map``."""
    samples_by_lane, successors = _lane_samples(carla_map)
    lanes: dict[str, Lane] = {}
    road, solid, broken, sidewalks = [], [], [], []
    for key, samples in samples_by_lane.items():
        entry = samples[0]
        points = distinct_points([_xy(wp) for wp in samples])
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
        sidewalk = distinct_points([_xy(wp) for wp in walk])
        if len(sidewalk) >= 2:
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
