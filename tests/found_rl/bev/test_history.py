"""History frames: the compiled corner and overlap kernel against plain numpy and shapely
statements of the same geometry, and the choice of frames per age."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from found_rl.bev import BevConfig
from found_rl.bev.history import _OVERLAP_MARGIN_M, make_history_frame
from tests.scenes import EAST_LANE_Y as LANE_Y
from tests.scenes import four_lane_snapshot as snapshot
from tests.scenes import standing_boxes as boxes

CONFIG = BevConfig()


def numpy_box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """``centre + (along + i across) * exp(i yaw)`` for the four corners in drawing order."""
    signs = np.array([1.0, 1.0, -1.0, -1.0]) + 1j * np.array([-1.0, 1.0, 1.0, -1.0])
    local = half_extent[:, :1] * signs.real + 1j * (half_extent[:, 1:] * signs.imag)
    corners = (xy[:, 0] + 1j * xy[:, 1])[:, None] + local * np.exp(1j * np.radians(yaw_deg))[:, None]
    return np.stack([corners.real, corners.imag], axis=-1)


def random_frame_scene(rng: np.random.Generator):
    """Vehicles and walkers, often overlapping or touching, some with degenerate sizes."""
    num_vehicles, num_walkers = int(rng.integers(0, 25)), int(rng.integers(0, 8))
    spread = float(rng.choice([3.0, 8.0, 30.0]))

    def actors(count: int, half: tuple[float, float], prefix: str):
        if count == 0:
            return None
        xy = (0.0, LANE_Y) + rng.uniform(-spread, spread, (count, 2))
        yaw = rng.choice([0.0, 90.0, -45.0, float(rng.uniform(-720, 720))], count)
        return boxes(xy, yaw, half_extent=half, prefix=prefix)

    return snapshot(vehicles=actors(num_vehicles, (2.3, 1.0), "v"), walkers=actors(num_walkers, (0.3, 0.0), "w"))


def oracle_boxes(scene, config: BevConfig) -> tuple[np.ndarray, np.ndarray]:
    """Corners (numpy) and the lower box of each pair whose margin-grown boxes meet (shapely)."""
    parts = [
        (actors.xy, actors.yaw_deg, np.maximum(actors.half_extent * scale, config.min_half_extent_m))
        for actors, scale in ((scene.vehicles, config.vehicle_box_scale), (scene.walkers, config.walker_box_scale))
        if len(actors)
    ]
    if not parts:
        return np.zeros((0, 4, 2)), np.zeros(0, bool)
    xy, yaw, half = (np.concatenate(column) for column in zip(*parts))
    grown = [shapely.Polygon(c) for c in numpy_box_corners(xy, yaw, half + 0.5 * _OVERLAP_MARGIN_M)]
    refill = np.array([any(grown[i].intersects(grown[j]) for j in range(i + 1, len(grown))) for i in range(len(grown))])
    return numpy_box_corners(xy, yaw, half), refill.astype(bool)


@pytest.mark.parametrize("seed", range(2))
def test_frame_corners_and_refills_match_numpy_and_shapely(seed):
    rng = np.random.default_rng(seed)
    refills = 0
    for _ in range(150):
        scene = random_frame_scene(rng)
        frame = make_history_frame(scene, CONFIG)
        corners, refill = oracle_boxes(scene, CONFIG)
        assert (frame.num_vehicles, frame.num_walkers) == (len(scene.vehicles), len(scene.walkers))
        np.testing.assert_allclose(frame.corners, corners, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(frame.refill, refill)
        refills += int(refill.sum())
    assert refills > 100  # the scenes do overlap


def test_walkers_are_inflated_and_floored():
    scene = snapshot(walkers=boxes([(0.0, LANE_Y)], [0.0], half_extent=(0.3, 0.5)))
    corners = make_history_frame(scene, CONFIG).corners[0]
    # Half-extents 0.3 x 2 = 0.6 -> floored to 0.8 along; 0.5 x 2 = 1.0 across.
    np.testing.assert_allclose(np.ptp(corners, axis=0), [1.6, 2.0])


def test_boxes_touching_after_the_margin_count_as_overlapping():
    # Two 2.3 x 1.0 m half-extent boxes side by side with a gap just under / over the margin.
    for gap_m, expected in ((0.29, [True, False]), (0.31, [False, False])):
        scene = snapshot(vehicles=boxes([(0.0, 0.0), (0.0, 2.0 + gap_m)], [0.0, 0.0], half_extent=(2.3, 1.0)))
        assert make_history_frame(scene, CONFIG).refill.tolist() == expected
