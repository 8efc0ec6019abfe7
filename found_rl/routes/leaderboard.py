"""CARLA leaderboard route files (``routes.xml``): reading and writing.

Two layouts exist and both are read::

    <routes><route id="0" town="Town01"><waypoints><position x=".." y=".." z=".."/>...
    <routes><route id="0" town="Town01"><waypoint x=".." y=".." z=".." yaw=".."/>...

Coordinates are CARLA world coordinates (x east, y south, metres).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from found_rl.errors import MissingPathError, UserError


@dataclass(frozen=True)
class RouteSpec:
    """One route of a route file: sparse waypoints to be planned into a dense route.

    Attributes:
        route_id: the ``id`` attribute.
        town: the ``town`` attribute ("" if absent; written only when given).
        waypoints_xy: ``(K, 2)`` float64 CARLA world points, K >= 2.
    """

    route_id: str
    town: str
    waypoints_xy: np.ndarray


def _float(element: ET.Element, name: str, where: str) -> float:
    raw = element.get(name)
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise UserError(
            f"{where}: attribute {name!r} must be a number, got {raw!r}"
        ) from None


def parse_routes(path: str | Path, town: str | None = None) -> list[RouteSpec]:
    """Read the routes of a leaderboard route file (only ``town``'s, when given).

    The leaderboard's own files (``routes_training.xml``, ``routes_devtest.xml``) hold the
    routes of several towns, told apart by their ``town`` attribute. Older CARLA and Found-RL
    route files give no ``town``; such a route is kept whatever ``town`` asks for.

    Raises:
        FileNotFoundError: no such file.
        ValueError: malformed XML, a route with fewer than 2 waypoints, no routes at all, or
            none of ``town``; the message names the file and route id.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder; pass a leaderboard route XML file")
    if not path.is_file():
        raise MissingPathError(f"route file not found: {path}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise UserError(f"{path}: malformed route XML: {exc}") from None
    routes = []
    for index, element in enumerate(root.iter("route")):
        route_id = element.get("id", str(index))
        points = list(element.iter("position")) or list(element.iter("waypoint"))
        where = f"{path}: route {route_id!r}"
        if len(points) < 2:
            raise UserError(f"{where}: needs at least 2 waypoints, got {len(points)}")
        xy = np.array(
            [
                [
                    _float(p, "x", f"{where} waypoint {i}"),
                    _float(p, "y", f"{where} waypoint {i}"),
                ]
                for i, p in enumerate(points)
            ]
        )
        routes.append(
            RouteSpec(route_id=route_id, town=element.get("town", ""), waypoints_xy=xy)
        )
    if not routes:
        raise UserError(
            f"{path}: no <route> elements found (expected the CARLA leaderboard layout)"
        )
    if town is not None:
        # Older CARLA and Found-RL route files give no town: such routes belong to every town.
        towns = sorted({r.town for r in routes if r.town})
        routes = [r for r in routes if r.town in (town, "")]
        if not routes:
            raise UserError(f"{path}: no route of town {town!r} (routes.town); the file has towns {towns}")
    ids = [r.route_id for r in routes]
    if len(set(ids)) != len(ids):
        raise UserError(f"{path}: route ids must be unique, got duplicates in {ids}")
    return routes


def write_routes(path: str | Path, routes: list[RouteSpec]) -> None:
    """Write routes in the current leaderboard layout (``<waypoints><position .../>``)."""
    root = ET.Element("routes")
    for spec in routes:
        route = ET.SubElement(root, "route", id=spec.route_id, **({"town": spec.town} if spec.town else {}))
        waypoints = ET.SubElement(route, "waypoints")
        for x, y in spec.waypoints_xy:
            ET.SubElement(waypoints, "position", x=f"{x:.2f}", y=f"{y:.2f}", z="0.0")
    tree = ET.ElementTree(root)
    ET.indent(tree, space="  ")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
