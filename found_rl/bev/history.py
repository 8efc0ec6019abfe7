"""Past snapshots' dynamic objects, kept in the world frame and redrawn in the current ego frame.

Roach draws its history frames (−1.5, −1.0, −0.5 s and now) in the *current* ego frame, so the
policy sees how actors moved relative to where the ego is now. Each snapshot is reduced once,
when it arrives, to one world-frame point array (box corners of vehicles then walkers, then
stop-line endpoints) so a render transforms a frame with one call and draws each part with
one OpenCV call.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from found_rl.bev.config import BevConfig
from found_rl.bev.transform import box_corners
from found_rl.sim.snapshot import LightState, WorldSnapshot

_OVERLAP_MARGIN_M = 0.3
"""Slack on the overlap test so boxes that only touch after pixel rounding count as overlapping."""

_NO_INDICES = np.zeros(0, np.intp)
_NO_LINES = np.zeros(0, np.complex128)
_NO_CULL = np.zeros(0, np.float64)


@dataclass(frozen=True)
class HistoryFrame:
    """The dynamic objects of one snapshot, world frame.

    Attributes:
        time_s: snapshot time.
        points_xy: ``(P, 1, 2)`` float64, as ``cv2.transform`` takes them: the corners of box
            ``k`` at ``4k ... 4k + 3`` (vehicles first, then walkers), then stop-line endpoints.
        num_vehicles, num_walkers: box counts ``V`` and ``W``.
        centres: ``(V + W,)`` complex box centres ``x + iy`` (for culling).
        cull_distance_m: ``(V + W,)`` centre distance from the ego beyond which a box cannot
            touch the view (view radius plus the box's half-diagonal).
        refill_vehicles, refill_walkers: indices (into all boxes) of the vehicles and walkers to
            fill again one by one after the single fill of all boxes of their kind. OpenCV fills
            a multi-polygon call by the even-odd rule, which leaves the overlap of two boxes
            empty; refilling one box of each overlapping pair closes it.
        line_groups: ``(value, start, stop)``: points ``start:stop`` are segment endpoints drawn
            with channel value ``value``, ascending so the larger value wins where lines cross.
        stop_sign_lines: ``(S, 2, 2)`` stop-sign segments (the RGB colours them apart from red lights).
        line_centres: ``(L,)`` complex midpoints of the stop-line segments, in ``points_xy``
            order (for culling).
        line_cull_distance_m: ``(L,)`` midpoint distance from the ego beyond which a segment,
            drawn with its thickness, cannot touch the view.
    """

    time_s: float
    points_xy: np.ndarray
    num_vehicles: int
    num_walkers: int
    centres: np.ndarray
    cull_distance_m: np.ndarray
    refill_vehicles: np.ndarray
    refill_walkers: np.ndarray
    line_groups: tuple[tuple[int, int, int], ...]
    stop_sign_lines: np.ndarray
    line_centres: np.ndarray
    line_cull_distance_m: np.ndarray


def make_history_frame(snapshot: WorldSnapshot, config: BevConfig) -> HistoryFrame:
    """Reduce a snapshot to what later renders draw (pure)."""
    vehicles, walkers = snapshot.vehicles, snapshot.walkers
    num_vehicles, num_walkers = len(vehicles), len(walkers)
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
    refill = _overlapping(centres, yaw_deg, half_extent, radii)
    num_refill_vehicles = int(np.searchsorted(refill, num_vehicles))

    lines = _stop_line_layout(snapshot, config)
    stop_sign_lines = np.asarray(snapshot.stop_signs.segments, dtype=np.float64).reshape(-1, 2, 2)
    first_line_point = 4 * len(radii)
    if len(lines.points_xy):
        points = np.concatenate([corners.reshape(-1, 2), lines.points_xy])
    else:
        points = corners.reshape(-1, 2)
    return HistoryFrame(
        time_s=float(snapshot.time_s),
        points_xy=points.reshape(-1, 1, 2),
        num_vehicles=num_vehicles,
        num_walkers=num_walkers,
        centres=centres.view(np.complex128).ravel(),
        cull_distance_m=radii + _derived(config).view_radius_m,
        refill_vehicles=refill[:num_refill_vehicles],
        refill_walkers=refill[num_refill_vehicles:],
        line_groups=tuple((value, first_line_point + a, first_line_point + b) for value, a, b in lines.groups),
        stop_sign_lines=stop_sign_lines,
        line_centres=lines.centres,
        line_cull_distance_m=lines.cull_distance_m,
    )


@dataclass(frozen=True)
class _StopLineLayout:
    """Stop-line endpoints of one snapshot in drawing order (see :func:`_stop_lines`).

    Attributes:
        points_xy: ``(2L, 2)`` float64 segment endpoints, sorted by channel value.
        groups: ``(value, start, stop)`` point ranges, counted from the first line point.
        centres: ``(L,)`` complex segment midpoints.
        cull_distance_m: ``(L,)`` midpoint distance from the ego beyond which a segment, drawn
            with its thickness, cannot touch the view.
    """

    points_xy: np.ndarray
    groups: tuple[tuple[int, int, int], ...]
    centres: np.ndarray
    cull_distance_m: np.ndarray


_NO_LAYOUT = _StopLineLayout(np.zeros((0, 2)), (), _NO_LINES, _NO_CULL)
_LAYOUT_CACHE_SIZE = 16
_layout_cache: dict[tuple, tuple[BevConfig, _StopLineLayout]] = {}


def _stop_line_layout(snapshot: WorldSnapshot, config: BevConfig) -> _StopLineLayout:
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
    layout = _StopLineLayout(
        points_xy=points,
        groups=tuple(groups),
        centres=0.5 * (ends[:, 0] + ends[:, 1]),
        cull_distance_m=0.5 * np.abs(ends[:, 1] - ends[:, 0]) + _derived(config).line_reach_m,
    )
    for array in (layout.points_xy, layout.centres, layout.cull_distance_m):
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
    """

    config: BevConfig
    view_radius_m: float
    line_reach_m: float


_derived_cache: dict[int, _Derived] = {}


def _derived(config: BevConfig) -> _Derived:
    """Memoised by identity: hashing a ``BevConfig`` costs more than computing these."""
    derived = _derived_cache.get(id(config))
    if derived is None or derived.config is not config:
        reach_m = config.view_radius_m + (0.5 * config.stop_line_width_px + 2.0) / config.pixels_per_m
        derived = _Derived(config, config.view_radius_m, reach_m)
        if len(_derived_cache) >= 8:
            _derived_cache.clear()
        _derived_cache[id(config)] = derived
    return derived


class FrameHistory:
    """The recent :class:`HistoryFrame` s and the choice of which to draw for each age."""

    def __init__(self, config: BevConfig) -> None:
        self._ages_s = tuple(float(age) for age in config.history_s)
        self._step_s = config.step_s
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
        for age_s in self._ages_s:
            target_s = now_s - age_s
            index = last - round(age_s / self._step_s)
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
