"""Pure geometry of the BEV: the world-to-pixel affine map and oriented-box corners.

Frames: the world is CARLA's (x east, y south, yaw clockwise from east, degrees). In the image
the ego faces up (row decreasing) and its right-hand side is to the right (column increasing);
integer pixel coordinates are pixel centres, as OpenCV draws and samples them.
"""

from __future__ import annotations

import math

import numpy as np


def world_to_pixel_affine(
    ego_xy: np.ndarray,
    ego_yaw_deg: float,
    pixels_per_m: float,
    ego_pixel_rc: tuple[float, float],
) -> np.ndarray:
    """The ``(2, 3)`` float64 map from world ``(x, y, 1)`` to image ``(col, row)``.

    Args:
        ego_xy: ``(2,)`` ego centre, metres.
        ego_yaw_deg: ego heading.
        pixels_per_m: image resolution.
        ego_pixel_rc: ``(row, col)`` where the ego centre lands.
    """
    yaw = math.radians(ego_yaw_deg)
    cos, sin = math.cos(yaw), math.sin(yaw)
    ego_x, ego_y = float(ego_xy[0]), float(ego_xy[1])
    row0, col0 = ego_pixel_rc
    # forward = (cos, sin) and right = (-sin, cos) in the left-handed world frame;
    # col = col0 + ppm * right·(p - ego), row = row0 - ppm * forward·(p - ego).
    return np.array(
        [
            [-pixels_per_m * sin, pixels_per_m * cos, col0 + pixels_per_m * (sin * ego_x - cos * ego_y)],
            [-pixels_per_m * cos, -pixels_per_m * sin, row0 + pixels_per_m * (cos * ego_x + sin * ego_y)],
        ]
    )


def apply_affine(affine: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a ``(2, 3)`` affine map to ``(..., 2)`` points."""
    return points @ affine[:, :2].T + affine[:, 2]


# Box corners as (along, across) signs in drawing order: front-left, front-right, rear-right, rear-left.
_CORNER_SIGNS = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]])


def box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """Corners of oriented boxes, ``(N, 4, 2)`` float64, in drawing order around each box.

    Args:
        xy: ``(N, 2)`` centres.
        yaw_deg: ``(N,)`` headings.
        half_extent: ``(N, 2)`` half-length along the heading and half-width.
    """
    # Complex arithmetic rotates all corners of all boxes in a handful of array operations:
    # (along + i across) * exp(i yaw) turns (1, 0) into the heading and (0, 1) into its right.
    # The local corners are the half-extents with signs flipped (exact), read as complex
    # numbers in place; with a few boxes per call, the number of numpy calls is the cost.
    heading = np.exp(1j * np.deg2rad(np.asarray(yaw_deg, dtype=np.float64)))
    signed = np.asarray(half_extent, dtype=np.float64).reshape(-1, 1, 2) * _CORNER_SIGNS  # (N, 4, 2)
    local = signed.view(np.complex128).reshape(-1, 4)
    centres = np.ascontiguousarray(xy, dtype=np.float64).reshape(-1, 2).view(np.complex128)  # (N, 1)
    corners = centres + local * heading[:, None]
    return corners.view(np.float64).reshape(-1, 4, 2)
