"""Past snapshots' dynamic objects, kept in the world frame and redrawn in the current ego frame.

Roach draws its history frames (−1.5, −1.0, −0.5 s and now) in the *current* ego frame, so the
policy sees how actors moved relative to where the ego is now. Each snapshot is reduced once,
when it arrives, to one world-frame point array (vehicle corners, walker corners, stop-line
endpoints, each part contiguous) so a render transforms a frame with one call and draws each
part with one OpenCV call.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass

import numpy as np

from found_rl.bev.config import BevConfig
from found_rl.bev.transform import box_corners
from found_rl.sim.snapshot import ActorBoxes, LightState, WorldSnapshot

_OVERLAP_MARGIN_M = 0.3
"""Slack on the bounding-circle test so boxes that touch after pixel rounding count as overlapping."""

@dataclass(frozen=True)
class BoxSet:
    """Where one kind of box (vehicles or walkers) sits in :attr:`HistoryFrame.points_xy`.

    Attributes:
        start: index of the first corner; box ``k`` has corners ``start + 4k ... start + 4k + 3``.
        num_boxes: ``N``.
        refill: indices of boxes to fill again one by one after the single all-box fill, because
            they overlap another box (OpenCV fills a multi-polygon call by the even-odd rule and
            leaves the overlap empty; refilling one box of each overlapping pair closes it).
        centres_xy: ``(N, 2)`` centres, world frame (for culling).
        radii_m: ``(N,)`` half-diagonals of the drawn boxes.
    """

    start: int
    num_boxes: int
    refill: np.ndarray
    centres_xy: np.ndarray
    radii_m: np.ndarray


@dataclass(frozen=True)
class HistoryFrame:
    """The dynamic objects of one snapshot, world frame.

    Attributes:
        time_s: snapshot time.
        points_xy: ``(P, 1, 2)`` float64: vehicle corners, walker corners, then stop-line
            endpoints grouped by channel value (ascending), as ``cv2.transform`` takes them.
        vehicles, walkers: where each kind's corners are.
        line_groups: ``(value, start, stop)``: points ``start:stop`` are segment endpoints drawn
            with channel value ``value``.
        stop_sign_lines: ``(S, 2, 2)`` stop-sign segments (the RGB colours them apart from red lights).
    """

    time_s: float
    points_xy: np.ndarray
    vehicles: BoxSet
    walkers: BoxSet
    line_groups: tuple[tuple[int, int, int], ...]
    stop_sign_lines: np.ndarray


def make_history_frame(snapshot: WorldSnapshot, config: BevConfig) -> HistoryFrame:
    """Reduce a snapshot to what later renders draw (pure)."""
    vehicle_corners, vehicle_set = _box_set(snapshot.vehicles, config.vehicle_box_scale, config, start=0)
    walker_corners, walker_set = _box_set(
        snapshot.walkers, config.walker_box_scale, config, start=4 * vehicle_set.num_boxes
    )
    first_line_point = 4 * (vehicle_set.num_boxes + walker_set.num_boxes)

    lights = snapshot.traffic_lights
    stop_sign_lines = np.asarray(snapshot.stop_signs.segments, dtype=np.float64).reshape(-1, 2, 2)
    line_parts = []
    line_groups: list[tuple[int, int, int]] = []
    next_point = first_line_point
    if len(lights):
        values = _light_values(config)[np.asarray(lights.states, dtype=np.intp)]
        order = np.argsort(values, kind="stable")
        counts = np.bincount(values, minlength=256)
        point = first_line_point
        for value in np.flatnonzero(counts).tolist():
            stop = point + 2 * int(counts[value])
            if value > 0:  # lights in an unknown state are not drawn
                line_groups.append((value, point, stop))
            point = stop
        line_parts.append(np.asarray(lights.segments, dtype=np.float64)[order].reshape(-1, 2))
        next_point = point
    if len(stop_sign_lines):
        line_parts.append(stop_sign_lines.reshape(-1, 2))
        line_groups.append((config.stop_sign_value, next_point, next_point + 2 * len(stop_sign_lines)))

    points = np.concatenate([vehicle_corners.reshape(-1, 2), walker_corners.reshape(-1, 2), *line_parts])
    return HistoryFrame(
        time_s=float(snapshot.time_s),
        points_xy=points.reshape(-1, 1, 2),
        vehicles=vehicle_set,
        walkers=walker_set,
        line_groups=tuple(line_groups),
        stop_sign_lines=stop_sign_lines,
    )


class FrameHistory:
    """The recent :class:`HistoryFrame` s and the choice of which to draw for each age."""

    def __init__(self, config: BevConfig) -> None:
        self._ages_s = tuple(float(age) for age in config.history_s)
        self._step_s = config.step_s
        self._frames: deque[HistoryFrame] = deque(maxlen=int(round(max(self._ages_s) / config.step_s)) + 2)

    def clear(self) -> None:
        self._frames.clear()

    def __len__(self) -> int:
        return len(self._frames)

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
            index = last - int(round(age_s / self._step_s))
            # Fast path: one frame per step, so the frame that many steps back is the one.
            if index >= 0 and abs(frames[index].time_s - target_s) < tolerance_s:
                chosen.append(frames[index])
                continue
            index = last
            while index > 0 and frames[index].time_s > target_s + tolerance_s:
                index -= 1
            chosen.append(frames[index])
        return chosen


@functools.lru_cache(maxsize=8)
def _light_values(config: BevConfig) -> np.ndarray:  # BevConfig is frozen, so hashable
    """Channel value of each :class:`LightState` code."""
    values = np.zeros(max(int(state) for state in LightState) + 1, np.intp)
    values[int(LightState.GREEN)] = config.green_value
    values[int(LightState.YELLOW)] = config.yellow_value
    values[int(LightState.RED)] = config.red_value
    return values


def _box_set(boxes: ActorBoxes, scale: float, config: BevConfig, start: int) -> tuple[np.ndarray, BoxSet]:
    if len(boxes) == 0:
        return np.zeros((0, 4, 2)), BoxSet(start, 0, _NO_INDICES, np.zeros((0, 2)), np.zeros(0))
    # Roach's ``scale_bbox``: inflate, then floor the half-extents so tiny walkers stay visible.
    half_extent = np.maximum(np.asarray(boxes.half_extent, dtype=np.float64) * scale, config.min_half_extent_m)
    centres = np.ascontiguousarray(boxes.xy, dtype=np.float64)
    corners = box_corners(centres, boxes.yaw_deg, half_extent)
    radii = np.hypot(half_extent[:, 0], half_extent[:, 1])
    refill = _overlapping(centres, np.asarray(boxes.yaw_deg, dtype=np.float64), half_extent, radii)
    return corners, BoxSet(start, len(radii), refill, centres, radii)


_NO_INDICES = np.zeros(0, np.intp)


def _overlapping(centres_xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray, radii_m: np.ndarray) -> np.ndarray:
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
    # Box 2 projected on box 1's axes (and vice versa): a*|cos| + b*|sin|, a*|sin| + b*|cos|.
    reach1 = extent1 + cos * extent2 + sin * extent2[:, ::-1]
    reach2 = extent2 + cos * extent1 + sin * extent1[:, ::-1]
    gap1 = np.abs((offset * local1).view(np.float64).reshape(-1, 2))
    gap2 = np.abs((offset * local2).view(np.float64).reshape(-1, 2))
    is_separated = np.any(gap1 > reach1, axis=1) | np.any(gap2 > reach2, axis=1)
    overlapping = first[~is_separated]
    return np.unique(overlapping) if len(overlapping) > 1 else overlapping
