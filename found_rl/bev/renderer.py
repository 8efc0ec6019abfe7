"""Roach-compatible bird's-eye-view masks of a :class:`WorldSnapshot` (ARCHITECTURE §4)."""

from __future__ import annotations

import cv2
import numpy as np

from found_rl.bev.config import MARKING_CHANNEL, ROAD_CHANNEL, ROUTE_CHANNEL, BevConfig
from found_rl.bev.history import FrameHistory, HistoryFrame, StopLineLayout, make_history_frame
from found_rl.bev.layers import (
    FIXED_POINT_SCALE,
    draw_route,
    draw_segments,
    fill_boxes,
    to_fixed_point_pixels,
    visible_box_pixels,
)
from found_rl.bev.pooling import MaxPool
from found_rl.bev.rgb import masks_to_rgb
from found_rl.bev.static_map import (
    BROKEN_BIT,
    ROAD_BIT,
    SOLID_BIT,
    StaticRaster,
    static_raster,
    value_raster,
)
from found_rl.bev.transform import apply_affine, box_corners, world_to_pixel_affine
from found_rl.hazards import nearest_route_index
from found_rl.world import EgoState, MapGeometry, WorldSnapshot

_ROUTE_SEARCH_WINDOW = 50
_ROAD_VALUE = 255
_LINE_CACHE_MARGIN_M = 5.0
"""Stop lines culled for one ego position serve renders within this distance of it."""
_NO_LINE_POINTS = np.zeros((0, 1, 2), np.float64)
_BOX_SLACK_PX = 2.0
"""OpenCV rasterises within a pixel of a polygon: a box whose corners all lie farther than this
outside the image cannot paint a pixel, so it is not drawn."""


class BevRenderer:
    """Renders the 15-channel BEV of each step and keeps the history it needs.

    One renderer serves one episode stream: :meth:`render` appends the snapshot to the history,
    :meth:`reset` clears it (a snapshot older than the last one also starts a new episode).
    Static layers come from a per-map raster cached by ``map_id``.
    """

    def __init__(self, map_geometry: MapGeometry | None = None, config: BevConfig = BevConfig()) -> None:  # noqa: B008 (frozen)
        """Build a renderer; the map raster is built now if ``map_geometry`` is given.

        Args:
            map_geometry: a map to rasterise up front (a snapshot's own map is used otherwise).
            config: geometry, values and history of the BEV.
        """
        self.config = config
        if config.opencv_threads is not None:
            cv2.setNumThreads(config.opencv_threads)
        size = config.size_px
        self._ego_pixel = config.ego_pixel
        self._masks = np.zeros((config.num_channels, size, size), np.uint8)
        self._static_bits = np.zeros((size, size), np.uint8)
        self._pool = MaxPool(self._masks.shape, config.pool)
        self._flag = np.zeros((size, size), np.uint8)
        self._static_values = np.zeros((size, size), np.uint16)
        self._static_channels = [self._masks[ROAD_CHANNEL], self._masks[MARKING_CHANNEL]]
        # (vehicle, walker, light) channel indices and views of each history slot, made once.
        self._slot_indices = list(zip(config.vehicle_channels, config.walker_channels, config.light_channels))
        self._slot_channels = [
            (self._masks[vehicles], self._masks[walkers], self._masks[lights])
            for vehicles, walkers, lights in self._slot_indices
        ]
        self._drawn = [False] * config.num_channels
        """Per channel: drawn into by the last render (the others are zero, static ones aside)."""
        self._shared: list[tuple[int, int]] = []
        """``(channel, source)``: channels of the last render equal to an earlier one; they are
        left zero and copied only when the full-resolution masks are read."""
        self._history = FrameHistory(config)
        # Fixed-point bounds a box must meet to be drawn: the image and two pixels around it.
        self._box_low = -_BOX_SLACK_PX * FIXED_POINT_SCALE
        self._box_high = (size - 1 + _BOX_SLACK_PX) * FIXED_POINT_SCALE
        self._raster: StaticRaster | None = None
        self._raster_map_id: str | None = None
        self._raster_to_world = np.eye(3)  # (3, 3) raster (col, row, 1) -> world (x, y, 1)
        self._raster_values: np.ndarray | None = None  # uint16 road | marking << 8 bytes (see value_raster)
        self._route_id: int | None = None
        self._line_cache: dict[int, tuple] = {}
        """``id(layout)`` -> ``(layout, ego_x, ego_y, points, groups)`` of :meth:`_nearby_lines`."""
        self._route_index: int | None = None
        self._last_affine: np.ndarray | None = None
        self._last_frames: list[HistoryFrame] = []
        self._last_ego: EgoState | None = None
        if map_geometry is not None:
            self._raster_for(map_geometry)

    @property
    def observation_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of :meth:`render`'s output; ``(15, 96, 96)`` by default."""
        return self.config.observation_shape

    @property
    def last_masks(self) -> np.ndarray:
        """``(C, size, size)`` uint8 full-resolution masks of the last render (read-only view;
        overwritten by the next render, so copy it to keep it)."""
        self._copy_shared_channels()
        view = self._masks.view()
        view.flags.writeable = False
        return view

    @property
    def route_index(self) -> int | None:
        """Route waypoint the last render started the route layer from."""
        return self._route_index

    def reset(self) -> None:
        """Forget the history and the route position (call at every episode start)."""
        self._history.clear()
        self._route_id = None
        self._route_index = None
        self._last_affine = None
        self._last_frames = []

    def render(self, snapshot: WorldSnapshot, route_index: int | None = None) -> np.ndarray:
        """Render ``snapshot`` and append it to the history.

        Args:
            snapshot: the world now.
            route_index: the ego's route waypoint if the caller tracks it; otherwise the renderer
                finds the nearest waypoint near its previous answer.

        Returns:
            ``observation_shape`` uint8, max-pooled, C-contiguous, a new array each call.
        """
        config = self.config
        latest_time_s = self._history.latest_time_s
        if latest_time_s is not None and snapshot.time_s < latest_time_s - 1e-9:
            self.reset()  # time went backwards: a new episode without reset()
        ego = snapshot.ego
        ego_x, ego_y = float(ego.xy[0]), float(ego.xy[1])
        affine = world_to_pixel_affine(ego.xy, ego.yaw_deg, config.pixels_per_m, self._ego_pixel)
        # Road and markings are overwritten whole by _draw_static; of the other layers only
        # those drawn last time can be non-zero.
        self._clear_drawn()

        self._draw_static(snapshot.map, affine)
        self._draw_route(snapshot, affine, route_index)

        self._history.append(make_history_frame(snapshot, config))
        frames = self._history.select()
        fixed_point_affine = affine * FIXED_POINT_SCALE
        self._draw_boxes(frames, fixed_point_affine)
        self._draw_lines(frames, fixed_point_affine, complex(ego_x, ego_y))

        self._last_affine = affine
        self._last_frames = frames
        self._last_ego = ego
        return self._pooled()

    def _clear_drawn(self) -> None:
        """Zero the per-step channels drawn by the last render (all others are still zero)."""
        masks = self._masks
        for start, stop in _runs(self._drawn):
            masks[start:stop].fill(0)
        self._drawn = [False] * len(masks)
        self._shared = []

    def _pooled(self) -> np.ndarray:
        """Pool the channels that may be non-zero (static ones, those drawn); copy shared ones."""
        to_pool = self._drawn.copy()
        to_pool[ROAD_CHANNEL] = to_pool[MARKING_CHANNEL] = True
        pooled = self._pool(self._masks, _runs(to_pool))
        for channel, source in self._shared:
            np.copyto(pooled[channel], pooled[source])
        return pooled

    def _copy_shared_channels(self) -> None:
        """Fill in the full-resolution channels that the last render left as copies to make."""
        masks = self._masks
        for channel, source in self._shared:
            np.copyto(masks[channel], masks[source])
            self._drawn[channel] = True
        self._shared = []

    def render_rgb(self) -> np.ndarray:
        """``(size, size, 3)`` uint8 RGB picture of the last render, ego box in white."""
        if self._last_affine is None:
            raise RuntimeError("BevRenderer.render_rgb() needs a render() first")
        self._copy_shared_channels()
        config = self.config
        size = config.size_px
        affine = self._last_affine
        stop_sign_masks = np.zeros((config.history_frames, size, size), np.uint8)
        for slot, frame in enumerate(self._last_frames):
            if len(frame.stop_sign_lines):
                segments = to_fixed_point_pixels(frame.stop_sign_lines.reshape(-1, 1, 2), affine * FIXED_POINT_SCALE)
                draw_segments(stop_sign_masks[slot], segments.reshape(-1, 2, 2), config.stop_line_width_px, 1)
        ego_mask = np.zeros((size, size), np.uint8)
        if self._last_ego is not None:
            cv2.fillConvexPoly(ego_mask, ego_corners_px(self._last_ego, affine), 1)
        return masks_to_rgb(self._masks, config, stop_sign_masks.astype(bool), ego_mask.astype(bool))

    def _raster_for(self, geometry: MapGeometry) -> StaticRaster:
        if self._raster is None or geometry.map_id != self._raster_map_id:
            config = self.config
            self._raster = static_raster(
                geometry, config.pixels_per_m, config.marking_width_px, config.max_static_pixels
            )
            self._raster_map_id = geometry.map_id
            self._raster_to_world = np.vstack([self._raster.pixel_to_world_affine(), [0.0, 0.0, 1.0]])
            self._raster_values = value_raster(
                self._raster, _ROAD_VALUE, config.solid_marking_value, config.broken_marking_value
            )
        return self._raster

    def _draw_static(self, geometry: MapGeometry, affine: np.ndarray) -> None:
        """Crop road and markings out of the cached raster with one nearest-neighbour warp."""
        raster = self._raster_for(geometry)
        raster_to_bev = affine @ self._raster_to_world
        if self._raster_values is not None:
            # Road and marking values side by side in one uint16 pixel: one warp, one split.
            _warp_nearest(self._raster_values, raster_to_bev, self._static_values)
            size = self.config.size_px
            cv2.split(self._static_values.view(np.uint8).reshape(size, size, 2), self._static_channels)
            return
        _warp_nearest(raster.bits, raster_to_bev, self._static_bits)
        split_static_bits(
            self._static_bits, self._masks[ROAD_CHANNEL], self._masks[MARKING_CHANNEL], self._flag, self.config
        )

    def _draw_route(self, snapshot: WorldSnapshot, affine: np.ndarray, route_index: int | None) -> None:
        route = snapshot.route
        if len(route.xy) == 0:
            return
        if route_index is None:
            hint = self._route_index if self._route_id == id(route) else None
            route_index = nearest_route_index(route, snapshot.ego.xy, hint, _ROUTE_SEARCH_WINDOW)
        self._route_id = id(route)
        self._route_index = route_index
        # One waypoint behind the nearest so the line always reaches under the ego.
        start = max(route_index - 1, 0)
        waypoints = route.xy[start : route_index + self.config.route_waypoints]
        if not len(waypoints):
            return
        # One cv2.transform in float64, rounded to float32 as draw_route does.
        pixels = cv2.transform(np.ascontiguousarray(waypoints, np.float64).reshape(-1, 1, 2), affine)
        draw_route(self._masks[ROUTE_CHANNEL], pixels.astype(np.float32), self.config.route_width_px)
        self._drawn[ROUTE_CHANNEL] = True

    def _draw_boxes(self, frames: list[HistoryFrame], fixed_point_affine: np.ndarray) -> None:
        """Fill every frame's vehicles and walkers: one kernel maps all corners to pixels and
        drops the boxes off the view, then one ``fillPoly`` per channel (plus refills)."""
        if not any(frame.num_vehicles or frame.num_walkers for frame in frames):
            return
        pixels, bounds, refill = visible_box_pixels(
            np.concatenate([frame.corners for frame in frames]),
            np.array([(frame.num_vehicles, frame.num_walkers) for frame in frames], np.int64),
            np.concatenate([frame.refill for frame in frames]),
            fixed_point_affine,
            self._box_low,
            self._box_high,
        )
        any_refill = bool(refill.any())
        bounds = bounds.tolist()
        for group in range(len(bounds) - 1):
            start, stop = bounds[group], bounds[group + 1]
            if stop > start:
                slot, kind = divmod(group, 2)
                boxes = pixels[start:stop]
                fill_boxes(self._slot_channels[slot][kind], boxes, boxes[refill[start:stop]] if any_refill else ())
                self._drawn[self._slot_indices[slot][kind]] = True

    def _draw_lines(self, frames: list[HistoryFrame], fixed_point_affine: np.ndarray, ego_xy: complex) -> None:
        """Draw every frame's stop lines; frames sharing a layout share one drawing.

        Light states change every few seconds, so the frames of a render nearly always hold
        the same layout object: its visible segments are transformed and drawn once, and the
        other slots are marked as copies of that channel.
        """
        last_layout, source = None, -1  # the layout of the last frame drawn, and its slot (-1: blank)
        for slot, frame in enumerate(frames):
            layout = frame.lines
            if not layout.groups:
                continue
            light_index = self._slot_indices[slot][2]
            if layout is not last_layout:  # a layout seen before that was not the last is drawn again
                points, groups = self._nearby_lines(layout, ego_xy.real, ego_xy.imag)
                is_drawn = bool(groups)
                if is_drawn:
                    pixels = cv2.transform(points, fixed_point_affine).astype(np.int32).reshape(-1, 2, 2)
                    channel, width_px = self._slot_channels[slot][2], self.config.stop_line_width_px
                    for value, start, stop in groups:
                        draw_segments(channel, pixels[start:stop], width_px, value)
                last_layout, source = layout, slot if is_drawn else -1
                self._drawn[light_index] = is_drawn
            elif source >= 0:
                self._shared.append((light_index, self._slot_indices[source][2]))

    def _nearby_lines(
        self, layout: StopLineLayout, ego_x: float, ego_y: float
    ) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
        """Endpoints ``(2K, 1, 2)`` of the segments of ``layout`` that may touch the view, and
        their non-empty ``(value, start, stop)`` segment groups.

        Culled with :data:`_LINE_CACHE_MARGIN_M` of extra reach and reused while the ego stays
        within that margin of where they were found: every segment that can touch the view is
        then among them (drawing a few more off-view ones leaves the image unchanged).
        """
        cached = self._line_cache.get(id(layout))
        if cached is not None and cached[0] is layout:
            dx, dy = ego_x - cached[1], ego_y - cached[2]
            if dx * dx + dy * dy <= _LINE_CACHE_MARGIN_M * _LINE_CACHE_MARGIN_M:
                return cached[3], cached[4]
        points, groups = visible_stop_lines(layout, complex(ego_x, ego_y), _LINE_CACHE_MARGIN_M)
        if len(self._line_cache) >= 4:
            self._line_cache.clear()
        self._line_cache[id(layout)] = (layout, ego_x, ego_y, points, groups)
        return points, groups


def visible_stop_lines(
    layout: StopLineLayout, ego_xy: complex, extra_reach_m: float = 0.0
) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Endpoints ``(2K, 1, 2)`` of the segments of ``layout`` that may touch the view from
    ``ego_xy`` (or from anywhere within ``extra_reach_m`` of it), and their non-empty
    ``(value, start, stop)`` segment ranges in drawing order (ascending value, so the larger
    value wins where lines cross).

    Segments whose midpoint is farther from the ego than their cull distance cannot touch the view.
    """
    visible = (np.abs(layout.centres - ego_xy) <= layout.cull_distance_m + extra_reach_m).nonzero()[0]
    if not len(visible):
        return _NO_LINE_POINTS, []
    points = np.ascontiguousarray(layout.segments_xy[visible].reshape(-1, 1, 2))
    edges = np.searchsorted(visible, layout.group_edges).tolist()
    groups = [
        (value, start, stop)
        for (value, _, _), start, stop in zip(layout.groups, edges[0::2], edges[1::2])
        if stop > start
    ]
    return points, groups


def _warp_nearest(image: np.ndarray, matrix: np.ndarray, dst: np.ndarray) -> None:
    """Crop ``image`` into ``dst`` through the affine ``matrix`` (nearest pixel, zero outside)."""
    cv2.warpAffine(
        image,
        matrix,
        (dst.shape[1], dst.shape[0]),
        dst=dst,
        flags=cv2.INTER_NEAREST,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """``(start, stop)`` ranges of consecutive ``True`` flags."""
    runs = []
    start = None
    for index, flag in enumerate(flags):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index))
            start = None
    if start is not None:
        runs.append((start, len(flags)))
    return runs


def split_static_bits(
    bits: np.ndarray, road: np.ndarray, markings: np.ndarray, scratch: np.ndarray, config: BevConfig
) -> None:
    """Turn cropped raster bits into the road and lane-marking channels, in place.

    A few whole-image integer operations (OpenCV's ``LUT`` costs several times more here); the
    raster never sets both marking bits on one pixel, so the two marking terms simply add.
    """
    np.bitwise_and(bits, ROAD_BIT, out=road)
    np.multiply(road, 255, out=road)
    np.right_shift(bits, SOLID_BIT.bit_length() - 1, out=markings)
    np.bitwise_and(markings, 1, out=markings)
    np.multiply(markings, config.solid_marking_value, out=markings)
    np.right_shift(bits, BROKEN_BIT.bit_length() - 1, out=scratch)  # BROKEN_BIT is the top bit: 0 or 1
    np.multiply(scratch, config.broken_marking_value, out=scratch)
    np.add(markings, scratch, out=markings)


def ego_corners_px(ego: EgoState, affine: np.ndarray) -> np.ndarray:
    """``(4, 2)`` int32 pixel corners of the ego box."""
    corners = box_corners(
        np.asarray(ego.xy, dtype=np.float64)[None, :2],
        np.array([ego.yaw_deg], dtype=np.float64),
        np.asarray(ego.half_extent, dtype=np.float64)[None, :2],
    )[0]
    return np.rint(apply_affine(affine, corners)).astype(np.int32)
