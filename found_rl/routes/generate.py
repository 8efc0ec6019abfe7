"""Generating leaderboard route files for a SUMO network: random drives that turn at lights.

A map with few or no signalised junctions gets plain random drives for the routes that cannot
turn at lights (:func:`draw_routes`, which says how many do).

Each route is a random drive whose sparse waypoints (the start, the middle of every road it
follows, the end) plan back into exactly the same drive, so the file means one route only.
"""

from __future__ import annotations

import numpy as np

from found_rl.actions import RoadOption
from found_rl.errors import UserError
from found_rl.routes.densifier import LaneSpan
from found_rl.routes.leaderboard import RouteSpec
from found_rl.routes.planner import RoutePlanner

SIGNALISED = (
    "traffic_light",
    "traffic_light_right_on_red",
    "traffic_light_unregulated",
)


def junction_of(lane_id: str) -> str:
    """Node id of an internal lane id (``:NODE_LINK_LANE``)."""
    return lane_id[1:].rsplit("_", 2)[0]


def signalised_turns(planner: RoutePlanner, spans: list[LaneSpan]) -> set[RoadOption]:
    """LEFT/RIGHT commands a drive takes inside signalised junctions."""
    turns = set()
    for span in spans:
        if span.command in (
            RoadOption.LEFT,
            RoadOption.RIGHT,
        ) and span.lane_id.startswith(":"):
            node_id = junction_of(span.lane_id)
            if (
                planner.net.hasNode(node_id)
                and planner.net.getNode(node_id).getType() in SIGNALISED
            ):
                turns.add(span.command)
    return turns


def sparse_waypoints(planner: RoutePlanner, spans: list[LaneSpan]) -> np.ndarray:
    """``(K, 2)`` CARLA points: start, middle of each road stretch, end."""
    points = []
    for index, span in enumerate(spans):
        if span.lane_id.startswith(":"):
            continue
        shape = planner.shape(span.lane_id)
        if index == 0:
            points.append(_point_at(shape, span.start_m))
        points.append(_point_at(shape, 0.5 * (span.start_m + span.end_m)))
        if index == len(spans) - 1:
            points.append(_point_at(shape, span.end_m))
    return planner.frame.to_carla_xy(np.asarray(points))


def _point_at(shape: np.ndarray, arc_m: float) -> np.ndarray:
    s = np.concatenate(
        [[0.0], np.cumsum(np.linalg.norm(np.diff(shape, axis=0), axis=1))]
    )
    return np.array(
        [np.interp(arc_m, s, shape[:, 0]), np.interp(arc_m, s, shape[:, 1])]
    )


def generate_routes(
    planner: RoutePlanner,
    rng: np.random.Generator,
    count: int,
    length_m: float,
    town: str = "",
    max_tries: int = 2000,
    *,
    at_lights: bool = True,
) -> list[RouteSpec]:
    """``count`` routes of about ``length_m`` metres, each turning at a signalised junction.

    Left and right turns are balanced: a candidate is kept only if it adds a turn direction
    that is behind in the running tally. With ``at_lights=False`` any random drive is kept.

    Raises:
        UserError: the network has too few signalised junction turns to build such routes from
            (:func:`draw_routes` falls back to plain drives instead).
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    routes: list[RouteSpec] = []
    _collect(planner, rng, routes, count, length_m, town, max_tries, at_lights)
    if len(routes) < count:
        raise UserError(
            f"found only {len(routes)} of {count} routes turning at signalised junctions in {max_tries} tries; "
            "does the map have traffic lights (map.generate.traffic_lights)?"
        )
    return routes


def draw_routes(
    planner: RoutePlanner,
    rng: np.random.Generator,
    count: int,
    length_m: float,
    town: str = "",
    max_tries: int = 2000,
) -> tuple[list[RouteSpec], int]:
    """Routes that turn at lights where the map has enough of them, the rest plain random drives.

    Returns:
        The ``count`` routes (those turning at lights first) and how many of them turn at lights.

    Raises:
        UserError: not even plain drives of ``length_m`` could be drawn (the map is too small).
    """
    routes: list[RouteSpec] = []
    _collect(planner, rng, routes, count, length_m, town, max_tries, at_lights=True)
    at_lights = len(routes)
    _collect(planner, rng, routes, count, length_m, town, max_tries, at_lights=False)
    if len(routes) < count:
        raise UserError(
            f"found only {len(routes)} of {count} drives of {length_m:g} m in {max_tries} tries; "
            "the map is too small for them: ask for shorter routes"
        )
    return routes, at_lights


def _collect(
    planner: RoutePlanner,
    rng: np.random.Generator,
    routes: list[RouteSpec],
    count: int,
    length_m: float,
    town: str,
    max_tries: int,
    at_lights: bool,
) -> None:
    """Append drawn routes to ``routes`` until it holds ``count`` or ``max_tries`` are spent."""
    tally = {RoadOption.LEFT: 0, RoadOption.RIGHT: 0}
    for _ in range(max_tries):
        if len(routes) == count:
            return
        spans = planner.random_spans(rng, length_m)
        turns = signalised_turns(planner, spans) if at_lights else set()
        if at_lights:
            behind = min(tally, key=tally.get)
            if not turns or (behind not in turns and tally[behind] < tally[max(tally, key=tally.get)]):
                continue
        spec = RouteSpec(route_id=str(len(routes)), town=town, waypoints_xy=sparse_waypoints(planner, spans))
        try:
            replanned = planner.plan(spec)
        except ValueError:
            continue
        wanted = planner.densify(spans, spec.route_id)
        if list(dict.fromkeys(replanned.lane_ids)) != list(dict.fromkeys(wanted.lane_ids)):
            continue  # the waypoints would plan into a different drive
        routes.append(spec)
        for turn in turns:
            tally[turn] += 1
