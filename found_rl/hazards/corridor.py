"""Which vehicles or walkers overlap the strip of route ahead of the ego's bumper.

:func:`actors_in_corridor_reference` is the definition, in vectorised numpy.
:func:`actors_in_corridor` gives the same answers bit for bit, faster for the few actors of a
real snapshot: a Python-float cull first, then bounds that dismiss most remaining boxes, and
numpy (with the reference's very operations) only for the boxes left.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from found_rl.hazards.geometry import (
    FAST_PATH_LIMIT,
    REACH_SLACK,
    RouteGeometry,
    ego_arclength,
    route_geometry,
    window_end,
)
from found_rl.hazards.results import ActorHazard
from found_rl.sim.snapshot import ActorBoxes, WorldSnapshot

_CORNER_SIGNS = np.array([1.0, 1.0, -1.0, -1.0, 0.0]) + 1j * np.array([1.0, -1.0, -1.0, 1.0, 0.0])
"""The four box corners and the centre as ``along + i across`` signs."""

_CORNER_SIGN_PAIRS = tuple(zip(_CORNER_SIGNS.real.tolist(), _CORNER_SIGNS.imag.tolist()))


def actors_in_corridor(
    snapshot: WorldSnapshot,
    boxes: ActorBoxes,
    route_index: int,
    horizon_m: float,
    half_width_m: float,
) -> list[ActorHazard]:
    """Boxes overlapping the strip ``|lateral| <= half_width_m`` ahead of the bumper, nearest first.

    Each corner is placed on the route by its nearest waypoint in the searched stretch; a box
    overlaps the strip when its lateral offsets reach into ``[-half_width_m, half_width_m]``
    (corners on both sides count, so a box across the corridor is caught).

    With a handful of actors per step, numpy's per-call overhead dominates, so the work is
    split: the cull and the scalar bookkeeping run on Python floats, and only the steps whose
    rounding Python cannot reproduce (complex products, which numpy fuses into FMAs on some
    CPUs) or that would loop over the route in Python (nearest waypoints) stay in numpy, with
    the very same operations as :func:`actors_in_corridor_reference`. Inputs the fast path
    does not vouch for (non-finite or huge numbers, odd shapes) take the reference path.
    """
    route = snapshot.route
    if len(boxes) == 0 or len(route.xy) < 2:
        return []
    if not (_is_plain_number(horizon_m) and _is_plain_number(half_width_m)):
        return actors_in_corridor_reference(snapshot, boxes, route_index, horizon_m, half_width_m)
    scene = _CorridorScene.of(snapshot, boxes, horizon_m, half_width_m)
    if scene is None:
        return actors_in_corridor_reference(snapshot, boxes, route_index, horizon_m, half_width_m)
    candidates = scene.candidates()
    if candidates is None:  # a box on the edge of the reach: let numpy decide
        return actors_in_corridor_reference(snapshot, boxes, route_index, horizon_m, half_width_m)
    if not candidates:  # the common case: nobody near, decided without a numpy call
        return []
    return _corridor_hazards(snapshot, boxes, route_index, scene, candidates)


@dataclass(slots=True)
class _CorridorScene:
    """The per-call numbers of :func:`actors_in_corridor` as Python floats.

    Attributes:
        ego_x, ego_y: ego centre.
        ego_half_length: half-length of the ego.
        horizon_m, half_width_m: the corridor.
        xy: ``[x, y]`` per box.
        half_extent: ``[half-length, half-width]`` per box.
    """

    ego_x: float
    ego_y: float
    ego_half_length: float
    horizon_m: float
    half_width_m: float
    xy: list[list[float]]
    half_extent: list[list[float]]

    @staticmethod
    def of(snapshot: WorldSnapshot, boxes: ActorBoxes, horizon_m: float, half_width_m: float) -> _CorridorScene | None:
        """The scene, or ``None`` when the inputs need the reference path."""
        xy = np.asarray(boxes.xy, dtype=np.float64)
        half_extent = np.asarray(boxes.half_extent, dtype=np.float64)
        if xy.shape != (len(boxes), 2) or half_extent.shape != xy.shape:
            return None
        ego_x, ego_y = float(snapshot.ego.xy[0]), float(snapshot.ego.xy[1])
        ego_half_length = float(snapshot.ego.half_extent[0])
        horizon_m, half_width_m = float(horizon_m), float(half_width_m)
        if not _are_tame((ego_x, ego_y, ego_half_length, horizon_m, half_width_m)):
            return None
        # The boxes' numbers are vetted later, for the candidates only: the cull's comparisons
        # already fail safe (a NaN or an overflow never passes for sure in nor for sure out).
        return _CorridorScene(ego_x, ego_y, ego_half_length, horizon_m, half_width_m, xy.tolist(), half_extent.tolist())

    def candidates(self) -> list[int] | None:
        """Indices of the boxes the reference's reach test keeps, or ``None`` if one is too
        close to call in Python floats."""
        reach_m = self.horizon_m + self.ego_half_length + self.half_width_m
        ego_x, ego_y, hypot = self.ego_x, self.ego_y, math.hypot
        low, high = 1.0 - REACH_SLACK, 1.0 + REACH_SLACK
        found = []
        for k, ((x, y), (half_length, half_width)) in enumerate(zip(self.xy, self.half_extent)):
            dx, dy = x - ego_x, y - ego_y
            distance2 = dx * dx + dy * dy
            limit = reach_m + hypot(half_length, half_width)
            outer = limit * high
            if distance2 > outer * outer:
                continue
            inner = limit * low
            if distance2 < inner * inner and limit > 0.0:
                found.append(k)
                continue
            return None
        return found


def _corridor_hazards(
    snapshot: WorldSnapshot, boxes: ActorBoxes, route_index: int, scene: _CorridorScene, candidates: list[int]
) -> list[ActorHazard]:
    """The exact test of :func:`actors_in_corridor_reference` for the culled candidates."""
    route = snapshot.route
    geometry = route_geometry(route)
    s_ego = ego_arclength(snapshot, route_index, geometry)
    s_front = s_ego + scene.ego_half_length
    start = min(max(int(route_index) - 2, 0), len(route.xy) - 1)
    yaw = np.asarray(boxes.yaw_deg, dtype=np.float64).reshape(-1).tolist()
    if (
        not geometry.is_tame
        or len(yaw) != len(scene.xy)
        or not all(_are_tame((*scene.xy[k], *scene.half_extent[k], yaw[k])) for k in candidates)
    ):
        return actors_in_corridor_reference(snapshot, boxes, route_index, scene.horizon_m, scene.half_width_m)
    end = _candidate_window_end(geometry, scene, candidates, s_front + scene.horizon_m)
    frame = _straight_frame(geometry, start, end)
    headings = {k: _heading(yaw[k]) for k in candidates}
    if frame is not None:  # most boxes near the ego are provably beside or behind the corridor
        candidates = [
            k for k in candidates if not _misses_corridor(scene, k, headings[k], frame, geometry, start, end, s_front)
        ]
        if not candidates:
            return []
    return _exact_corridor_hazards(snapshot, boxes, scene, candidates, headings, geometry, start, end, s_front)


def _exact_corridor_hazards(
    snapshot: WorldSnapshot,
    boxes: ActorBoxes,
    scene: _CorridorScene,
    candidates: list[int],
    headings: dict[int, complex],
    geometry: RouteGeometry,
    start: int,
    end: int,
    s_front: float,
) -> list[ActorHazard]:
    """The reference's arithmetic for some candidates (each box's answer depends only on itself
    and the searched stretch ``start:end``)."""
    path, path_s, path_direction = (
        geometry.xy[start:end],
        geometry.arclength_m[start:end],
        geometry.direction[start:end],
    )
    centres, local, heading = [], [], []
    for k in candidates:
        (x, y), (half_length, half_width) = scene.xy[k], scene.half_extent[k]
        centres.append(_real_plus_i_times(x, y))
        local.append(
            [_real_plus_i_times(half_length * along, half_width * across) for along, across in _CORNER_SIGN_PAIRS]
        )
        heading.append(headings[k])
    # Corners and centre of each candidate, rotated by the box heading: numpy's complex product.
    points = (np.array(centres)[:, None] + np.array(local) * np.array(heading)[:, None]).ravel()
    delta = points[:, None] - path[None, :]
    nearest = np.argmin(delta.real**2 + delta.imag**2, axis=1)  # squared: no square roots
    direction = path_direction[nearest]
    in_route_frame = (points - path[nearest]) * direction.conj()  # along + i lateral (lateral > 0: right)
    along_m = (path_s[nearest] + in_route_frame.real).tolist()
    lateral_m = in_route_frame.imag.tolist()

    velocity = np.asarray(boxes.velocity_xy, dtype=np.float64).reshape(-1, 2)
    horizon_m, half_width_m = scene.horizon_m, scene.half_width_m
    hazards = []
    for n, k in enumerate(candidates):
        box_along, box_lateral = along_m[5 * n : 5 * n + 4], lateral_m[5 * n : 5 * n + 4]
        gap_m = min(box_along) - s_front
        if (
            min(box_lateral) <= half_width_m
            and max(box_lateral) >= -half_width_m
            and max(box_along) >= s_front
            and gap_m <= horizon_m
        ):
            centre_direction = complex(direction[5 * n + 4])
            velocity_x, velocity_y = velocity[k].tolist()
            speed_along = velocity_x * centre_direction.real + velocity_y * centre_direction.imag
            hazards.append(
                ActorHazard(index=k, actor_id=boxes.ids[k], distance_m=gap_m, speed_along_route_mps=speed_along)
            )
    hazards.sort(key=lambda hazard: hazard.distance_m)
    return hazards


def _heading(yaw_deg: float) -> complex:
    """``np.exp(1j * np.deg2rad(yaw_deg))`` as numpy computes it (``cexp`` of a purely
    imaginary number is ``cos + i sin`` from the same libm; ``deg2rad`` is ``math.radians``)."""
    angle = math.radians(yaw_deg)
    return complex(math.cos(angle), math.sin(angle))


def _are_tame(numbers: tuple[float, ...]) -> bool:
    """All finite and far from overflow (``False`` for a NaN or an infinity; the sum of the
    magnitudes bounds each, and a loop in C beats a generator)."""
    return sum(map(abs, numbers)) < FAST_PATH_LIMIT


@dataclass(frozen=True)
class StraightFrame:
    """A line that a stretch of route provably hugs, for bounds that need no nearest waypoint.

    For every waypoint ``k`` of the stretch, with ``o`` the line's origin and ``u`` its unit
    direction: ``|Im((w_k - o) conj(u))| <= offset_m``,
    ``|(s_k - s_o) - Re((w_k - o) conj(u))| <= slip_m`` and ``|d_k - u| <= turn``. Whichever
    waypoint is a point's nearest, its route-frame lateral then lies within
    ``offset_m + V * turn`` and its along within ``slip_m + V * turn`` of the point's
    coordinates in this frame (``V``: the point's distance to that waypoint).

    Attributes:
        origin_x, origin_y, origin_s: ``o`` and its arc length.
        direction_x, direction_y: ``u``.
        offset_m, slip_m, turn: the bounds above (rounded up).
        first, last: the waypoints covered, ``first:last``.
    """

    origin_x: float
    origin_y: float
    origin_s: float
    direction_x: float
    direction_y: float
    offset_m: float
    slip_m: float
    turn: float
    first: int
    last: int


_FRAME_STRIDE = 4
"""Frames start every this many waypoints..."""

_FRAME_SPAN = 40
"""... and cover this many (short, so few of them contain a bend)."""

_BOUND_SLACK_M = 1e-6
"""Added to every bound: covers the rounding of the Python-float estimates (~1e-12 m)."""


def _straight_frame(geometry: RouteGeometry, start: int, end: int) -> StraightFrame | None:
    """A frame covering waypoints ``start:end``, if one of the precomputed frames does."""
    frames = geometry.frames
    if frames is None:
        frames = build_frames(geometry)
        object.__setattr__(geometry, "frames", frames)
    index = start // _FRAME_STRIDE
    if index >= len(frames):
        return None
    frame = frames[index]
    return frame if frame.first <= start and end <= frame.last else None


def build_frames(geometry: RouteGeometry) -> list[StraightFrame]:
    """One frame per :data:`_FRAME_STRIDE` waypoints, over the next :data:`_FRAME_SPAN`."""
    frames = []
    count = len(geometry.xy)
    for first in range(0, count, _FRAME_STRIDE):
        last = min(first + _FRAME_SPAN, count)
        origin, direction = complex(geometry.xy[first]), complex(geometry.direction[first])
        local = (geometry.xy[first:last] - origin) * direction.conjugate()
        slip = (geometry.arclength_m[first:last] - geometry.arclength_m[first]) - local.real
        turn = np.abs(geometry.direction[first:last] - direction)
        bounds = [float(np.max(np.abs(local.imag))), float(np.max(np.abs(slip))), float(np.max(turn))]
        # Rounded up generously: the bounds are estimates in floats of exact quantities.
        offset_m, slip_m, turn_bound = (value * (1.0 + 1e-6) + 1e-9 for value in bounds)
        frames.append(
            StraightFrame(
                origin.real,
                origin.imag,
                float(geometry.arclength_m[first]),
                direction.real,
                direction.imag,
                offset_m,
                slip_m,
                turn_bound,
                first,
                last,
            )
        )
    return frames


def _misses_corridor(
    scene: _CorridorScene,
    k: int,
    heading: complex,
    frame: StraightFrame,
    geometry: RouteGeometry,
    start: int,
    end: int,
    s_front: float,
) -> bool:
    """Whether box ``k`` provably fails the reference's hazard test (``False``: undecided).

    Its corners are placed in ``frame`` (Python floats, within ~1e-12 m of numpy's corners);
    the frame's bounds then hold for whichever waypoint numpy finds nearest, so a box whose
    corners all lie, bounds included, on one side of the corridor, behind the bumper or past
    the horizon cannot be a hazard.
    """
    (x, y), (half_length, half_width) = scene.xy[k], scene.half_extent[k]
    ux, uy = frame.direction_x, frame.direction_y
    # Centre in the frame, and a bound on any corner's distance to its nearest waypoint: the
    # distance to some waypoint of the stretch (the one level with the centre) plus the radius.
    cx, cy = x - frame.origin_x, y - frame.origin_y
    centre_along = cx * ux + cy * uy
    arclength = geometry.arclength_list
    j = min(max(bisect.bisect_left(arclength, frame.origin_s + centre_along, start, end), start), end - 1)
    nearby = geometry.xy_list[j]
    reach_m = abs(complex(x, y) - nearby) + math.hypot(half_length, half_width) + _BOUND_SLACK_M
    lateral_error = frame.offset_m + reach_m * frame.turn + _BOUND_SLACK_M
    along_error = frame.slip_m + reach_m * frame.turn + _BOUND_SLACK_M
    hx, hy = heading.real, heading.imag
    lateral, along = [], []
    for a, b in (
        (half_length, half_width),
        (half_length, -half_width),
        (-half_length, -half_width),
        (-half_length, half_width),
    ):
        px, py = cx + a * hx - b * hy, cy + a * hy + b * hx
        along.append(frame.origin_s + px * ux + py * uy)
        lateral.append(py * ux - px * uy)
    half_width_m = scene.half_width_m
    return (
        min(lateral) - lateral_error > half_width_m
        or max(lateral) + lateral_error < -half_width_m
        or max(along) + along_error < s_front
        or min(along) - along_error - s_front > scene.horizon_m
    )


def _is_plain_number(value: object) -> bool:
    """A Python (or float64) number: arithmetic on it rounds like on Python floats."""
    return isinstance(value, (float, int)) and not isinstance(value, bool)


def _real_plus_i_times(real: float, imag: float) -> complex:
    """``real + 1j * imag`` exactly as numpy evaluates it on float arrays, signed zeros included
    (``1j * imag`` is the complex product ``(0 + 1j)(imag + 0j)``; both of its products with
    zero are exact, so Python reproduces it whatever numpy's product kernel)."""
    return complex(real + (0.0 * imag + -0.0), 0.0 + (0.0 + imag))


def _candidate_window_end(
    geometry: RouteGeometry, scene: _CorridorScene, candidates: list[int], reach_end_m: float
) -> int:
    """``window_end`` of the reference for the candidates' largest circumradius.

    ``math.hypot`` may differ from ``np.hypot`` in the last bit; the window end only changes if a
    waypoint's arc length falls between the two results, so numpy is asked only then.
    """
    radius_m = max(math.hypot(*scene.half_extent[k]) for k in candidates)
    arclength, count = geometry.arclength_list, len(geometry.arclength_list)
    # bisect_left is searchsorted (side "left") on the sorted, finite arc lengths.
    low = min(bisect.bisect_left(arclength, reach_end_m + radius_m * (1.0 - REACH_SLACK) + 1.0) + 1, count)
    high = min(bisect.bisect_left(arclength, reach_end_m + radius_m * (1.0 + REACH_SLACK) + 1.0) + 1, count)
    if low == high:
        return low
    half_extent = np.array([scene.half_extent[k] for k in candidates])
    radii = np.hypot(half_extent[:, 0], half_extent[:, 1])
    return window_end(geometry.arclength_m, reach_end_m + float(radii.max()) + 1.0)


def actors_in_corridor_reference(
    snapshot: WorldSnapshot,
    boxes: ActorBoxes,
    route_index: int,
    horizon_m: float,
    half_width_m: float,
) -> list[ActorHazard]:
    """The general vectorised form of :func:`actors_in_corridor` (same results; the fast path
    defers to it for unusual inputs and the tests check the two agree)."""
    route = snapshot.route
    if len(boxes) == 0 or len(route.xy) < 2:
        return []
    ego_half_length = float(snapshot.ego.half_extent[0])
    half_extent = np.asarray(boxes.half_extent, dtype=np.float64).reshape(-1, 2)
    radii = np.hypot(half_extent[:, 0], half_extent[:, 1])
    box_xy = np.asarray(boxes.xy, dtype=np.float64).reshape(-1, 2)
    centres = box_xy[:, 0] + 1j * box_xy[:, 1]
    ego = complex(float(snapshot.ego.xy[0]), float(snapshot.ego.xy[1]))
    reach = horizon_m + ego_half_length + half_width_m + radii
    candidates = np.flatnonzero(np.abs(centres - ego) <= reach)
    if len(candidates) == 0:  # the common case: cull before any route geometry
        return []
    geometry = route_geometry(route)
    arclength = geometry.arclength_m
    s_ego = ego_arclength(snapshot, route_index, geometry)
    s_front = s_ego + ego_half_length
    start = min(max(int(route_index) - 2, 0), len(route.xy) - 1)
    end = window_end(arclength, s_front + horizon_m + float(radii[candidates].max()) + 1.0)
    path, path_s, path_direction = geometry.xy[start:end], arclength[start:end], geometry.direction[start:end]

    # Corners and centre of each candidate: (n, 5) complex, rotated by the box heading.
    heading = np.exp(1j * np.deg2rad(np.asarray(boxes.yaw_deg, dtype=np.float64)[candidates]))
    local = half_extent[candidates, :1] * _CORNER_SIGNS.real + 1j * (half_extent[candidates, 1:] * _CORNER_SIGNS.imag)
    points = (centres[candidates, None] + local * heading[:, None]).ravel()
    delta = points[:, None] - path[None, :]
    nearest = np.argmin(delta.real**2 + delta.imag**2, axis=1)  # squared: no square roots
    direction = path_direction[nearest]
    in_route_frame = (points - path[nearest]) * direction.conj()  # along + i lateral (lateral > 0: right)
    along_m = (path_s[nearest] + in_route_frame.real).reshape(-1, 5)
    lateral_m = in_route_frame.imag.reshape(-1, 5)

    box_along, box_lateral = along_m[:, :4], lateral_m[:, :4]
    gap_m = box_along.min(axis=1) - s_front
    is_hazard = (
        (box_lateral.min(axis=1) <= half_width_m)
        & (box_lateral.max(axis=1) >= -half_width_m)
        & (box_along.max(axis=1) >= s_front)
        & (gap_m <= horizon_m)
    )
    if not is_hazard.any():
        return []
    centre_direction = direction.reshape(-1, 5)[:, 4]
    velocity = np.asarray(boxes.velocity_xy, dtype=np.float64).reshape(-1, 2)[candidates]
    speed_along = (velocity[:, 0] * centre_direction.real) + (velocity[:, 1] * centre_direction.imag)
    hazards = [
        ActorHazard(
            index=int(candidates[k]),
            actor_id=boxes.ids[candidates[k]],
            distance_m=float(gap_m[k]),
            speed_along_route_mps=float(speed_along[k]),
        )
        for k in np.flatnonzero(is_hazard)
    ]
    hazards.sort(key=lambda hazard: hazard.distance_m)
    return hazards
