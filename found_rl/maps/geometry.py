"""Static map geometry (roads, markings, sidewalks, lanes) of a SUMO network in CARLA's frame.

Extraction reads the network once with sumolib; the result is pickled next to the network
cache under its content hash, so later processes load it in milliseconds.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import shapely

from found_rl.atomic import replaced_atomically
from found_rl.maps.build import cache_root
from found_rl.world import Lane, MapGeometry, Polyline
from found_rl.world.frames import SumoFrame

GEOMETRY_VERSION = 3
"""Bumped when the pickled types change (3: they moved to ``found_rl.world``)."""
VEHICLE_CLASS = "passenger"


def network_hash(net_path: Path) -> str:
    """Hash of a compiled network file's bytes: the ``map_id``, a cache key for what is derived
    from the file (geometry, BEV rasters). A town's identity is :func:`found_rl.maps.identity.network_identity`."""
    return hashlib.sha256(Path(net_path).read_bytes()).hexdigest()[:20]


def offset_polyline(xy: np.ndarray, distance_m: float) -> np.ndarray:
    """Shift a polyline sideways, to the left of its direction in a right-handed frame.

    Each vertex moves along the mean of its neighbouring segment normals, scaled so the
    offset stays ``distance_m`` from both segments (mitre join, capped at 3x for sharp bends).

    Args:
        xy: ``(K, 2)`` points, K >= 2.
        distance_m: signed offset; negative shifts to the right.
    """
    xy = np.asarray(xy, dtype=np.float64)
    seg = np.diff(xy, axis=0)
    seg_len = np.linalg.norm(seg, axis=1, keepdims=True)
    seg = seg / np.maximum(seg_len, 1e-9)
    normals = np.stack([-seg[:, 1], seg[:, 0]], axis=1)
    vertex_normals = np.empty_like(xy)
    vertex_normals[0], vertex_normals[-1] = normals[0], normals[-1]
    if len(xy) > 2:
        mean = normals[:-1] + normals[1:]
        mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-9)
        cos_half = np.sum(mean * normals[1:], axis=1, keepdims=True)
        vertex_normals[1:-1] = mean / np.maximum(cos_half, 1.0 / 3.0)
    return xy + distance_m * vertex_normals


def lane_polygon(centre_xy: np.ndarray, width_m: float) -> np.ndarray:
    """Closed-ring polygon ``(2K, 2)`` covering a lane of ``width_m`` around its centreline."""
    left = offset_polyline(centre_xy, width_m / 2.0)
    right = offset_polyline(centre_xy, -width_m / 2.0)
    return np.concatenate([left, right[::-1]], axis=0)


def _drivable(lane) -> bool:
    return lane.allows(VEHICLE_CLASS)


def _shape(lane) -> np.ndarray:
    shape = np.asarray(lane.getShape(), dtype=np.float64)
    if len(shape) < 2:
        shape = np.vstack([shape, shape + 1e-3])
    return shape


def _lane_successors(lane) -> tuple[str, ...]:
    out = []
    for connection in lane.getOutgoing():
        target = connection.getViaLaneID() or connection.getToLane().getID()
        if connection.getToLane().allows(VEHICLE_CLASS):
            out.append(target)
    return tuple(dict.fromkeys(out))


def _junction_road_polygons(net) -> list[np.ndarray]:
    """Junction areas minus their pedestrian walking areas (sidewalk corners)."""
    walking: dict[str, list] = {}
    for edge in net.getEdges():
        if edge.getFunction() == "walkingarea":
            node_id = edge.getID().lstrip(":").rsplit("_w", 1)[0]
            walking.setdefault(node_id, []).append(
                shapely.Polygon(_shape(edge.getLanes()[0])).buffer(0)
            )
    polygons = []
    for node in net.getNodes():
        has_internal_road = any(
            _drivable(c.getFromLane()) for c in node.getConnections()
        )
        shape = node.getShape()
        if not has_internal_road or len(shape) < 3:
            continue
        area = shapely.Polygon(shape).buffer(0)
        if node.getID() in walking:
            area = area.difference(shapely.union_all(walking[node.getID()]))
        for part in getattr(area, "geoms", [area]):
            if isinstance(part, shapely.Polygon) and part.area > 0.5:
                polygons.append(np.asarray(part.exterior.coords, dtype=np.float64)[:-1])
    return polygons


def extract_map_geometry(net, net_path: Path) -> MapGeometry:
    """Build :class:`MapGeometry` (CARLA frame) from a sumolib network read with internal lanes."""
    frame = SumoFrame.of_network(net)
    road, solid, broken, sidewalks, crossings = [], [], [], [], []
    lanes: dict[str, Lane] = {}
    for edge in net.getEdges():
        function = edge.getFunction()
        edge_lanes = edge.getLanes()
        if function == "crossing":
            crossings.append(
                frame.to_carla_xy(
                    lane_polygon(_shape(edge_lanes[0]), edge_lanes[0].getWidth())
                )
            )
            continue
        if function == "walkingarea":
            sidewalks.append(frame.to_carla_xy(_shape(edge_lanes[0])))
            continue
        drivable = [lane for lane in edge_lanes if _drivable(lane)]
        for lane in edge_lanes:
            if function == "" and not _drivable(lane) and lane.allows("pedestrian"):
                sidewalks.append(
                    frame.to_carla_xy(lane_polygon(_shape(lane), lane.getWidth()))
                )
        for position, lane in enumerate(drivable):
            centre = _shape(lane)
            road.append(frame.to_carla_xy(lane_polygon(centre, lane.getWidth())))
            right = drivable[position - 1].getID() if position > 0 else None
            left = (
                drivable[position + 1].getID() if position + 1 < len(drivable) else None
            )
            lanes[lane.getID()] = Lane(
                lane_id=lane.getID(),
                centerline=frame.to_carla_xy(centre),
                width_m=float(lane.getWidth()),
                is_junction=function == "internal",
                successors=_lane_successors(lane),
                left_neighbor=left,
                right_neighbor=right,
            )
            if function == "internal":
                continue
            half = lane.getWidth() / 2.0
            if position == 0:
                solid.append(
                    Polyline(frame.to_carla_xy(offset_polyline(centre, -half)))
                )
            if left is None:
                solid.append(Polyline(frame.to_carla_xy(offset_polyline(centre, half))))
            else:
                broken.append(
                    Polyline(frame.to_carla_xy(offset_polyline(centre, half)))
                )
    road += [frame.to_carla_xy(p) for p in _junction_road_polygons(net)]
    everything = (
        np.concatenate(road + sidewalks + crossings) if road else np.zeros((1, 2))
    )
    bounds = (*everything.min(axis=0), *everything.max(axis=0))
    return MapGeometry(
        map_id=network_hash(net_path),
        road_polygons=tuple(road),
        solid_markings=tuple(solid),
        broken_markings=tuple(broken),
        sidewalk_polygons=tuple(sidewalks),
        crossing_polygons=tuple(crossings),
        lanes=lanes,
        bounds=tuple(float(v) for v in bounds),
    )


def load_map_geometry(net_path: Path, net=None) -> MapGeometry:
    """Cached :func:`extract_map_geometry`; ``net`` (a sumolib net) avoids a second read."""
    map_id = network_hash(net_path)
    cache_file = cache_root() / "geometry" / f"{map_id}-v{GEOMETRY_VERSION}.pkl"
    if cache_file.is_file():
        try:
            with cache_file.open("rb") as handle:
                return pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            pass  # a stale or foreign file: rebuild it below
    if net is None:
        from found_rl.maps.network import read_network

        net = read_network(net_path)
    geometry = extract_map_geometry(net, net_path)
    with replaced_atomically(cache_file) as tmp:
        tmp.write_bytes(pickle.dumps(geometry, protocol=pickle.HIGHEST_PROTOCOL))
    return geometry
