"""Dense routes (about 1 m spacing, with RoadOption commands) through a SUMO lane graph.

A route is first a list of :class:`LaneSpan` (a stretch of one lane with a command), built
either from a leaderboard route's sparse waypoints (shortest path between the edges they
lie on) or by a random walk; :meth:`RoutePlanner.densify` then samples it evenly in CARLA's
frame (``found_rl.routes.densifier``). Junction lanes carry LEFT/RIGHT/STRAIGHT, lane changes
CHANGELANELEFT/RIGHT, the rest LANEFOLLOW, as CARLA's ``GlobalRoutePlanner`` does.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from found_rl.actions import RoadOption
from found_rl.errors import UserError
from found_rl.routes.densifier import LaneSpan, RouteSampling, arc_length, slice_polyline
from found_rl.routes.leaderboard import RouteSpec, parse_routes
from found_rl.world import Route
from found_rl.world.frames import SumoFrame

VEHICLE_CLASS = "passenger"
TURN_COMMANDS = {
    "l": RoadOption.LEFT,
    "L": RoadOption.LEFT,
    "t": RoadOption.LEFT,
    "r": RoadOption.RIGHT,
    "R": RoadOption.RIGHT,
}


class RoutePlanner:
    """Plans dense routes on one SUMO network (a sumolib net read with internal lanes).

    Args:
        net: sumolib network.
        frame: its SUMO → CARLA frame.
        sampling: waypoint spacing and how early the planned routes announce a manoeuvre
            (:func:`~found_rl.world.route_command`); default 1 m, 20 m or 3 s.
        max_waypoint_offset_m: a route waypoint farther than this from every drivable lane
            is off the network.
    """

    def __init__(
        self, net, frame: SumoFrame, sampling: RouteSampling | None = None, max_waypoint_offset_m: float = 4.0
    ) -> None:
        self.net = net
        self.frame = frame
        self.sampling = sampling or RouteSampling()
        self.max_waypoint_offset_m = max_waypoint_offset_m
        self._shapes: dict[str, np.ndarray] = {}
        self._segments: _LaneSegments | None = None
        self._lengths: dict[str, float] = {}
        self.drivable_lanes = [
            lane
            for edge in net.getEdges()
            if edge.getFunction() == ""
            for lane in edge.getLanes()
            if lane.allows(VEHICLE_CLASS)
        ]
        if not self.drivable_lanes:
            raise UserError("the network has no lanes open to passenger cars")
        lengths = np.array(
            [self.lane_length(lane.getID()) for lane in self.drivable_lanes]
        )
        self._start_lane_p = lengths / lengths.sum()

    @classmethod
    def of_network(cls, net, sampling: RouteSampling | None = None) -> RoutePlanner:
        """The planner of a sumolib network (read with internal lanes), in the network's own frame."""
        return cls(net, SumoFrame.of_network(net), sampling)

    def plan_file(self, path: str | Path, town: str | None = None) -> list[Route]:
        """Every route of a leaderboard route file (``town``'s, when given), planned on this network.

        Raises:
            UserError: a route this network cannot drive, naming the file, route and waypoint.
        """
        routes = []
        for spec in parse_routes(path, town):
            try:
                routes.append(self.plan(spec))
            except ValueError as exc:
                raise UserError(f"{path}: {exc}") from None
        return routes

    # ----------------------------------------------------------------------------- geometry
    def shape(self, lane_id: str) -> np.ndarray:
        """``(K, 2)`` SUMO-frame shape of a lane (cached)."""
        if lane_id not in self._shapes:
            self._shapes[lane_id] = np.asarray(
                self.net.getLane(lane_id).getShape(), dtype=np.float64
            )
        return self._shapes[lane_id]

    def lane_length(self, lane_id: str) -> float:
        """Arc length of a lane's shape (cached)."""
        if lane_id not in self._lengths:
            self._lengths[lane_id] = float(arc_length(self.shape(lane_id))[-1])
        return self._lengths[lane_id]

    def densify(self, spans: list[LaneSpan], route_id: str) -> Route:
        """Sample lane spans every ``spacing_m`` metres into a CARLA-frame :class:`Route`."""
        pieces = [
            self.frame.to_carla_xy(slice_polyline(self.shape(span.lane_id), span.start_m, span.end_m))
            for span in spans
        ]
        return self.sampling.densify(spans, pieces, route_id)

    # ------------------------------------------------------------------------ connections
    def _junction_command(self, connection) -> RoadOption:
        node = connection.getJunction()
        if node is not None and len(node.getNeighboringNodes()) < 3:
            return RoadOption.LANEFOLLOW  # a bend or a dead end, not a real junction
        return TURN_COMMANDS.get(connection.getDirection(), RoadOption.STRAIGHT)

    def connection_spans(self, connection) -> list[LaneSpan]:
        """Spans of the junction (internal) lanes a connection drives through."""
        command = self._junction_command(connection)
        target = connection.getToLane().getID()
        spans, via = [], connection.getViaLaneID()
        while via:
            spans.append(LaneSpan(via, 0.0, self.lane_length(via), command))
            via = next(
                (
                    o.getViaLaneID()
                    for o in self.net.getLane(via).getOutgoing()
                    if o.getToLane().getID() == target
                ),
                "",
            )
        return spans

    def drivable_connections(self, lane) -> list:
        return [
            c
            for c in lane.getOutgoing()
            if c.getToLane().allows(VEHICLE_CLASS) and c.getDirection() != "t"
        ]

    def neighboring_lanes(self, x: float, y: float, radius: float) -> list[tuple]:
        """``net.getNeighboringLanes(x, y, radius, includeJunctions=True)``, the same list.

        sumolib without rtree measures every lane in pure Python (about 17 ms a waypoint on a
        small town, most of ``scenario check`` and of planning a route file); here numpy
        measures every lane segment at once, and only the lanes it finds within reach (plus a
        hair, for rounding) are measured again by sumolib, whose distances are returned.
        """
        from sumolib.geomhelper import distancePointToPolygon

        if self._segments is None:
            self._segments = _LaneSegments(self.net)
        table = self._segments
        near = table.within(x, y, radius + 1e-6)
        lanes = []
        for index in near:
            lane = table.lanes[index]
            d = distancePointToPolygon((x, y), lane.getShape(True))
            if d < radius:
                lanes.append((lane, d))
        return lanes

    # ------------------------------------------------------------------------ planning
    def _match(
        self, xy_sumo: np.ndarray, toward_sumo: np.ndarray, route_id: str, index: int
    ):
        """(lane, arc position) of the drivable normal lane a waypoint lies on."""
        radius = self.max_waypoint_offset_m
        nearby = self.neighboring_lanes(float(xy_sumo[0]), float(xy_sumo[1]), radius)
        candidates = [
            (lane, dist)
            for lane, dist in nearby
            if lane.allows(VEHICLE_CLASS) and dist <= radius
        ]
        if not candidates:
            x, y = self.frame.to_carla_xy(xy_sumo)
            raise UserError(
                f"route {route_id!r}: waypoint {index} at ({x:.1f}, {y:.1f}) is off the network "
                f"(no drivable lane within {radius} m)"
            )
        best = min(dist for _, dist in candidates)

        def alignment(lane) -> float:
            shape = self.shape(lane.getID())
            s = arc_length(shape)
            pos = self.project_onto(shape, xy_sumo)
            i = int(np.clip(np.searchsorted(s, pos) - 1, 0, len(shape) - 2))
            direction = shape[i + 1] - shape[i]
            return float(
                np.dot(direction, toward_sumo)
                / (np.linalg.norm(direction) * np.linalg.norm(toward_sumo) + 1e-9)
            )

        near = [lane for lane, dist in candidates if dist <= best + 0.5]
        lane = max(near, key=alignment)
        if (
            lane.getEdge().getFunction() == "internal"
        ):  # inside a junction: continue onto the exit lane
            out = lane.getOutgoing()
            while out and out[0].getViaLaneID():
                out = self.net.getLane(out[0].getViaLaneID()).getOutgoing()
            if not out:
                raise UserError(
                    f"route {route_id!r}: waypoint {index} lies on a junction lane that leads nowhere"
                )
            return out[0].getToLane(), 0.0
        return lane, self.project_onto(self.shape(lane.getID()), xy_sumo)

    @staticmethod
    def project_onto(shape: np.ndarray, xy: np.ndarray) -> float:
        """Arc position (metres along ``shape``) of the point of ``shape`` nearest to ``xy``."""
        a, b = shape[:-1], shape[1:]
        ab = b - a
        t = np.clip(
            np.einsum("ij,ij->i", xy - a, ab)
            / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-12),
            0.0,
            1.0,
        )
        dist = np.linalg.norm(a + t[:, None] * ab - xy, axis=1)
        i = int(np.argmin(dist))
        return float(arc_length(shape)[i] + t[i] * np.linalg.norm(ab[i]))

    def _change_lane(
        self, spans: list[LaneSpan], lane, target, start_m: float, end_m: float
    ) -> None:
        """Drive ``lane`` from ``start_m``, switching to ``target`` halfway to ``end_m``."""
        middle = 0.5 * (start_m + end_m)
        command = (
            RoadOption.CHANGELANELEFT
            if target.getIndex() > lane.getIndex()
            else RoadOption.CHANGELANERIGHT
        )
        spans.append(LaneSpan(lane.getID(), start_m, middle, RoadOption.LANEFOLLOW))
        spans.append(LaneSpan(target.getID(), middle, end_m, command))

    def plan(self, spec: RouteSpec) -> Route:
        """Dense route through the sparse waypoints of a leaderboard route.

        Raises:
            ValueError: a waypoint is off the network, or no drivable path joins two
                waypoints; the message names the route id and waypoint index.
        """
        points = self.frame.to_sumo_xy(spec.waypoints_xy)
        matches = []
        for i, point in enumerate(points):
            toward = (
                points[i + 1] - point if i + 1 < len(points) else point - points[i - 1]
            )
            matches.append(self._match(point, toward, spec.route_id, i))
        edges = [matches[0][0].getEdge()]
        for i in range(len(matches) - 1):
            (lane_a, pos_a), (lane_b, pos_b) = matches[i], matches[i + 1]
            if lane_a.getEdge() is lane_b.getEdge() and pos_b >= pos_a:
                continue
            path, _ = self.net.getShortestPath(
                lane_a.getEdge(), lane_b.getEdge(), vClass=VEHICLE_CLASS
            )
            if not path:
                raise UserError(
                    f"route {spec.route_id!r}: no drivable path from waypoint {i} to waypoint {i + 1}"
                )
            edges += list(path[1:]) if path[0] is edges[-1] else list(path)
        lane, position = matches[0]
        end_lane, end_position = matches[-1]
        spans: list[LaneSpan] = []
        for edge, next_edge in itertools.pairwise(edges):
            connections = [
                c
                for lane in edge.getLanes()
                if lane.allows(VEHICLE_CLASS)
                for c in self.drivable_connections(lane)
                if c.getTo() is next_edge
            ]
            if not connections:
                raise UserError(
                    f"route {spec.route_id!r}: edge {edge.getID()} does not connect to {next_edge.getID()}"
                )
            own = [c for c in connections if c.getFromLane() is lane]
            connection = (
                own[0]
                if own
                else min(
                    connections,
                    key=lambda c: abs(c.getFromLane().getIndex() - lane.getIndex()),
                )
            )
            length = self.lane_length(lane.getID())
            if own:
                spans.append(
                    LaneSpan(lane.getID(), position, length, RoadOption.LANEFOLLOW)
                )
            else:
                self._change_lane(
                    spans, lane, connection.getFromLane(), position, length
                )
            spans += self.connection_spans(connection)
            lane, position = connection.getToLane(), 0.0
        if end_lane is lane or end_lane.getEdge() is not lane.getEdge():
            spans.append(
                LaneSpan(
                    lane.getID(),
                    position,
                    max(end_position, position),
                    RoadOption.LANEFOLLOW,
                )
            )
        else:
            self._change_lane(
                spans, lane, end_lane, position, max(end_position, position)
            )
        return self.densify(spans, spec.route_id)

    def random_spans(
        self, rng: np.random.Generator, length_m: float, max_tries: int = 50
    ) -> list[LaneSpan]:
        """Lane spans of a random drive of ``length_m`` metres (no U-turns, no dead ends)."""
        for _ in range(max_tries):
            lane = self.drivable_lanes[
                rng.choice(len(self._start_lane_p), p=self._start_lane_p)
            ]
            start = float(rng.uniform(0.0, 0.5 * self.lane_length(lane.getID())))
            spans = [
                LaneSpan(
                    lane.getID(),
                    start,
                    self.lane_length(lane.getID()),
                    RoadOption.LANEFOLLOW,
                )
            ]
            total = spans[0].end_m - start
            while total < length_m:
                connections = self.drivable_connections(lane)
                if not connections:
                    break
                connection = connections[rng.integers(len(connections))]
                for span in self.connection_spans(connection) + [
                    LaneSpan(
                        connection.getToLane().getID(),
                        0.0,
                        self.lane_length(connection.getToLane().getID()),
                        RoadOption.LANEFOLLOW,
                    )
                ]:
                    spans.append(span)
                    total += span.end_m - span.start_m
                lane = connection.getToLane()
            if total >= length_m:
                overshoot = total - length_m
                while overshoot >= spans[-1].end_m - spans[-1].start_m:
                    overshoot -= spans[-1].end_m - spans[-1].start_m
                    spans.pop()
                last = spans[-1]
                spans[-1] = LaneSpan(
                    last.lane_id, last.start_m, last.end_m - overshoot, last.command
                )
                return spans
        raise UserError(
            f"could not find a {length_m} m drive without dead ends in {max_tries} tries; use shorter routes"
        )

    def random_route(
        self, rng: np.random.Generator, length_m: float, route_id: str
    ) -> Route:
        """A dense random route of ``length_m`` metres."""
        return self.densify(self.random_spans(rng, length_m), route_id)


class _LaneSegments:
    """Every lane's shape (with junction ends, as sumolib's neighbour search reads it) as
    segments in flat arrays, in the net's edge and lane order."""

    def __init__(self, net) -> None:
        self.lanes = [lane for edge in net.getEdges() for lane in edge.getLanes()]
        starts, ends, owner, degenerate = [], [], [], []
        for index, lane in enumerate(self.lanes):
            shape = np.asarray(lane.getShape(True), dtype=np.float64).reshape(-1, 2)
            if len(shape) < 2:  # sumolib's distance is then -1, below any radius: always a candidate
                degenerate.append(index)
                continue
            starts.append(shape[:-1])
            ends.append(shape[1:])
            owner.append(np.full(len(shape) - 1, index))
        self.start = np.concatenate(starts) if starts else np.zeros((0, 2))
        self.delta = (np.concatenate(ends) if ends else np.zeros((0, 2))) - self.start
        self.owner = np.concatenate(owner) if owner else np.zeros(0, np.int64)
        self.length_sq = np.einsum("ij,ij->i", self.delta, self.delta)
        self.degenerate = np.asarray(degenerate, dtype=np.int64)

    def within(self, x: float, y: float, reach: float) -> list[int]:
        """Indices (ascending) of the lanes with a segment closer than ``reach`` to ``(x, y)``."""
        rel = np.array([x, y]) - self.start
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.clip(np.einsum("ij,ij->i", rel, self.delta) / self.length_sq, 0.0, 1.0)
        t = np.where(self.length_sq > 0, t, 0.0)
        gap = rel - t[:, None] * self.delta
        close = np.einsum("ij,ij->i", gap, gap) < reach * reach
        return sorted(set(np.unique(self.owner[close]).tolist()) | set(self.degenerate.tolist()))

