"""Roach-compatible bird's-eye-view masks of a :class:`WorldSnapshot` (ARCHITECTURE §4)."""

from __future__ import annotations

import cv2
import numpy as np

from found_rl.bev.config import MARKING_CHANNEL, ROAD_CHANNEL, ROUTE_CHANNEL, BevConfig
from found_rl.bev.history import FrameHistory, HistoryFrame, make_history_frame
from found_rl.bev.layers import FIXED_POINT_SCALE, draw_route, draw_segments, fill_boxes, to_fixed_point_pixels
from found_rl.bev.pooling import MaxPool
from found_rl.bev.rgb import masks_to_rgb
from found_rl.bev.static_map import BROKEN_BIT, ROAD_BIT, SOLID_BIT, StaticRaster, static_raster
from found_rl.bev.transform import apply_affine, box_corners, world_to_pixel_affine
from found_rl.hazards import nearest_route_index
from found_rl.sim.snapshot import EgoState, MapGeometry, WorldSnapshot

_ROUTE_SEARCH_WINDOW = 50
_CULL_MIN_BOXES = 12
"""Frames with fewer boxes on average are drawn without culling (the test costs more than it saves)."""


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
        # (vehicle, walker, light) channel views of each history slot, made once.
        self._slot_channels = [
            (self._masks[v], self._masks[w], self._masks[l])
            for v, w, l in zip(config.vehicle_channels, config.walker_channels, config.light_channels)
        ]
        self._history = FrameHistory(config)
        self._raster: StaticRaster | None = None
        self._raster_map_id: str | None = None
        self._raster_to_world = np.eye(3)  # (3, 3) raster (col, row, 1) -> world (x, y, 1)
        self._route_id: int | None = None
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
        if self._history.latest_time_s is not None and snapshot.time_s < self._history.latest_time_s - 1e-9:
            self.reset()  # time went backwards: a new episode without reset()
        ego = snapshot.ego
        affine = world_to_pixel_affine(ego.xy, ego.yaw_deg, config.pixels_per_m, self._ego_pixel)
        masks = self._masks
        # Road and markings are overwritten whole by _draw_static; clear only the other layers.
        masks[ROUTE_CHANNEL].fill(0)
        masks[MARKING_CHANNEL + 1 :].fill(0)

        self._draw_static(snapshot.map, affine)
        self._draw_route(snapshot, affine, route_index)

        self._history.append(make_history_frame(snapshot, config))
        frames = self._history.select()
        # All frames are transformed (and culled) with one call each, then drawn frame by frame.
        points = np.concatenate([frame.points_xy for frame in frames])
        pixels = to_fixed_point_pixels(points, affine * FIXED_POINT_SCALE)
        is_visible = None
        if sum(frame.num_vehicles + frame.num_walkers for frame in frames) > _CULL_MIN_BOXES * len(frames):
            # Off-view boxes still cost OpenCV edge bookkeeping; dropping them is cheaper.
            centres = np.concatenate([frame.centres for frame in frames])
            cull_distance_m = np.concatenate([frame.cull_distance_m for frame in frames])
            is_visible = np.abs(centres - complex(float(ego.xy[0]), float(ego.xy[1]))) <= cull_distance_m
        line_centres = np.concatenate([frame.line_centres for frame in frames])
        is_line_visible = line_centres
        if len(line_centres):
            line_cull_m = np.concatenate([frame.line_cull_distance_m for frame in frames])
            is_line_visible = np.abs(line_centres - complex(float(ego.xy[0]), float(ego.xy[1]))) <= line_cull_m
        first_point = first_box = first_line = 0
        for slot, frame in enumerate(frames):
            num_points, num_boxes = len(frame.points_xy), frame.num_vehicles + frame.num_walkers
            num_lines = len(frame.line_centres)
            frame_pixels = pixels[first_point : first_point + num_points]
            visible = None if is_visible is None else is_visible[first_box : first_box + num_boxes]
            lines_visible = is_line_visible[first_line : first_line + num_lines]
            self._draw_frame(slot, frame, frame_pixels, visible, lines_visible)
            first_point, first_box, first_line = first_point + num_points, first_box + num_boxes, first_line + num_lines

        self._last_affine = affine
        self._last_frames = frames
        self._last_ego = ego
        return self._pool(masks)

    def render_rgb(self) -> np.ndarray:
        """``(size, size, 3)`` uint8 RGB picture of the last render, ego box in white."""
        if self._last_affine is None:
            raise RuntimeError("BevRenderer.render_rgb() needs a render() first")
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
        return self._raster

    def _draw_static(self, geometry: MapGeometry, affine: np.ndarray) -> None:
        """Crop road and markings out of the cached raster with one nearest-neighbour warp."""
        raster = self._raster_for(geometry)
        raster_to_bev = affine @ self._raster_to_world
        cv2.warpAffine(
            raster.bits,
            raster_to_bev,
            (self.config.size_px, self.config.size_px),
            dst=self._static_bits,
            flags=cv2.INTER_NEAREST,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )
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
        draw_route(self._masks[ROUTE_CHANNEL], apply_affine(affine, waypoints), self.config.route_width_px)

    def _draw_frame(
        self,
        slot: int,
        frame: HistoryFrame,
        pixels: np.ndarray,
        is_visible: np.ndarray | None,
        is_line_visible: np.ndarray,
    ) -> None:
        """Draw one history frame (its fixed-point ``pixels``) into its channels.

        ``is_visible`` marks the boxes that may touch the view (``None``: draw them all);
        ``is_line_visible`` the stop-line segments that may (one per segment of ``line_groups``).
        """
        vehicle_channel, walker_channel, light_channel = self._slot_channels[slot]
        num_vehicles, num_boxes = frame.num_vehicles, frame.num_vehicles + frame.num_walkers
        if num_boxes:
            corners = pixels[: 4 * num_boxes].reshape(-1, 4, 2)
            vehicles, walkers = corners[:num_vehicles], corners[num_vehicles:]
            if is_visible is not None:
                vehicles, walkers = vehicles[is_visible[:num_vehicles]], walkers[is_visible[num_vehicles:]]
            refill_vehicles = corners[frame.refill_vehicles] if len(frame.refill_vehicles) else ()
            refill_walkers = corners[frame.refill_walkers] if len(frame.refill_walkers) else ()
            fill_boxes(vehicle_channel, vehicles, refill_vehicles)
            fill_boxes(walker_channel, walkers, refill_walkers)
        width_px = self.config.stop_line_width_px
        for value, start, stop in frame.line_groups:
            segments = pixels[start:stop].reshape(-1, 2, 2)
            keep = is_line_visible[(start - 4 * num_boxes) // 2 : (stop - 4 * num_boxes) // 2]
            draw_segments(light_channel, segments[keep], width_px, value)

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
