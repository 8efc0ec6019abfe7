"""Generating leaderboard route files for a SUMO network: random drives that turn at lights.

Each route is a random drive whose sparse waypoints (the start, the middle of every road it
follows, the end) plan back into exactly the same drive, so the file means one route only.
"""

from __future__ import annotations

import numpy as np

from found_rl.actions import RoadOption
from found_rl.errors import UserError
from found_rl.routes.leaderboard import RouteSpec
from found_rl.routes.planner import LaneSpan, RoutePlanner

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
) -> list[RouteSpec]:
    """``count`` routes of about ``length_m`` metres, each turning at a signalised junction.

    Left and right turns are balanced: a candidate is kept only if it adds a turn direction
    that is behind in the running tally.

    Raises:
        ValueError: the network has no signalised junction turns to build such routes from.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    routes: list[RouteSpec] = []
    tally = {RoadOption.LEFT: 0, RoadOption.RIGHT: 0}
    for _ in range(max_tries):
        if len(routes) == count:
            return routes
        spans = planner.random_spans(rng, length_m)
        turns = signalised_turns(planner, spans)
        behind = min(tally, key=tally.get)
        if not turns or (
            behind not in turns and tally[behind] < tally[max(tally, key=tally.get)]
        ):
            continue
        spec = RouteSpec(
            route_id=str(len(routes)),
            town=town,
            waypoints_xy=sparse_waypoints(planner, spans),
        )
        try:
            replanned = planner.plan(spec)
        except ValueError:
            continue
        wanted = planner.densify(spans, spec.route_id)
        if list(dict.fromkeys(replanned.lane_ids)) != list(
            dict.fromkeys(wanted.lane_ids)
        ):
            continue  # the waypoints would plan into a different drive
        routes.append(spec)
        for turn in turns:
            tally[turn] += 1
    raise UserError(
        f"found only {len(routes)} of {count} routes turning at signalised junctions in {max_tries} tries; "
        "does the map have traffic lights (map.generate.traffic_lights)?"
    )
