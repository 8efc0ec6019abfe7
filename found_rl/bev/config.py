"""Settings of the bird's-eye-view renderer and the channel layout they imply (ARCHITECTURE §4)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BevConfig:
    """Geometry, channel values and speed limits of the BEV; the defaults are Roach's.

    Attributes:
        size_px: side of the full-resolution square image, pixels.
        pixels_per_m: resolution, pixels per metre (192 px at 5 px/m covers 38.4 m).
        ego_from_bottom_px: rows between the ego centre and the bottom edge; the ego is centred
            laterally and faces up.
        pool: side of the max-pooling window; the policy sees ``size_px // pool`` pixels.
        history_s: ages, seconds, of the frames drawn in each dynamic group, oldest first.
        step_s: simulation step, seconds; sizes the history buffer.
        route_waypoints: route waypoints drawn from the ego's nearest one onwards.
        route_width_px: thickness of the route polyline.
        marking_width_px: thickness of lane markings.
        stop_line_width_px: thickness of traffic-light and stop-sign lines.
        vehicle_box_scale: factor on vehicle half-extents (Roach: 1.0).
        walker_box_scale: factor on walker half-extents (Roach: 2.0, walkers are tiny).
        min_half_extent_m: floor of every scaled half-extent (Roach: 0.8 m).
        solid_marking_value, broken_marking_value: lane-marking channel values.
        green_value, yellow_value, red_value, stop_sign_value: stop-line channel values.
        max_static_pixels: cap on the cached map raster's pixel count; larger maps are
            rasterised at a lower resolution (and up-sampled by the crop) so memory stays bounded.
        opencv_threads: OpenCV worker threads set when a renderer is built (``None``: leave
            OpenCV's setting alone). One is fastest for 192 px images and does not oversubscribe
            the cores when many env processes render at once.
    """

    size_px: int = 192
    pixels_per_m: float = 5.0
    ego_from_bottom_px: int = 40
    pool: int = 2
    history_s: tuple[float, ...] = (1.5, 1.0, 0.5, 0.0)
    step_s: float = 0.1
    route_waypoints: int = 80
    route_width_px: int = 16
    marking_width_px: int = 2
    stop_line_width_px: int = 6
    vehicle_box_scale: float = 1.0
    walker_box_scale: float = 2.0
    min_half_extent_m: float = 0.8
    solid_marking_value: int = 255
    broken_marking_value: int = 120
    green_value: int = 80
    yellow_value: int = 170
    red_value: int = 255
    stop_sign_value: int = 255
    max_static_pixels: int = 32_000_000
    opencv_threads: int | None = 1

    def __post_init__(self) -> None:
        _require(self.size_px > 0, "size_px", self.size_px, "an int > 0")
        _require(self.pixels_per_m > 0, "pixels_per_m", self.pixels_per_m, "a number > 0")
        _require(
            0 <= self.ego_from_bottom_px < self.size_px,
            "ego_from_bottom_px",
            self.ego_from_bottom_px,
            f"an int in [0, size_px={self.size_px})",
        )
        _require(
            self.pool >= 1 and self.size_px % self.pool == 0,
            "pool",
            self.pool,
            f"an int >= 1 dividing size_px={self.size_px}",
        )
        _require(
            len(self.history_s) >= 1 and all(age >= 0 for age in self.history_s),
            "history_s",
            self.history_s,
            "a non-empty tuple of ages >= 0 s",
        )
        _require(self.step_s > 0, "step_s", self.step_s, "a number > 0")
        _require(self.route_waypoints >= 2, "route_waypoints", self.route_waypoints, "an int >= 2")
        for name in ("route_width_px", "marking_width_px", "stop_line_width_px"):
            _require(getattr(self, name) >= 1, name, getattr(self, name), "an int >= 1")
        for name in ("vehicle_box_scale", "walker_box_scale"):
            _require(getattr(self, name) > 0, name, getattr(self, name), "a number > 0")
        _require(self.min_half_extent_m >= 0, "min_half_extent_m", self.min_half_extent_m, "a number >= 0")
        for name in (
            "solid_marking_value",
            "broken_marking_value",
            "green_value",
            "yellow_value",
            "red_value",
            "stop_sign_value",
        ):
            _require(0 <= getattr(self, name) <= 255, name, getattr(self, name), "an int in [0, 255]")
        _require(self.max_static_pixels >= 1_000_000, "max_static_pixels", self.max_static_pixels, "an int >= 1e6")

    @property
    def history_frames(self) -> int:
        """Frames per dynamic group."""
        return len(self.history_s)

    @property
    def num_channels(self) -> int:
        """Road, route, markings, then vehicles, walkers and stop lines with history."""
        return 3 + 3 * self.history_frames

    @property
    def vehicle_channels(self) -> range:
        return range(3, 3 + self.history_frames)

    @property
    def walker_channels(self) -> range:
        return range(3 + self.history_frames, 3 + 2 * self.history_frames)

    @property
    def light_channels(self) -> range:
        return range(3 + 2 * self.history_frames, 3 + 3 * self.history_frames)

    @property
    def pooled_size_px(self) -> int:
        return self.size_px // self.pool

    @property
    def observation_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of what :meth:`BevRenderer.render` returns."""
        return (self.num_channels, self.pooled_size_px, self.pooled_size_px)

    @property
    def view_radius_m(self) -> float:
        """Distance from the ego centre to the farthest image corner, metres."""
        row, col = self.ego_pixel
        corners = ((0, 0), (0, self.size_px), (self.size_px, 0), (self.size_px, self.size_px))
        return max(math.hypot(r - row, c - col) for r, c in corners) / self.pixels_per_m

    @property
    def ego_pixel(self) -> tuple[int, int]:
        """``(row, col)`` of the ego centre in the full-resolution image."""
        return (self.size_px - self.ego_from_bottom_px, self.size_px // 2)


ROAD_CHANNEL = 0
ROUTE_CHANNEL = 1
MARKING_CHANNEL = 2


def _require(is_ok: bool, name: str, value: object, allowed: str) -> None:
    if not is_ok:
        raise ValueError(f"BevConfig.{name}: expected {allowed}, got {value!r}")
