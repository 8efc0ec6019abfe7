"""Drawing the per-step BEV layers (route, actor boxes, stop lines) with few OpenCV calls.

Each function draws one kind of object, all instances at once, into one ``(H, W)`` uint8
channel. Coordinates are fixed-point pixels (``FIXED_POINT_BITS`` fraction bits, OpenCV's
``shift``), so boxes keep sub-pixel accuracy and no rounding pass is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from found_rl.jit import kernel

FIXED_POINT_BITS = 4
FIXED_POINT_SCALE = float(1 << FIXED_POINT_BITS)

_ROUTE_SIMPLIFY_PX = 0.5
"""Tolerance when simplifying the ~1 m spaced route before drawing; far below a pixel."""


def to_fixed_point_pixels(points_xy: np.ndarray, fixed_point_affine: np.ndarray) -> np.ndarray:
    """World points ``(P, 1, 2)`` to int32 fixed-point pixels with ``affine * FIXED_POINT_SCALE``.

    Truncation (not rounding) costs at most ``1 / FIXED_POINT_SCALE`` pixel.
    """
    if len(points_xy) == 0:
        return np.zeros((0, 1, 2), np.int32)
    return cv2.transform(points_xy, fixed_point_affine).astype(np.int32)


def draw_route(channel: np.ndarray, route_px: np.ndarray, width_px: int, value: int = 255) -> None:
    """Draw the route as one thick polyline.

    Args:
        channel: ``(H, W)`` uint8, drawn in place.
        route_px: ``(K, 2)`` or ``(K, 1, 2)`` float ``(col, row)`` waypoints, plain pixels.
        width_px: line thickness.
        value: channel value.
    """
    if len(route_px) == 0:
        return
    points = route_px.astype(np.float32, copy=False).reshape(-1, 1, 2)
    if len(points) > 2:
        # A dense route is mostly collinear; thick segments are the costly part of drawing it.
        points = cv2.approxPolyDP(points, _ROUTE_SIMPLIFY_PX, False)
    pixels = (points * FIXED_POINT_SCALE).astype(np.int32)
    if len(pixels) == 1:
        pixels = np.concatenate([pixels, pixels])
    cv2.polylines(channel, [pixels], False, value, width_px, cv2.LINE_8, FIXED_POINT_BITS)


def fill_boxes(channel: np.ndarray, corners_px: np.ndarray, refill_px: Sequence[np.ndarray], value: int = 255) -> None:
    """Fill oriented boxes given as ``(N, 4, 2)`` int32 fixed-point corners.

    One ``fillPoly`` call fills every box; OpenCV fills such a call by the even-odd rule, so
    where boxes overlap it leaves a hole, which refilling one box of each overlapping pair
    (``refill_px``, one call each) closes.
    """
    if len(corners_px):
        cv2.fillPoly(channel, corners_px, value, cv2.LINE_8, FIXED_POINT_BITS)
    for corners in refill_px:
        # fillPoly, not fillConvexPoly: the two rasterise edges differently.
        cv2.fillPoly(channel, corners[None], value, cv2.LINE_8, FIXED_POINT_BITS)


def draw_segments(channel: np.ndarray, segments_px: np.ndarray, width_px: int, value: int) -> None:
    """Draw line segments ``(M, 2, 2)`` int32 fixed-point ``(col, row)`` with one call."""
    if len(segments_px):
        cv2.polylines(channel, segments_px, False, value, width_px, cv2.LINE_8, FIXED_POINT_BITS)


@kernel(
    "Tuple((int32[:, :, ::1], int64[::1], boolean[::1]))"
    "(float64[:, :, ::1], int64[:, ::1], boolean[::1], float64[:, ::1], float64, float64)"
)
def visible_box_pixels(
    corners: np.ndarray,
    counts: np.ndarray,
    refill: np.ndarray,
    fixed_point_affine: np.ndarray,
    low: float,
    high: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed-point pixel corners of the boxes that may touch the view, grouped by channel.

    Args:
        corners: ``(B, 4, 2)`` world corners of ``F`` frames back to back, each frame's
            vehicles then its walkers.
        counts: ``(F, 2)`` vehicles and walkers of each frame.
        refill: ``(B,)`` which boxes to fill again after their group's single fill.
        fixed_point_affine: ``(2, 3)`` world to fixed-point pixels (``affine * FIXED_POINT_SCALE``).
        low, high: fixed-point bounds of the square a box must meet to be kept (the image
            plus a little slack: off-view boxes paint nothing, but cost OpenCV work).

    Returns:
        ``(K, 4, 2)`` int32 corners of the kept boxes (truncated, as ``astype(np.int32)``), the
        ``(2F + 1,)`` bounds of each group (frame ``f``'s vehicles are group ``2f``, its walkers
        ``2f + 1``) and ``(K,)`` their refill flags. Boxes with a NaN corner are dropped.
    """
    pixels = np.empty((len(corners), 4, 2), np.int32)
    kept_refill = np.empty(len(corners), np.bool_)
    bounds = np.zeros(2 * len(counts) + 1, np.int64)
    box, kept = 0, 0
    a00, a01, a02 = fixed_point_affine[0, 0], fixed_point_affine[0, 1], fixed_point_affine[0, 2]
    a10, a11, a12 = fixed_point_affine[1, 0], fixed_point_affine[1, 1], fixed_point_affine[1, 2]
    mapped = np.empty((4, 2))
    for group in range(2 * len(counts)):
        for _ in range(counts[group // 2, group % 2]):
            col_min, col_max, row_min, row_max = np.inf, -np.inf, np.inf, -np.inf
            for c in range(4):
                x, y = corners[box, c, 0], corners[box, c, 1]
                col, row = a00 * x + a01 * y + a02, a10 * x + a11 * y + a12
                mapped[c, 0], mapped[c, 1] = col, row
                col_min, col_max = min(col_min, col), max(col_max, col)
                row_min, row_max = min(row_min, row), max(row_max, row)
            if col_max >= low and col_min <= high and row_max >= low and row_min <= high:
                for c in range(4):
                    pixels[kept, c, 0], pixels[kept, c, 1] = np.int32(mapped[c, 0]), np.int32(mapped[c, 1])
                kept_refill[kept] = refill[box]
                kept += 1
            box += 1
        bounds[group + 1] = kept
    return pixels[:kept].copy(), bounds, kept_refill[:kept].copy()
