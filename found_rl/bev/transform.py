"""Pure geometry of the BEV: the world-to-pixel affine map and oriented-box corners.

Frames: the world is CARLA's (x east, y south, yaw clockwise from east, degrees). In the image
the ego faces up (row decreasing) and its right-hand side is to the right (column increasing);
integer pixel coordinates are pixel centres, as OpenCV draws and samples them.
"""

from __future__ import annotations

import math

import numpy as np

from found_rl.boxes import box_corners

__all__ = ["apply_affine", "box_corners", "world_to_pixel_affine"]


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
