"""Box corners: the kernel against numpy's complex-number statement, and the order by hand."""

from __future__ import annotations

import numpy as np
import pytest

from found_rl.boxes import box_corners


def numpy_box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """``centre + (along + i across) * exp(i yaw)`` for the four corners in drawing order."""
    signs = np.array([1.0, 1.0, -1.0, -1.0]) + 1j * np.array([-1.0, 1.0, 1.0, -1.0])
    local = half_extent[:, :1] * signs.real + 1j * (half_extent[:, 1:] * signs.imag)
    corners = (xy[:, 0] + 1j * xy[:, 1])[:, None] + local * np.exp(1j * np.radians(yaw_deg))[:, None]
    return np.stack([corners.real, corners.imag], axis=-1)


def test_corners_match_numpy():
    rng = np.random.default_rng(0)
    for count in (0, 1, 7, 60):
        xy, yaw, half = rng.uniform(-500, 500, (count, 2)), rng.uniform(-720, 720, count), rng.uniform(0, 3, (count, 2))
        np.testing.assert_allclose(box_corners(xy, yaw, half), numpy_box_corners(xy, yaw, half), rtol=0, atol=1e-9)


def test_corner_order_for_a_car_heading_east():
    # Front-left, front-right, rear-right, rear-left; with y south, the driver's left is -y.
    corners = box_corners(np.array([[10.0, 5.0]]), np.array([0.0]), np.array([[2.0, 1.0]]))[0]
    np.testing.assert_allclose(corners, [[12.0, 4.0], [12.0, 6.0], [8.0, 6.0], [8.0, 4.0]])


def test_any_numeric_input_is_accepted():
    corners = box_corners([[0, 0]], [90], np.array([[2, 1]], np.float32))[0]
    np.testing.assert_allclose(corners, [[1.0, 2.0], [-1.0, 2.0], [-1.0, -2.0], [1.0, -2.0]], atol=1e-12)


def test_mismatched_shapes_are_an_error():
    with pytest.raises(ValueError):
        box_corners(np.zeros((2, 2)), np.zeros(3), np.zeros((3, 2)))
