"""Dense routes (1 m spacing, with RoadOption commands) through a town's lane graph.

Works on :class:`~found_rl.world.MapGeometry` lanes alone (centrelines, successors,
same-direction neighbours), so a CARLA town needs no server to plan on: a leaderboard route's
sparse waypoints are matched onto lanes, joined by shortest paths over successors and lane
changes, and sampled evenly (``found_rl.routes.densifier``). Junction lanes carry
LEFT/RIGHT/STRAIGHT by how much they turn, lane changes CHANGELANELEFT/RIGHT, the rest
LANEFOLLOW, as CARLA's ``GlobalRoutePlanner`` labels them.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from found_rl.actions import RoadOption
from found_rl.errors import UserError
from found_rl.routes.densifier import LaneSpan, RouteSampling, arc_length, slice_polyline
from found_rl.routes.leaderboard import RouteSpec
from found_rl.world import Lane, MapGeometry, Route

TURN_DEG = 30.0
"""A junction lane whose heading changes more than this is a turn."""
LANE_CHANGE_COST_M = 20.0


class TownRoutePlanner:
    """Plans dense routes on one town's lanes.

    Args:
        geometry: the town's map geometry.
        sampling: waypoint spacing and how early the planned routes announce a manoeuvre
            (:func:`~found_rl.world.route_command`); default 1 m, 20 m or 3 s.
        max_waypoint_offset_m: a route waypoint farther than this from every driving lane is
            off the map.
    """

    def __init__(
        self, geometry: MapGeometry, sampling: RouteSampling | None = None, max_waypoint_offset_m: float = 4.0
    ) -> None:
        self.lanes: dict[str, Lane] = geometry.lanes
        if not self.lanes:
            raise UserError("the town has no driving lanes")
        self.sampling = sampling or RouteSampling()
        self.max_waypoint_offset_m = max_waypoint_offset_m
        self._length = {key: float(arc_length(lane.centerline)[-1]) for key, lane in self.lanes.items()}
        keys, starts, ends = [], [], []
        for key, lane in self.lanes.items():
            keys += [key] * (len(lane.centerline) - 1)
            starts.append(lane.centerline[:-1])
            ends.append(lane.centerline[1:])
        self._segment_lane = np.asarray(keys)
        self._a, self._b = np.vstack(starts), np.vstack(ends)
        self._segment_s = np.concatenate([arc_length(lane.centerline)[:-1] for lane in self.lanes.values()])
        self._predecessors: dict[str, list[str]] = {key: [] for key in self.lanes}
        for key, lane in self.lanes.items():
            for successor in lane.successors:
                if successor in self._predecessors:
                    self._predecessors[successor].append(key)
        self._starts = [k for k, lane in self.lanes.items() if not lane.is_junction] or list(self.lanes)
        weights = np.array([self._length[k] for k in self._starts])
        self._start_p = weights / weights.sum()

    def lane_length(self, lane_id: str) -> float:
        return self._length[lane_id]

    # ------------------------------------------------------------------------ matching
    def locate(self, xy: np.ndarray, toward: np.ndarray | None = None) -> tuple[str, float, float]:
        """``(lane, arc position, distance)`` of the lane point nearest ``xy``.

        Among lanes within 1 m of the nearest, the one best aligned with ``toward`` wins
        (a waypoint between opposite lanes belongs to the one driving its way).
        """
        ab = self._b - self._a
        t = np.clip(np.einsum("ij,ij->i", xy - self._a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-12), 0, 1)
        foot = self._a + t[:, None] * ab
        dist = np.linalg.norm(foot - xy, axis=1)
        best = float(dist.min())
        near = np.flatnonzero(dist <= best + 1.0)
        if toward is not None and np.linalg.norm(toward) > 1e-9:
            alignment = (ab[near] @ toward) / (np.linalg.norm(ab[near], axis=1) * np.linalg.norm(toward) + 1e-12)
            i = int(near[np.argmax(alignment - 0.1 * dist[near])])
        else:
            i = int(near[np.argmin(dist[near])])
        position = float(self._segment_s[i] + t[i] * np.linalg.norm(ab[i]))
        return str(self._segment_lane[i]), position, float(dist[i])

    def _match(self, spec: RouteSpec, index: int) -> tuple[str, float]:
        points = spec.waypoints_xy
        toward = points[index + 1] - points[index] if index + 1 < len(points) else points[index] - points[index - 1]
        lane, position, dist = self.locate(points[index], toward)
        if dist > self.max_waypoint_offset_m:
            x, y = points[index]
            raise UserError(
                f"route {spec.route_id!r}: waypoint {index} at ({x:.1f}, {y:.1f}) is off the town's map "
                f"(nearest driving lane {dist:.1f} m away, more than {self.max_waypoint_offset_m:g} m)"
            )
        if self.lanes[lane].is_junction:  # inside a junction: continue onto the exit lane
            successors = self.lanes[lane].successors
            if successors:
                return successors[0], 0.0
        return lane, position

    # ------------------------------------------------------------------------ planning
    def _neighbours(self, lane_id: str) -> list[tuple[str, float, bool]]:
        """(next lane, cost, is a lane change) from the end of ``lane_id``."""
        lane = self.lanes[lane_id]
        moves = [(s, self._length[s], False) for s in lane.successors if s in self.lanes]
        if not lane.is_junction:
            moves += [
                (side, LANE_CHANGE_COST_M, True)
                for side in (lane.left_neighbor, lane.right_neighbor)
                if side is not None and side in self.lanes
            ]
        return moves

    def _path(self, start: str, goal: str) -> list[tuple[str, bool]] | None:
        """Lanes from ``start`` to ``goal`` (Dijkstra), each with whether a lane change enters it.

        At least one move is made, so ``goal == start`` means driving round to it again.
        """
        parents: dict[str, tuple[str, bool]] = {}
        counter = itertools.count()
        queue = [(step, next(counter), nxt, (start, change)) for nxt, step, change in self._neighbours(start)]
        heapq.heapify(queue)
        while queue:
            cost, _, lane, parent = heapq.heappop(queue)
            if lane in parents:
                continue
            parents[lane] = parent
            if lane == goal:
                break
            for nxt, step, change in self._neighbours(lane):
                if nxt not in parents:
                    heapq.heappush(queue, (cost + step, next(counter), nxt, (lane, change)))
        if goal not in parents:
            return None
        path, lane = [], goal
        while True:
            parent, change = parents[lane]
            path.append((lane, change))
            if parent == start:
                break
            lane = parent
        return [(start, False), *reversed(path)]

    def _family(self, lane_id: str) -> frozenset[str]:
        """A lane and its same-direction neighbours: one road's lanes."""
        family, frontier = {lane_id}, [lane_id]
        while frontier:
            lane = self.lanes[frontier.pop()]
            for side in (lane.left_neighbor, lane.right_neighbor):
                if side is not None and side in self.lanes and side not in family:
                    family.add(side)
                    frontier.append(side)
        return frozenset(family)

    def _is_choice(self, predecessor: str) -> bool:
        """Whether the junction after ``predecessor``'s road leads to more than one road.

        A two-arm junction (a bend some converters model as a junction) is no choice, so its
        lanes are LANEFOLLOW; a turn-only lane at a real junction is still a turn.
        """
        exits = set()
        for lane in self._family(predecessor):
            for connector in self.lanes[lane].successors:
                if connector in self.lanes and self.lanes[connector].is_junction:
                    exits.update(self._family(s) for s in self.lanes[connector].successors if s in self.lanes)
        return len(exits) >= 2

    def _turn_command(self, lane_id: str, predecessor: str | None) -> RoadOption:
        lane = self.lanes[lane_id]
        if not lane.is_junction:
            return RoadOption.LANEFOLLOW
        if predecessor is not None and not self._is_choice(predecessor):
            return RoadOption.LANEFOLLOW  # a bend, not a choice
        c = lane.centerline
        start, end = c[min(1, len(c) - 1)] - c[0], c[-1] - c[max(len(c) - 2, 0)]
        turn = np.degrees(np.arctan2(start[0] * end[1] - start[1] * end[0], start @ end))
        if turn > TURN_DEG:
            return RoadOption.RIGHT  # clockwise seen from above in CARLA's frame
        if turn < -TURN_DEG:
            return RoadOption.LEFT
        return RoadOption.STRAIGHT

    def _spans(self, path: list[tuple[str, bool]], start_m: float, end_m: float) -> list[LaneSpan]:
        """Spans along ``path`` from ``start_m`` on its first lane to ``end_m`` on its last.

        A lane change happens halfway along the lane it leaves; side-by-side lanes share arc
        positions, so the target lane is entered at the same position.
        """
        spans: list[LaneSpan] = []
        position = start_m
        for index, (lane, entered_by_change) in enumerate(path):
            is_last = index + 1 == len(path)
            stop = end_m if is_last else self._length[lane]
            if not is_last and path[index + 1][1]:
                middle = 0.5 * (position + stop)
                spans.append(LaneSpan(lane, position, middle, RoadOption.LANEFOLLOW))
                position = middle
                continue
            if entered_by_change:
                left = self.lanes[path[index - 1][0]].left_neighbor == lane
                command = RoadOption.CHANGELANELEFT if left else RoadOption.CHANGELANERIGHT
            else:
                command = self._turn_command(lane, path[index - 1][0] if index > 0 else None)
            spans.append(LaneSpan(lane, position, max(stop, position), command))
            position = 0.0
        return spans

    def plan(self, spec: RouteSpec) -> Route:
        """Dense route through the sparse waypoints of a leaderboard route.

        Raises:
            ValueError: a waypoint is off the map, or no drivable path joins two waypoints;
                the message names the route id and waypoint index.
        """
        matches = [self._match(spec, i) for i in range(len(spec.waypoints_xy))]
        path: list[tuple[str, bool]] = [(matches[0][0], False)]
        for i, ((lane_a, pos_a), (lane_b, pos_b)) in enumerate(itertools.pairwise(matches)):
            if lane_a == lane_b and pos_b >= pos_a:
                continue
            leg = self._path(lane_a, lane_b)
            if leg is None:
                raise UserError(f"route {spec.route_id!r}: no drivable path from waypoint {i} to waypoint {i + 1}")
            path += leg[1:]
        return self.densify(self._spans(path, matches[0][1], matches[-1][1]), spec.route_id)

    def random_route(self, rng: np.random.Generator, length_m: float, route_id: str, max_tries: int = 50) -> Route:
        """A dense random drive of ``length_m`` metres (no dead ends)."""
        for _ in range(max_tries):
            lane = self._starts[int(rng.choice(len(self._starts), p=self._start_p))]
            start = float(rng.uniform(0.0, 0.5 * self._length[lane]))
            path, total = [(lane, False)], self._length[lane] - start
            while total < length_m:
                successors = [s for s in self.lanes[lane].successors if s in self.lanes]
                if not successors:
                    break
                lane = successors[int(rng.integers(len(successors)))]
                path.append((lane, False))
                total += self._length[lane]
            if total >= length_m:
                end = self._length[lane] - (total - length_m)
                return self.densify(self._spans(path, start, end), route_id)
        raise UserError(
            f"could not find a {length_m} m drive without dead ends in {max_tries} tries; use shorter routes"
        )

    def densify(self, spans: list[LaneSpan], route_id: str) -> Route:
        """Sample spans every ``spacing_m`` metres into a :class:`Route`."""
        pieces = [slice_polyline(self.lanes[span.lane_id].centerline, span.start_m, span.end_m) for span in spans]
        return self.sampling.densify(spans, pieces, route_id)
