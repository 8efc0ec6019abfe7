"""Past snapshots' dynamic objects, kept in the world frame and redrawn in the current ego frame.

Roach draws its history frames (−1.5, −1.0, −0.5 s and now) in the *current* ego frame, so the
policy sees how actors moved relative to where the ego is now. Each snapshot is reduced once,
when it arrives, to a world-frame corner array (vehicles then walkers), plain-Python discs for a
cheap visibility test, and its stop-line layout (shared by every snapshot with the same lines and
light states), so a render transforms a frame with one call and draws each part with one OpenCV
call. With a handful of actors per snapshot, per-call overhead dominates: everything that does
not depend on the ego pose of the render is computed here, once.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from found_rl.bev.config import BevConfig
from found_rl.bev.transform import box_corners
from found_rl.sim.snapshot import LightState, WorldSnapshot

_OVERLAP_MARGIN_M = 0.3
"""Slack on the overlap test so boxes that only touch after pixel rounding count as overlapping."""

_VISIBILITY_SLACK_PX = 2.0
"""Slack on the renderer's box visibility test: a box whose disc is farther than the view radius
plus this cannot paint a pixel (OpenCV rasterises within a pixel of the polygon), so skipping it
leaves the image unchanged."""

_FAST_OVERLAP_MAX_BOXES = 16
"""Up to this many boxes the bounding-circle pre-test of :func:`_overlapping` runs in plain Python."""

_FAST_FRAME_MAX_BOXES = 12
"""Frames with up to this many boxes are built in plain Python (:func:`_small_history_frame`):
with a handful of actors, each numpy call costs more than the arithmetic it replaces."""

_NEAR_TOLERANCE = 1e-9
"""Relative slack of the plain-Python bounding-circle pre-test; rounding is ~1e-16, so a pair it
calls apart is apart for the exact (numpy) test too."""

_NO_INDICES = np.zeros(0, np.intp)
_NO_LINES = np.zeros(0, np.complex128)
_NO_CULL = np.zeros(0, np.float64)
_NO_POINTS = np.zeros((0, 1, 2), np.float64)
_NO_SIGN_LINES = np.zeros((0, 2, 2), np.float64)
for _array in (_NO_INDICES, _NO_LINES, _NO_CULL, _NO_POINTS, _NO_SIGN_LINES):
    _array.flags.writeable = False


Disc = tuple[float, float, float]
"""``(x, y, reach_m ** 2)``: a box may touch the view only if the ego is within ``reach_m`` of ``(x, y)``."""


class HistoryFrame(NamedTuple):
    """The dynamic objects of one snapshot, world frame (a named tuple: one is made per step, and
    building a frozen dataclass costs several times more).

    Attributes:
        time_s: snapshot time.
        points_xy: ``(4 (V + W), 1, 2)`` float64 box corners, as ``cv2.transform`` takes them:
            the corners of box ``k`` at ``4k ... 4k + 3`` (vehicles first, then walkers).
        num_vehicles, num_walkers: box counts ``V`` and ``W``.
        centres: ``(V + W,)`` complex box centres ``x + iy`` (for culling box by box); ``None``
            for frames of at most ``_FAST_FRAME_MAX_BOXES`` boxes (culled by their discs).
        cull_distance_m: ``(V + W,)`` centre distance from the ego beyond which a box cannot
            touch the view (view radius plus the box's half-diagonal); ``None`` with ``centres``.
        vehicle_discs, walker_discs: per box, a :data:`Disc` with reach ``cull_distance_m`` plus
            a couple of pixels of slack: a plain-Python test that tells the renderer when no box
            of a kind can touch the view, so it skips drawing (and pooling) that channel.
        refill_vehicles, refill_walkers: indices (into all boxes) of the vehicles and walkers to
            fill again one by one after the single fill of all boxes of their kind. OpenCV fills
            a multi-polygon call by the even-odd rule, which leaves the overlap of two boxes
            empty; refilling one box of each overlapping pair closes it.
        lines: the stop lines (shared by every frame with the same lines and light states).
        stop_sign_lines: ``(S, 2, 2)`` stop-sign segments (the RGB colours them apart from red lights).
    """

    time_s: float
    points_xy: np.ndarray
    num_vehicles: int
    num_walkers: int
    centres: np.ndarray | None
    cull_distance_m: np.ndarray | None
    vehicle_discs: tuple[Disc, ...]
    walker_discs: tuple[Disc, ...]
    refill_vehicles: np.ndarray
    refill_walkers: np.ndarray
    lines: StopLineLayout
    stop_sign_lines: np.ndarray


def make_history_frame(snapshot: WorldSnapshot, config: BevConfig) -> HistoryFrame:
    """Reduce a snapshot to what later renders draw (pure)."""
    vehicles, walkers = snapshot.vehicles, snapshot.walkers
    num_vehicles, num_walkers = len(vehicles), len(walkers)
    lines = _stop_line_layout(snapshot, config)
    signs = snapshot.stop_signs.segments
    stop_sign_lines = _NO_SIGN_LINES if not len(signs) else np.asarray(signs, dtype=np.float64).reshape(-1, 2, 2)
    if num_vehicles + num_walkers == 0:
        return HistoryFrame(
            float(snapshot.time_s), _NO_POINTS, 0, 0, _NO_LINES, _NO_CULL, (), (), _NO_INDICES, _NO_INDICES,
            lines, stop_sign_lines,
        )  # fmt: skip
    if num_vehicles + num_walkers <= _FAST_FRAME_MAX_BOXES:
        return _small_history_frame(snapshot, num_vehicles, num_walkers, config, lines, stop_sign_lines)
    # Vehicles and walkers are processed as one array: a few large numpy operations are much
    # cheaper than many small ones at these sizes.
    if num_walkers == 0:
        centres, yaw_deg = np.asarray(vehicles.xy, np.float64).reshape(-1, 2), np.asarray(vehicles.yaw_deg, np.float64)
        half_extent = np.asarray(vehicles.half_extent, np.float64).reshape(-1, 2) * config.vehicle_box_scale
    elif num_vehicles == 0:
        centres, yaw_deg = np.asarray(walkers.xy, np.float64).reshape(-1, 2), np.asarray(walkers.yaw_deg, np.float64)
        half_extent = np.asarray(walkers.half_extent, np.float64).reshape(-1, 2) * config.walker_box_scale
    else:
        centres = np.concatenate([vehicles.xy, walkers.xy]).astype(np.float64, copy=False)
        yaw_deg = np.concatenate([vehicles.yaw_deg, walkers.yaw_deg]).astype(np.float64, copy=False)
        half_extent = np.concatenate(
            [vehicles.half_extent * config.vehicle_box_scale, walkers.half_extent * config.walker_box_scale]
        )
    # Roach's ``scale_bbox``: inflate, then floor the half-extents so tiny walkers stay visible.
    half_extent = np.maximum(half_extent, config.min_half_extent_m)
    centres = np.ascontiguousarray(centres)
    corners = box_corners(centres, yaw_deg, half_extent)
    radii = np.hypot(half_extent[:, 0], half_extent[:, 1])
    derived = _derived(config)
    centre_list, radius_list = centres.tolist(), radii.tolist()
    if _apart_for_sure(centre_list, radius_list):
        refill = _NO_INDICES
    else:
        refill = _overlapping(centres, yaw_deg, half_extent, radii)
    num_refill_vehicles = int(np.searchsorted(refill, num_vehicles)) if len(refill) else 0
    reach_m = derived.view_radius_m + derived.box_slack_m
    discs = tuple((x, y, (radius + reach_m) ** 2) for (x, y), radius in zip(centre_list, radius_list))
    return HistoryFrame(
        time_s=float(snapshot.time_s),
        points_xy=corners.reshape(-1, 1, 2),
        num_vehicles=num_vehicles,
        num_walkers=num_walkers,
        centres=centres.view(np.complex128).ravel(),
        cull_distance_m=radii + derived.view_radius_m,
        vehicle_discs=discs[:num_vehicles],
        walker_discs=discs[num_vehicles:],
        refill_vehicles=refill[:num_refill_vehicles],
        refill_walkers=refill[num_refill_vehicles:],
        lines=lines,
        stop_sign_lines=stop_sign_lines,
    )


def any_disc_reaches(discs: tuple[Disc, ...], x: float, y: float) -> bool:
    """Whether ``(x, y)`` lies within any disc (non-finite discs count as reaching)."""
    for disc_x, disc_y, reach_sq in discs:
        dx, dy = disc_x - x, disc_y - y
        if not dx * dx + dy * dy > reach_sq:
            return True
    return False


def _small_history_frame(
    snapshot: WorldSnapshot,
    num_vehicles: int,
    num_walkers: int,
    config: BevConfig,
    lines: StopLineLayout,
    stop_sign_lines: np.ndarray,
) -> HistoryFrame:
    """:func:`make_history_frame` for a few boxes, in plain-Python floats (same drawing order).

    Corners may differ from :func:`box_corners` in the last bit (no fused multiply-add), which
    cannot move a pixel unless a corner lies within an ulp of a 1/16-pixel boundary. ``centres``
    and ``cull_distance_m`` are ``None``: the renderer culls such frames with the discs.
    """
    min_half = config.min_half_extent_m
    derived = _derived(config)
    reach_m = derived.view_radius_m + derived.box_slack_m
    corners: list[float] = []
    boxes: list[tuple[float, ...]] = []  # x, y, cos, sin, half-length, half-width, radius
    discs: list[Disc] = []
    for actors, count, scale in (
        (snapshot.vehicles, num_vehicles, config.vehicle_box_scale),
        (snapshot.walkers, num_walkers, config.walker_box_scale),
    ):
        if not count:
            continue
        for (x, y), yaw_deg, (half_length, half_width) in zip(
            actors.xy.tolist(), actors.yaw_deg.tolist(), actors.half_extent.tolist()
        ):
            # Roach's ``scale_bbox`` (NaN stays NaN, as with np.maximum).
            half_length *= scale
            half_width *= scale
            if half_length < min_half:
                half_length = min_half
            if half_width < min_half:
                half_width = min_half
            yaw = math.radians(yaw_deg)
            cos, sin = math.cos(yaw), math.sin(yaw)
            p, q, r, t = half_length * cos, half_width * sin, half_length * sin, half_width * cos
            # (along + i across) * (cos + i sin) for the corners (+-, ++, -+, --) in drawing order.
            corners += (x + (p + q), y + (r - t), x + (p - q), y + (r + t),
                        x + (-p - q), y + (t - r), x + (q - p), y + (-r - t))  # fmt: skip
            radius = math.hypot(half_length, half_width)
            boxes.append((x, y, cos, sin, half_length, half_width, radius))
            discs.append((x, y, (radius + reach_m) ** 2))
    refill = _overlapping_small(boxes)
    num_refill_vehicles = sum(1 for index in refill if index < num_vehicles)
    return HistoryFrame(
        float(snapshot.time_s),
        np.array(corners).reshape(-1, 1, 2),
        num_vehicles,
        num_walkers,
        None,
        None,
        tuple(discs[:num_vehicles]),
        tuple(discs[num_vehicles:]),
        np.array(refill[:num_refill_vehicles], np.intp) if num_refill_vehicles else _NO_INDICES,
        np.array(refill[num_refill_vehicles:], np.intp) if len(refill) > num_refill_vehicles else _NO_INDICES,
        lines,
        stop_sign_lines,
    )


def _overlapping_small(boxes: list[tuple[float, ...]]) -> list[int]:
    """:func:`_overlapping` in plain Python: ascending lower indices of overlapping pairs.

    ``boxes`` holds ``(x, y, cos, sin, half_length, half_width, radius)``. Same tests in the
    same order; results may differ only for boxes within an ulp of the (margin-grown) threshold.
    """
    found: list[int] = []
    count = len(boxes)
    margin, grow = _OVERLAP_MARGIN_M, 0.5 * _OVERLAP_MARGIN_M
    for i in range(count - 1):
        x1, y1, cos1, sin1, length1, width1, radius1 = boxes[i]
        reach1 = radius1 + 2.0 * margin
        for j in range(i + 1, count):
            box = boxes[j]
            dx, dy, limit = box[0] - x1, box[1] - y1, reach1 + box[6]
            if not dx * dx + dy * dy < limit * limit:  # bounding circles apart (NaN: apart, as numpy)
                continue
            _, _, cos2, sin2, length2, width2, _ = box
            a1, b1, a2, b2 = length1 + grow, width1 + grow, length2 + grow, width2 + grow
            # |cos| and |sin| of the angle between the headings.
            cos, sin = abs(cos1 * cos2 + sin1 * sin2), abs(sin2 * cos1 - sin1 * cos2)
            # The offset on each box's (along, across) axes against the other box's projection.
            if (
                abs(dx * cos1 + dy * sin1) > a1 + cos * a2 + sin * b2
                or abs(dy * cos1 - dx * sin1) > b1 + cos * b2 + sin * a2
                or abs(dx * cos2 + dy * sin2) > a2 + cos * a1 + sin * b1
                or abs(dy * cos2 - dx * sin2) > b2 + cos * b1 + sin * a1
            ):
                continue
            found.append(i)
            break  # i is in; its other pairs add nothing
    return found


@dataclass(frozen=True)
class StopLineLayout:
    """Stop-line endpoints of one snapshot in drawing order (see :func:`_stop_lines`).

    Attributes:
        points_xy: ``(2L, 2)`` float64 segment endpoints, sorted by channel value.
        segments_xy: ``(L, 2, 2)`` view of ``points_xy``.
        groups: ``(value, start, stop)`` point ranges, counted from the first line point.
        group_edges: ``(2G,)`` intp segment ranges of ``groups``: ``start_0, stop_0, start_1, ...``.
        centres: ``(L,)`` complex segment midpoints.
        cull_distance_m: ``(L,)`` midpoint distance from the ego beyond which a segment, drawn
            with its thickness, cannot touch the view.
    """

    points_xy: np.ndarray
    segments_xy: np.ndarray
    groups: tuple[tuple[int, int, int], ...]
    group_edges: np.ndarray
    centres: np.ndarray | None
    cull_distance_m: np.ndarray | None


_NO_LAYOUT = StopLineLayout(np.zeros((0, 2)), np.zeros((0, 2, 2)), (), _NO_INDICES, _NO_LINES, _NO_CULL)
_LAYOUT_CACHE_SIZE = 16
_layout_cache: dict[tuple, tuple[BevConfig, StopLineLayout]] = {}


def _stop_line_layout(snapshot: WorldSnapshot, config: BevConfig) -> StopLineLayout:
    """The stop-line layout, memoised on the lines' geometry and states.

    Lights change state every few seconds and never move, so nearly every step repeats the
    previous step's layout; the key holds the arrays' bytes, so any change is seen.
    """
    lights, signs = snapshot.traffic_lights, snapshot.stop_signs
    if not len(lights) and not len(signs):
        return _NO_LAYOUT
    light_segments, states, sign_segments = (
        np.asarray(lights.segments),
        np.asarray(lights.states),
        np.asarray(signs.segments),
    )
    key = (
        id(config),  # the entry holds the config, so no other config can take over this id
        light_segments.dtype.str,
        light_segments.tobytes(),
        states.dtype.str,
        states.tobytes(),
        sign_segments.dtype.str,
        sign_segments.tobytes(),
    )
    cached = _layout_cache.get(key)
    if cached is not None and cached[0] is config:
        return cached[1]
    parts, groups = _stop_lines(snapshot, config, first_point=0)
    points = np.concatenate(parts)
    # Most of a town's stop lines are far from the ego; drawing them (thick, round-capped)
    # costs OpenCV work even off view, so renders skip those provably outside it.
    ends = np.ascontiguousarray(points).view(np.complex128).reshape(-1, 2)
    layout = StopLineLayout(
        points_xy=points,
        segments_xy=points.reshape(-1, 2, 2),
        groups=tuple(groups),
        group_edges=np.array([point // 2 for _, start, stop in groups for point in (start, stop)], np.intp),
        centres=0.5 * (ends[:, 0] + ends[:, 1]),
        cull_distance_m=0.5 * np.abs(ends[:, 1] - ends[:, 0]) + _derived(config).line_reach_m,
    )
    for array in (layout.points_xy, layout.segments_xy, layout.group_edges, layout.centres, layout.cull_distance_m):
        array.flags.writeable = False  # shared by every frame with the same lines
    if len(_layout_cache) >= _LAYOUT_CACHE_SIZE:
        _layout_cache.clear()
    _layout_cache[key] = (config, layout)
    return layout


class _Derived(NamedTuple):
    """Constants derived from a :class:`BevConfig` that every frame needs.

    Attributes:
        view_radius_m: ``config.view_radius_m``.
        line_reach_m: the view radius plus a drawn stop line's half thickness (caps included)
            and a pixel of slack.
        box_slack_m: :data:`_VISIBILITY_SLACK_PX` in metres.
    """

    config: BevConfig
    view_radius_m: float
    line_reach_m: float
    box_slack_m: float


_derived_cache: dict[int, _Derived] = {}


def _derived(config: BevConfig) -> _Derived:
    """Memoised by identity: hashing a ``BevConfig`` costs more than computing these."""
    derived = _derived_cache.get(id(config))
    if derived is None or derived.config is not config:
        reach_m = config.view_radius_m + (0.5 * config.stop_line_width_px + 2.0) / config.pixels_per_m
        derived = _Derived(config, config.view_radius_m, reach_m, _VISIBILITY_SLACK_PX / config.pixels_per_m)
        if len(_derived_cache) >= 8:
            _derived_cache.clear()
        _derived_cache[id(config)] = derived
    return derived




class FrameHistory:
    """The recent :class:`HistoryFrame` s and the choice of which to draw for each age."""

    def __init__(self, config: BevConfig) -> None:
        self._ages_s = tuple(float(age) for age in config.history_s)
        self._step_s = config.step_s
        self._steps_back = tuple(round(age / config.step_s) for age in self._ages_s)
        self._frames: deque[HistoryFrame] = deque(maxlen=round(max(self._ages_s) / config.step_s) + 2)

    def clear(self) -> None:
        self._frames.clear()

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def latest_time_s(self) -> float | None:
        return self._frames[-1].time_s if self._frames else None

    def append(self, frame: HistoryFrame) -> None:
        """Add the newest frame; a frame at the same time replaces the last, an older one restarts."""
        if self._frames and frame.time_s <= self._frames[-1].time_s:
            if frame.time_s < self._frames[-1].time_s - 1e-9:
                self._frames.clear()
            else:
                self._frames.pop()
        self._frames.append(frame)

    def select(self) -> list[HistoryFrame]:
        """One frame per configured age (in ``history_s`` order): the newest frame at least that old.

        Early in an episode, ages older than the history fall back to the oldest frame kept,
        as Roach does.
        """
        frames = self._frames
        if not frames:
            raise RuntimeError("FrameHistory.select() called before any frame was appended")
        now_s = frames[-1].time_s
        last = len(frames) - 1
        tolerance_s = 0.5 * self._step_s
        chosen = []
        for age_s, steps_back in zip(self._ages_s, self._steps_back):
            target_s = now_s - age_s
            index = last - steps_back
            # Fast path: one frame per step, so the frame that many steps back is the one.
            if index >= 0 and abs(frames[index].time_s - target_s) < tolerance_s:
                chosen.append(frames[index])
                continue
            index = last
            while index > 0 and frames[index].time_s > target_s + tolerance_s:
                index -= 1
            chosen.append(frames[index])
        return chosen


def _stop_lines(
    snapshot: WorldSnapshot, config: BevConfig, first_point: int
) -> tuple[list[np.ndarray], list[tuple[int, int, int]]]:
    """Stop-line endpoints sorted by channel value, and the ``(value, start, stop)`` groups."""
    parts: list[np.ndarray] = []
    groups: list[tuple[int, int, int]] = []
    point = first_point
    lights = snapshot.traffic_lights
    if len(lights):
        values = _light_values(config)[np.asarray(lights.states, dtype=np.intp)]
        order = np.argsort(values, kind="stable")
        counts = np.bincount(values, minlength=256)
        for value in np.flatnonzero(counts).tolist():
            stop = point + 2 * int(counts[value])
            if value > 0:  # lights in an unknown state are not drawn
                groups.append((value, point, stop))
            point = stop
        parts.append(np.asarray(lights.segments, dtype=np.float64)[order].reshape(-1, 2))
    signs = snapshot.stop_signs
    if len(signs):
        parts.append(np.asarray(signs.segments, dtype=np.float64).reshape(-1, 2))
        groups.append((config.stop_sign_value, point, point + 2 * len(signs)))
    return parts, groups


@functools.lru_cache(maxsize=8)
def _light_values(config: BevConfig) -> np.ndarray:  # BevConfig is frozen, so hashable
    """Channel value of each :class:`LightState` code."""
    values = np.zeros(max(int(state) for state in LightState) + 1, np.intp)
    values[int(LightState.GREEN)] = config.green_value
    values[int(LightState.YELLOW)] = config.yellow_value
    values[int(LightState.RED)] = config.red_value
    return values


def _apart_for_sure(centres_xy: list[list[float]], radii_m: list[float]) -> bool:
    """Whether no two boxes' grown bounding circles come near each other (plain Python).

    The common case (a few actors, none touching) then skips :func:`_overlapping`'s dozen numpy
    calls. The test is looser than :func:`_overlapping`'s first stage by ``_NEAR_TOLERANCE``, so
    ``True`` implies that stage finds no candidate pair; many boxes go to numpy directly.
    """
    count = len(radii_m)
    if count < 2:
        return True
    if count > _FAST_OVERLAP_MAX_BOXES:
        return False
    scale = 1.0 + _NEAR_TOLERANCE
    for i in range(count - 1):
        x, y = centres_xy[i]
        reach = radii_m[i] + 2.0 * _OVERLAP_MARGIN_M
        for j in range(i + 1, count):
            other_x, other_y = centres_xy[j]
            dx, dy, limit = other_x - x, other_y - y, (reach + radii_m[j]) * scale
            if not dx * dx + dy * dy > limit * limit:  # NaN counts as near: numpy decides
                return False
    return True


def _overlapping(
    centres_xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray, radii_m: np.ndarray
) -> np.ndarray:
    """For each pair of overlapping boxes, the lower index (sorted, unique).

    Bounding circles pick candidate pairs; the separating-axis test on the four box axes
    decides. Boxes are grown by a small margin so boxes that only touch after rounding count.
    """
    if len(radii_m) < 2:
        return _NO_INDICES
    positions = centres_xy.view(np.complex128).ravel()
    reach = radii_m + _OVERLAP_MARGIN_M
    is_close = np.abs(positions[:, None] - positions) < reach[:, None] + reach
    first, second = np.nonzero(is_close)
    is_pair = first < second  # each unordered pair once, no box with itself
    first, second = first[is_pair], second[is_pair]
    if len(first) == 0:
        return _NO_INDICES
    to_local = np.exp(-1j * np.deg2rad(yaw_deg))  # multiplying by it turns world into (along, across)
    grown = half_extent + 0.5 * _OVERLAP_MARGIN_M  # (N, 2) half-length, half-width
    offset = positions[second] - positions[first]
    local1, local2 = to_local[first], to_local[second]
    # |cos| and |sin| of the angle between the boxes.
    cos_sin = np.abs((local1 / local2).view(np.float64).reshape(-1, 2))
    cos, sin = cos_sin[:, :1], cos_sin[:, 1:]
    extent1, extent2 = grown[first], grown[second]
    # Box 2 projected on box 1's axes (and vice versa): a|cos| + b|sin| and a|sin| + b|cos|.
    reach1 = extent1 + cos * extent2 + sin * extent2[:, ::-1]
    reach2 = extent2 + cos * extent1 + sin * extent1[:, ::-1]
    gap1 = np.abs((offset * local1).view(np.float64).reshape(-1, 2))
    gap2 = np.abs((offset * local2).view(np.float64).reshape(-1, 2))
    is_separated = np.any(gap1 > reach1, axis=1) | np.any(gap2 > reach2, axis=1)
    overlapping = first[~is_separated]
    return np.unique(overlapping) if len(overlapping) > 1 else overlapping
