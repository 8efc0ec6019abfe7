"""The static BEV layers (road, lane markings), rasterised once per map and cropped per step.

A map is drawn once into one large uint8 raster whose bits say road / solid marking / broken
marking. Each step crops the ego's view out of it with a single nearest-neighbour affine warp,
so per-step cost does not depend on the map's size or detail. :func:`value_raster` re-encodes
the bits as ready-made channel values (road and marking bytes side by side in one ``uint16``
pixel): the crop is then one 16-bit warp plus one channel split, cheaper than decoding bits.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import cv2
import numpy as np

from found_rl.world import MapGeometry

ROAD_BIT = 1
SOLID_BIT = 2
BROKEN_BIT = 4
"""The highest bit in use; the renderer relies on ``bits >> 2`` being 0 or 1."""

_SHIFT_BITS = 3
"""Fixed-point fraction bits passed to OpenCV so polygons keep sub-pixel precision."""

_MARGIN_M = 2.0
_CACHE_SIZE = 4
_cache: OrderedDict[tuple, StaticRaster] = OrderedDict()

MAX_VALUE_RASTER_PIXELS = 12_000_000
"""Rasters larger than this get no :func:`value_raster` (it doubles their memory); the renderer
decodes their bits instead."""
_value_cache: OrderedDict[tuple, tuple[StaticRaster, np.ndarray]] = OrderedDict()


@dataclass(frozen=True)
class StaticRaster:
    """A map's static layers as bit flags.

    Attributes:
        bits: ``(H, W)`` uint8 of ``ROAD_BIT | SOLID_BIT | BROKEN_BIT`` flags (never both
            marking bits); row = y (south).
        origin_xy: world ``(x, y)`` of pixel ``(0, 0)``'s centre, metres.
        pixels_per_m: raster resolution (lower than the BEV's on very large maps).
    """

    bits: np.ndarray
    origin_xy: tuple[float, float]
    pixels_per_m: float

    def pixel_to_world_affine(self) -> np.ndarray:
        """``(2, 3)`` map from raster ``(col, row)`` to world ``(x, y)``."""
        scale = 1.0 / self.pixels_per_m
        return np.array([[scale, 0.0, self.origin_xy[0]], [0.0, scale, self.origin_xy[1]]])


def static_raster(
    geometry: MapGeometry,
    pixels_per_m: float,
    marking_width_px: int,
    max_pixels: int,
) -> StaticRaster:
    """The raster of ``geometry``, from a small per-process cache keyed by ``map_id``."""
    key = (geometry.map_id, pixels_per_m, marking_width_px, max_pixels)
    raster = _cache.get(key)
    if raster is None:
        raster = rasterize_map(geometry, pixels_per_m, marking_width_px, max_pixels)
        _cache[key] = raster
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return raster


def value_raster(raster: StaticRaster, road_value: int, solid_value: int, broken_value: int) -> np.ndarray | None:
    """``(H, W)`` uint16 twin of ``raster.bits`` whose bytes are the road and marking channel values.

    Viewed as ``(H, W, 2)`` uint8, byte 0 is the road value (``road_value`` or 0) and byte 1 the
    marking value (``solid_value``, ``broken_value`` or 0) of each pixel, whatever the machine's
    byte order. ``None`` when the raster is larger than :data:`MAX_VALUE_RASTER_PIXELS`. Cached
    per raster and values (a few per process).
    """
    if raster.bits.size > MAX_VALUE_RASTER_PIXELS:
        return None
    key = (id(raster), road_value, solid_value, broken_value)
    cached = _value_cache.get(key)
    if cached is not None and cached[0] is raster:  # the entry holds the raster: its id is not reused
        _value_cache.move_to_end(key)
        return cached[1]
    bits = raster.bits
    planes = np.zeros((*bits.shape, 2), np.uint8)
    planes[..., 0][(bits & ROAD_BIT) != 0] = road_value
    planes[..., 1][(bits & SOLID_BIT) != 0] = solid_value
    planes[..., 1][(bits & BROKEN_BIT) != 0] = broken_value  # never both marking bits on one pixel
    values = planes.view(np.uint16).reshape(bits.shape)
    values.flags.writeable = False
    _value_cache[key] = (raster, values)
    while len(_value_cache) > _CACHE_SIZE:
        _value_cache.popitem(last=False)
    return values


def rasterize_map(
    geometry: MapGeometry,
    pixels_per_m: float,
    marking_width_px: int,
    max_pixels: int,
) -> StaticRaster:
    """Draw road polygons and markings of a whole map (pure; no cache).

    Args:
        geometry: the map.
        pixels_per_m: wanted resolution; lowered when the map would exceed ``max_pixels``.
        marking_width_px: marking thickness at ``pixels_per_m``.
        max_pixels: cap on the raster's pixel count.
    """
    min_x, min_y, max_x, max_y = _extent(geometry)
    width_m, height_m = max_x - min_x + 2 * _MARGIN_M, max_y - min_y + 2 * _MARGIN_M
    resolution = pixels_per_m
    while True:
        width_px = max(math.ceil(width_m * resolution), 1)
        height_px = max(math.ceil(height_m * resolution), 1)
        if width_px * height_px <= max_pixels:
            break
        resolution *= min(math.sqrt(max_pixels / (width_px * height_px)), 0.999)
    origin = (min_x - _MARGIN_M, min_y - _MARGIN_M)

    def to_fixed_point(points: np.ndarray) -> np.ndarray:
        pixels = (np.asarray(points, dtype=np.float64)[:, :2] - origin) * resolution
        return np.round(pixels * (1 << _SHIFT_BITS)).astype(np.int32)

    bits = np.zeros((height_px, width_px), np.uint8)
    plane = np.zeros_like(bits)
    # One call per polygon: a single fillPoly over overlapping polygons (lanes and junctions
    # overlap) fills by the even-odd rule and would punch holes where they overlap.
    for polygon in geometry.road_polygons:
        if len(polygon) >= 3:
            cv2.fillPoly(plane, [to_fixed_point(polygon)], 1, cv2.LINE_8, _SHIFT_BITS)
    bits |= plane * ROAD_BIT

    thickness = max(1, round(marking_width_px * resolution / pixels_per_m))
    for markings, bit in ((geometry.solid_markings, SOLID_BIT), (geometry.broken_markings, BROKEN_BIT)):
        lines = [to_fixed_point(line.xy) for line in markings if len(line.xy) >= 2]
        if lines:
            plane[:] = 0
            cv2.polylines(plane, lines, False, 1, thickness, cv2.LINE_8, _SHIFT_BITS)
            bits |= plane * np.uint8(bit)
    # Broken wins where both kinds meet (Roach paints the broken pixels last); keeping at most
    # one marking bit per pixel lets the renderer decode the crop with plain arithmetic.
    bits[(bits & BROKEN_BIT) != 0] &= np.uint8(~SOLID_BIT & 0xFF)
    return StaticRaster(bits=bits, origin_xy=origin, pixels_per_m=resolution)


def _extent(geometry: MapGeometry) -> tuple[float, float, float, float]:
    """Bounds of everything drawn (``geometry.bounds`` may be unset)."""
    arrays = [np.asarray(p, dtype=np.float64)[:, :2] for p in geometry.road_polygons if len(p)]
    arrays += [line.xy[:, :2] for line in (*geometry.solid_markings, *geometry.broken_markings) if len(line.xy)]
    if not arrays:
        return (0.0, 0.0, 1.0, 1.0)
    points = np.concatenate(arrays)
    if not np.all(np.isfinite(points)):
        raise ValueError(f"MapGeometry {geometry.map_id!r}: road polygons or markings contain NaN or inf")
    low, high = points.min(axis=0), points.max(axis=0)
    return (float(low[0]), float(low[1]), float(high[0]), float(high[1]))
