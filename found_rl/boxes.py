"""Oriented boxes (vehicles, walkers, the ego): their corners, for every module that needs them.

Frames are CARLA's (x east, y south, yaw clockwise from east, degrees); a box heading
``(cos, sin)`` has its right-hand side at ``(-sin, cos)``.
"""

from __future__ import annotations

import math

import numpy as np

from found_rl.jit import helper, kernel

CORNER_SIGNS = ((1.0, -1.0), (1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0))
"""Box corners as (along, across) signs in drawing order: front-left, front-right, rear-right,
rear-left (across > 0 is the box's right)."""


@helper
def box_corner(
    x: float, y: float, cos: float, sin: float, half_length: float, half_width: float, corner: int
) -> tuple[float, float]:
    """Corner ``corner`` (see :data:`CORNER_SIGNS`) of the box centred at ``(x, y)`` heading
    ``(cos, sin)``: ``(along + i across) * (cos + i sin)`` added to the centre."""
    along, across = CORNER_SIGNS[corner][0] * half_length, CORNER_SIGNS[corner][1] * half_width
    return x + along * cos - across * sin, y + along * sin + across * cos


@kernel("float64[:, :, ::1](float64[:, ::1], float64[::1], float64[:, ::1])")
def _box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    corners = np.empty((len(xy), 4, 2))
    for k in range(len(xy)):
        yaw = math.radians(yaw_deg[k])
        cos, sin = math.cos(yaw), math.sin(yaw)
        for c in range(4):
            corners[k, c, 0], corners[k, c, 1] = box_corner(
                xy[k, 0], xy[k, 1], cos, sin, half_extent[k, 0], half_extent[k, 1], c
            )
    return corners


def box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """Corners of oriented boxes, ``(N, 4, 2)`` float64, in drawing order around each box
    (:data:`CORNER_SIGNS`).

    Args:
        xy: ``(N, 2)`` centres.
        yaw_deg: ``(N,)`` headings.
        half_extent: ``(N, 2)`` half-length along the heading and half-width.
    """
    count = len(yaw_deg)
    return _box_corners(
        np.ascontiguousarray(xy, dtype=np.float64).reshape(count, 2),
        np.ascontiguousarray(yaw_deg, dtype=np.float64).reshape(count),
        np.ascontiguousarray(half_extent, dtype=np.float64).reshape(count, 2),
    )
