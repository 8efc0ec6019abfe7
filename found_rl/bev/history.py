"""Past snapshots' dynamic objects, kept in the world frame and redrawn in the current ego frame.

Roach draws its history frames (−1.5, −1.0, −0.5 s and now) in the *current* ego frame, so the
policy sees how actors moved relative to where the ego is now. Each snapshot is reduced once,
when it arrives, by one compiled kernel to a world-frame corner array (vehicles then walkers) and
the boxes to refill where they overlap, and to its stop-line layout (shared by every snapshot with
the same lines and light states). Everything that does not depend on the ego pose of the render is
computed here, once; a render then maps every frame's corners to pixels with one more kernel.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from found_rl.bev.config import BevConfig
from found_rl.boxes import box_corner
from found_rl.jit import kernel
from found_rl.world import LightState, WorldSnapshot

_OVERLAP_MARGIN_M = 0.3
"""Slack on the overlap test so boxes that only touch after pixel rounding count as overlapping."""

_NO_INDICES = np.zeros(0, np.intp)
_NO_LINES = np.zeros(0, np.complex128)
_NO_CULL = np.zeros(0, np.float64)
_NO_SIGN_LINES = np.zeros((0, 2, 2), np.float64)
for _array in (_NO_INDICES, _NO_LINES, _NO_CULL, _NO_SIGN_LINES):
    _array.flags.writeable = False


class HistoryFrame(NamedTuple):
    """The dynamic objects of one snapshot, world frame (a named tuple: one is made per step, and
    building a frozen dataclass costs several times more).

    Attributes:
        time_s: snapshot time.
        corners: ``(V + W, 4, 2)`` float64 box corners in drawing order (vehicles first, then
            walkers), half-extents scaled and floored as Roach's ``scale_bbox``.
        num_vehicles, num_walkers: box counts ``V`` and ``W``.
        refill: ``(V + W,)`` bool, the boxes to fill again one by one after the single fill of
            all boxes of their kind. OpenCV fills a multi-polygon call by the even-odd rule,
            which leaves the overlap of two boxes empty; refilling one box of each overlapping
            pair closes it.
        lines: the stop lines (shared by every frame with the same lines and light states).
        stop_sign_lines: ``(S, 2, 2)`` stop-sign segments (the RGB colours them apart from red lights).
    """

    time_s: float
    corners: np.ndarray
    num_vehicles: int
    num_walkers: int
    refill: np.ndarray
    lines: StopLineLayout
    stop_sign_lines: np.ndarray


def make_history_frame(snapshot: WorldSnapshot, config: BevConfig) -> HistoryFrame:
    """Reduce a snapshot to what later renders draw (pure)."""
    vehicles, walkers = snapshot.vehicles, snapshot.walkers
    num_vehicles, num_walkers = len(vehicles), len(walkers)
    signs = snapshot.stop_signs.segments
    stop_sign_lines = _NO_SIGN_LINES if not len(signs) else np.asarray(signs, dtype=np.float64).reshape(-1, 2, 2)
    corners, refill = frame_boxes(
        _float64_array(vehicles.xy, (num_vehicles, 2)),
        _float64_array(vehicles.yaw_deg, (num_vehicles,)),
        _float64_array(vehicles.half_extent, (num_vehicles, 2)),
        _float64_array(walkers.xy, (num_walkers, 2)),
        _float64_array(walkers.yaw_deg, (num_walkers,)),
        _float64_array(walkers.half_extent, (num_walkers, 2)),
        float(config.vehicle_box_scale),
        float(config.walker_box_scale),
        float(config.min_half_extent_m),
        _OVERLAP_MARGIN_M,
    )
    return HistoryFrame(
        float(snapshot.time_s),
        corners,
        num_vehicles,
        num_walkers,
        refill,
        _stop_line_layout(snapshot, config),
        stop_sign_lines,
    )


def _float64_array(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as the C-contiguous float64 array of ``shape`` a kernel takes (no copy if it is one)."""
    return np.ascontiguousarray(values, dtype=np.float64).reshape(shape)


@kernel(
    "Tuple((float64[:, :, ::1], boolean[::1]))(float64[:, ::1], float64[::1], float64[:, ::1], float64[:, ::1],"
    " float64[::1], float64[:, ::1], float64, float64, float64, float64)"
)
def frame_boxes(
    vehicle_xy: np.ndarray,
    vehicle_yaw_deg: np.ndarray,
    vehicle_half_extent: np.ndarray,
    walker_xy: np.ndarray,
    walker_yaw_deg: np.ndarray,
    walker_half_extent: np.ndarray,
    vehicle_scale: float,
    walker_scale: float,
    min_half_extent_m: float,
    overlap_margin_m: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Corners ``(V + W, 4, 2)`` of the vehicles then walkers, and which boxes to refill.

    Half-extents are scaled per kind and floored at ``min_half_extent_m`` (Roach's
    ``scale_bbox``: tiny walkers stay visible). Of each pair of boxes that overlap once grown
    by ``overlap_margin_m`` (so boxes that only touch after pixel rounding count), the lower
    index is refilled; bounding circles reject most pairs before the separating-axis test.
    """
    num_vehicles, count = len(vehicle_xy), len(vehicle_xy) + len(walker_xy)
    corners = np.empty((count, 4, 2))
    box = np.empty((count, 7))  # x, y, cos, sin, half-length, half-width, radius
    for k in range(count):
        if k < num_vehicles:
            x, y, yaw_deg = vehicle_xy[k, 0], vehicle_xy[k, 1], vehicle_yaw_deg[k]
            half_length = max(vehicle_half_extent[k, 0] * vehicle_scale, min_half_extent_m)
            half_width = max(vehicle_half_extent[k, 1] * vehicle_scale, min_half_extent_m)
        else:
            w = k - num_vehicles
            x, y, yaw_deg = walker_xy[w, 0], walker_xy[w, 1], walker_yaw_deg[w]
            half_length = max(walker_half_extent[w, 0] * walker_scale, min_half_extent_m)
            half_width = max(walker_half_extent[w, 1] * walker_scale, min_half_extent_m)
        yaw = math.radians(yaw_deg)
        cos, sin = math.cos(yaw), math.sin(yaw)
        for c in range(4):
            corners[k, c, 0], corners[k, c, 1] = box_corner(x, y, cos, sin, half_length, half_width, c)
        box[k, 0], box[k, 1], box[k, 2], box[k, 3] = x, y, cos, sin
        box[k, 4], box[k, 5], box[k, 6] = half_length, half_width, math.hypot(half_length, half_width)
    refill = np.zeros(count, np.bool_)
    grow = 0.5 * overlap_margin_m
    for i in range(count - 1):
        x1, y1, cos1, sin1 = box[i, 0], box[i, 1], box[i, 2], box[i, 3]
        a1, b1 = box[i, 4] + grow, box[i, 5] + grow
        for j in range(i + 1, count):
            dx, dy = box[j, 0] - x1, box[j, 1] - y1
            limit = box[i, 6] + box[j, 6] + 2.0 * overlap_margin_m
            if not dx * dx + dy * dy < limit * limit:  # bounding circles apart (NaN: apart)
                continue
            cos2, sin2 = box[j, 2], box[j, 3]
            a2, b2 = box[j, 4] + grow, box[j, 5] + grow
            cos, sin = abs(cos1 * cos2 + sin1 * sin2), abs(sin2 * cos1 - sin1 * cos2)  # of the angle between
            # The offset on each box's (along, across) axes against the two boxes' projections.
            if (
                abs(dx * cos1 + dy * sin1) > a1 + cos * a2 + sin * b2
                or abs(dy * cos1 - dx * sin1) > b1 + cos * b2 + sin * a2
                or abs(dx * cos2 + dy * sin2) > a2 + cos * a1 + sin * b1
                or abs(dy * cos2 - dx * sin2) > b2 + cos * b1 + sin * a1
            ):
                continue
            refill[i] = True
            break  # i is in; its other pairs add nothing
    return corners, refill


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
        cull_distance_m=0.5 * np.abs(ends[:, 1] - ends[:, 0]) + _line_reach_m(config),
    )
    for array in (layout.points_xy, layout.segments_xy, layout.group_edges, layout.centres, layout.cull_distance_m):
        array.flags.writeable = False  # shared by every frame with the same lines
    if len(_layout_cache) >= _LAYOUT_CACHE_SIZE:
        _layout_cache.clear()
    _layout_cache[key] = (config, layout)
    return layout


def _line_reach_m(config: BevConfig) -> float:
    """The view radius plus a drawn stop line's half thickness (caps included) and a pixel of slack."""
    return config.view_radius_m + (0.5 * config.stop_line_width_px + 2.0) / config.pixels_per_m


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
            # One frame per step: the frame that many steps back is the one.
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
