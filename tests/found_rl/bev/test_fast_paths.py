"""The renderer's fast paths against the general code they shortcut, bit for bit.

Each fast path (plain-Python pre-tests, skipped channels, shared stop-line channels, the 16-bit
static crop, pooling only drawn channels, the cheaper corner construction) must leave every
output byte unchanged, so each is compared with its general counterpart on random scenes with
overlapping boxes, boxes at the view border and many actors.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

import found_rl.bev.renderer as renderer_module
from found_rl.bev import BevConfig, BevRenderer, history, static_map
from found_rl.bev.history import _apart_for_sure, _overlapping, make_history_frame
from found_rl.bev.layers import FIXED_POINT_BITS, FIXED_POINT_SCALE
from found_rl.bev.pooling import MaxPool
from found_rl.bev.renderer import split_static_bits
from found_rl.bev.scenes import GREEN, LANE_Y, RED, YELLOW, boxes, snapshot, stop_lines
from found_rl.bev.static_map import static_raster, value_raster
from found_rl.bev.transform import box_corners, world_to_pixel_affine

CONFIG = BevConfig()
_SIGNS = np.array([[1.0, 1.0, -1.0, -1.0], [-1.0, 1.0, 1.0, -1.0]])


def reference_box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """The original formulation of :func:`box_corners`."""
    heading = np.exp(1j * np.deg2rad(np.asarray(yaw_deg, dtype=np.float64)))
    half_extent = np.asarray(half_extent, dtype=np.float64)
    local = half_extent[:, :1] * _SIGNS[0] + 1j * (half_extent[:, 1:2] * _SIGNS[1])
    centres = np.asarray(xy, dtype=np.float64)
    corners = (centres[:, 0] + 1j * centres[:, 1])[:, None] + local * heading[:, None]
    return np.ascontiguousarray(corners).view(np.float64).reshape(-1, 4, 2)


def random_boxes(rng: np.random.Generator, count: int, spread_m: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xy = rng.uniform(-spread_m, spread_m, (count, 2))
    if rng.random() < 0.3:
        xy = np.round(xy, 1)
    yaw = rng.uniform(-720.0, 720.0, count)
    if rng.random() < 0.3:
        yaw = rng.choice([0.0, 90.0, -90.0, 180.0, -180.0, 45.0, 270.0], count)
    half = rng.uniform(0.0, 3.0, (count, 2))
    return xy, yaw, half


def test_box_corners_match_the_original_formulation():
    rng = np.random.default_rng(11)
    for _ in range(3000):
        xy, yaw, half = random_boxes(rng, int(rng.integers(0, 60)), 500.0)
        np.testing.assert_array_equal(box_corners(xy, yaw, half), reference_box_corners(xy, yaw, half))


def test_plain_python_overlap_pre_test_never_hides_an_overlap():
    rng = np.random.default_rng(12)
    apart_count = 0
    for trial in range(4000):
        count = int(rng.integers(0, 20))
        xy, yaw, half = random_boxes(rng, count, float(rng.choice([3.0, 8.0, 30.0])))
        half = np.maximum(half, 0.8)
        radii = np.hypot(half[:, 0], half[:, 1])
        if _apart_for_sure(xy.tolist(), radii.tolist()):
            apart_count += 1
            assert len(_overlapping(xy, yaw, half, radii)) == 0, trial
    assert apart_count > 500  # the fast path is exercised


def test_pre_test_also_catches_boxes_just_beyond_touching():
    # Circles separated by exactly the margin sum: the numpy test decides (it says "not close").
    half = np.array([[2.3, 1.0], [2.3, 1.0]])
    radius = float(np.hypot(2.3, 1.0))
    gap = 2 * radius + 2 * history._OVERLAP_MARGIN_M
    for dx in (gap - 1e-6, gap, gap + 1e-12, gap + 1e-6):
        xy = np.array([[0.0, 0.0], [dx, 0.0]])
        if _apart_for_sure(xy.tolist(), [radius, radius]):
            assert len(_overlapping(xy, np.zeros(2), half, np.array([radius, radius]))) == 0


def test_history_frame_refills_match_the_numpy_overlap_test(monkeypatch):
    rng = np.random.default_rng(13)
    scenes = [random_scene(rng, time_s=0.0, crowded=True) for _ in range(300)]
    fast = [make_history_frame(scene, CONFIG) for scene in scenes]
    monkeypatch.setattr(history, "_FAST_OVERLAP_MAX_BOXES", 0)
    monkeypatch.setattr(history, "_FAST_FRAME_MAX_BOXES", 0)
    slow = [make_history_frame(scene, CONFIG) for scene in scenes]
    assert sum(len(frame.refill_vehicles) + len(frame.refill_walkers) for frame in slow) > 50
    assert sum(frame.centres is None for frame in fast) > 100  # the plain-Python frames are exercised
    for a, b in zip(fast, slow):
        assert_frames_match(a, b)


def assert_frames_match(small, general) -> None:
    """A plain-Python frame against the numpy one: same boxes, corners to the last bits."""
    assert (small.num_vehicles, small.num_walkers) == (general.num_vehicles, general.num_walkers)
    np.testing.assert_array_equal(small.refill_vehicles, general.refill_vehicles)
    np.testing.assert_array_equal(small.refill_walkers, general.refill_walkers)
    np.testing.assert_allclose(small.points_xy, general.points_xy, rtol=1e-13, atol=1e-12)
    assert small.points_xy.shape == general.points_xy.shape and small.points_xy.dtype == np.float64
    for discs, other in ((small.vehicle_discs, general.vehicle_discs), (small.walker_discs, general.walker_discs)):
        np.testing.assert_allclose(np.reshape(discs, (-1, 3)), np.reshape(other, (-1, 3)), rtol=1e-13)
    assert small.lines.groups == general.lines.groups


def test_plain_python_overlap_test_matches_numpy():
    rng = np.random.default_rng(21)
    found = 0
    for trial in range(3000):
        count = int(rng.integers(0, history._FAST_FRAME_MAX_BOXES + 1))
        xy, yaw, half = random_boxes(rng, count, float(rng.choice([2.0, 4.0, 8.0, 30.0])))
        half = np.maximum(half, 0.8)
        radii = np.hypot(half[:, 0], half[:, 1])
        rad = np.radians(yaw)
        boxes = list(zip(xy[:, 0], xy[:, 1], np.cos(rad), np.sin(rad), half[:, 0], half[:, 1], radii))
        expected = _overlapping(xy, yaw, half, radii).tolist()
        assert history._overlapping_small([tuple(map(float, box)) for box in boxes]) == expected, trial
        found += len(expected)
    assert found > 1000


def test_small_frames_match_general_frames_at_the_edges(monkeypatch):
    # Touching and overlapping boxes, NaN-free degenerate sizes, boxes straddling the view edge.
    rng = np.random.default_rng(22)
    radius = CONFIG.view_radius_m
    scenes = []
    for _ in range(300):
        count = int(rng.integers(1, history._FAST_FRAME_MAX_BOXES + 1))
        angle = rng.uniform(-np.pi, np.pi, count)
        distance = rng.choice([0.0, 2.0, radius - 1.0, radius, radius + 1.5], count)
        xy = np.stack([np.cos(angle) * distance, LANE_Y + np.sin(angle) * distance], axis=1)
        xy[1::2] = xy[::2][: len(xy[1::2])] + rng.uniform(-2.0, 2.0, (len(xy[1::2]), 2))  # overlapping pairs
        num_vehicles = int(rng.integers(0, count + 1))
        yaw = rng.choice([0.0, 90.0, -45.0, float(rng.uniform(-180, 180))], count)
        vehicles = boxes(xy[:num_vehicles], yaw[:num_vehicles], half_extent=(2.3, 1.0)) if num_vehicles else None
        walkers = None
        if count > num_vehicles:
            walkers = boxes(xy[num_vehicles:], yaw[num_vehicles:], half_extent=(0.0, 0.3), prefix="w")
        scenes.append(snapshot(vehicles=vehicles, walkers=walkers))
    small = [make_history_frame(scene, CONFIG) for scene in scenes]
    monkeypatch.setattr(history, "_FAST_FRAME_MAX_BOXES", 0)
    general = [make_history_frame(scene, CONFIG) for scene in scenes]
    assert sum(len(f.refill_vehicles) + len(f.refill_walkers) for f in general) > 100
    for a, b in zip(small, general):
        assert a.centres is None and b.centres is not None
        assert_frames_match(a, b)
    fast = [render_all([scene])[0] for scene in scenes[:60]]
    slow = None
    monkeypatch.undo()
    monkeypatch.setattr(history, "_FAST_FRAME_MAX_BOXES", 0)
    slow = [render_all([scene])[0] for scene in scenes[:60]]
    for (bev, masks, rgb), (slow_bev, slow_masks, slow_rgb) in zip(fast, slow):
        np.testing.assert_array_equal(masks, slow_masks)
        np.testing.assert_array_equal(bev, slow_bev)
        np.testing.assert_array_equal(rgb, slow_rgb)


def test_stop_lines_reused_across_nearby_renders_match_fresh_culling(monkeypatch):
    # The ego wanders by up to a few margins per step: cached culls are reused and refreshed.
    rng = np.random.default_rng(23)
    base = random_scene(rng, 0.0)
    lines = stop_lines([((x, y), (x + 3.0, y + 1.0)) for x, y in rng.uniform(-40, 40, (60, 2))], [RED] * 60)
    scenes, ego_x = [], 0.0
    for step in range(80):
        ego_x += float(rng.choice([0.0, 1.0, 4.9, 5.0, 5.1, -7.0]))
        scene = random_scene(rng, round(0.1 * step, 1), ego_x=ego_x)
        scenes.append(dataclasses.replace(scene, traffic_lights=lines, stop_signs=base.stop_signs))
    fast = render_all(scenes)
    monkeypatch.setattr(renderer_module, "_LINE_CACHE_MARGIN_M", 0.0)
    slow = render_all(scenes)
    for step, ((bev, masks, rgb), (slow_bev, slow_masks, slow_rgb)) in enumerate(zip(fast, slow)):
        np.testing.assert_array_equal(masks, slow_masks, err_msg=f"step {step}")
        np.testing.assert_array_equal(bev, slow_bev, err_msg=f"step {step}")
        np.testing.assert_array_equal(rgb, slow_rgb, err_msg=f"step {step}")


def test_value_raster_decodes_like_the_bit_split():
    rng = np.random.default_rng(14)
    geometry = snapshot().map
    raster = static_raster(geometry, CONFIG.pixels_per_m, CONFIG.marking_width_px, CONFIG.max_static_pixels)
    values = value_raster(raster, 255, CONFIG.solid_marking_value, CONFIG.broken_marking_value)
    assert values is not None and values is value_raster(raster, 255, 255, 120)  # cached
    size = CONFIG.size_px
    for _ in range(50):
        angle, scale = rng.uniform(-np.pi, np.pi), rng.choice([5.0, 1.0, 0.37])
        affine = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0]]) * scale
        affine[:, 2] = rng.uniform(-300.0, 300.0, 2)
        warp = {"flags": cv2.INTER_NEAREST, "borderMode": cv2.BORDER_CONSTANT, "borderValue": 0}
        bits = cv2.warpAffine(raster.bits, affine, (size, size), **warp)
        road, markings, scratch = (np.zeros((size, size), np.uint8) for _ in range(3))
        split_static_bits(bits, road, markings, scratch, CONFIG)
        planes = cv2.warpAffine(values, affine, (size, size), **warp).view(np.uint8).reshape(size, size, 2)
        np.testing.assert_array_equal(planes[..., 0], road)
        np.testing.assert_array_equal(planes[..., 1], markings)


def test_pooling_only_some_channels_equals_pooling_all():
    rng = np.random.default_rng(15)
    pool = MaxPool((15, 192, 192), 2)
    for _ in range(30):
        flags = rng.random(15) < 0.5
        masks = rng.integers(0, 256, (15, 192, 192), dtype=np.uint8)
        masks[~flags] = 0
        runs = renderer_module._runs(flags.tolist())
        np.testing.assert_array_equal(pool(masks, runs), pool(masks))


@pytest.mark.parametrize("flags", [[], [True], [False, True, True, False, True], [True, True, False]])
def test_runs(flags):
    expected = [(k, k + 1) for k, flag in enumerate(flags) if flag]
    merged = []
    for start, stop in expected:
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], stop)
        else:
            merged.append((start, stop))
    assert renderer_module._runs(flags) == merged


def random_scene(rng: np.random.Generator, time_s: float, crowded: bool = False, ego_x: float = 0.0):
    """Vehicles and walkers around (and beyond) the view, often overlapping; stop lines in 3 states."""
    num_vehicles = int(rng.integers(0, 70 if crowded and rng.random() < 0.3 else 12))
    num_walkers = int(rng.integers(0, 25 if crowded and rng.random() < 0.3 else 4))
    spread = float(rng.choice([6.0, 25.0, 45.0, 60.0]))
    ego = (ego_x, LANE_Y)

    def actors(count: int, half: tuple[float, float], prefix: str):
        if count == 0:
            return None
        xy = ego + rng.uniform(-spread, spread, (count, 2))
        return boxes(xy, rng.uniform(-180.0, 180.0, count), half_extent=half, prefix=prefix)

    num_lines = int(rng.integers(0, 8))
    starts = rng.uniform(-50.0, 50.0, (num_lines, 2))
    lines = [((x, y), (x + rng.uniform(-4, 4), y + rng.uniform(-4, 4))) for x, y in starts]
    states = rng.choice([RED, YELLOW, GREEN, 0], num_lines).tolist()  # 0: unknown, not drawn
    signs = [((x, y), (x, y + 3.5)) for x, y in rng.uniform(-40, 40, (int(rng.integers(0, 2)), 2))]
    return snapshot(
        ego,
        float(rng.uniform(-180.0, 180.0)),
        vehicles=actors(num_vehicles, (2.3, 1.0), "v"),
        walkers=actors(num_walkers, (0.3, 0.3), "w"),
        lights=stop_lines(lines, states) if lines else None,
        signs=stop_lines(signs, [RED] * len(signs)) if signs else None,
        time_s=time_s,
    )


def random_episode(seed: int, steps: int) -> list:
    """Consecutive scenes; stop lines stay put (with occasional state changes), as in a town."""
    rng = np.random.default_rng(seed)
    scenes = []
    base = random_scene(rng, 0.0)
    for step in range(steps):
        scene = random_scene(rng, round(0.1 * step, 1), crowded=True, ego_x=0.3 * step)
        lights = base.traffic_lights
        if len(lights) and step % 7 == 0:
            lights = stop_lines(lights.segments.tolist(), rng.choice([RED, YELLOW, GREEN], len(lights)).tolist())
        base = dataclasses.replace(base, traffic_lights=lights)
        scenes.append(dataclasses.replace(scene, traffic_lights=lights, stop_signs=base.stop_signs))
    return scenes


def render_all(scenes: list) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    renderer = BevRenderer(scenes[0].map)
    results = []
    for scene in scenes:
        bev = renderer.render(scene)
        results.append((bev, renderer.last_masks.copy(), renderer.render_rgb()))
    return results


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_paths_render_like_the_general_path(monkeypatch, seed):
    scenes = random_episode(seed, 40)
    fast = render_all(scenes)
    # The general path: every box drawn, numpy overlap test, bit-split static crop.
    monkeypatch.setattr(renderer_module, "any_disc_reaches", lambda discs, x, y: bool(discs))
    monkeypatch.setattr(history, "_FAST_OVERLAP_MAX_BOXES", 0)
    monkeypatch.setattr(history, "_FAST_FRAME_MAX_BOXES", 0)
    monkeypatch.setattr(renderer_module, "_LINE_CACHE_MARGIN_M", 0.0)
    monkeypatch.setattr(static_map, "MAX_VALUE_RASTER_PIXELS", 0)
    slow = render_all(scenes)
    for step, ((bev, masks, rgb), (slow_bev, slow_masks, slow_rgb)) in enumerate(zip(fast, slow)):
        np.testing.assert_array_equal(masks, slow_masks, err_msg=f"step {step}")
        np.testing.assert_array_equal(bev, slow_bev, err_msg=f"step {step}")
        np.testing.assert_array_equal(rgb, slow_rgb, err_msg=f"step {step}")
        np.testing.assert_array_equal(rgb, slow_rgb, err_msg=f"step {step}")


@pytest.mark.parametrize("seed", [3, 4])
def test_pooled_output_and_shared_channels_match_a_fresh_drawing(seed):
    scenes = random_episode(seed, 30)
    renderer = BevRenderer(scenes[0].map)
    pool = MaxPool(renderer.last_masks.shape, 2)
    for scene in scenes:
        bev = renderer.render(scene)
        masks = renderer.last_masks  # reading it fills in the channels shared between slots
        np.testing.assert_array_equal(bev, pool(np.ascontiguousarray(masks)))
        affine = world_to_pixel_affine(scene.ego.xy, scene.ego.yaw_deg, CONFIG.pixels_per_m, CONFIG.ego_pixel)
        for channel, frame in zip(CONFIG.light_channels, renderer._last_frames):
            np.testing.assert_array_equal(masks[channel], draw_every_stop_line(frame.lines, affine))


def draw_every_stop_line(layout, affine: np.ndarray) -> np.ndarray:
    """Every stop line of a layout, unculled, group by group."""
    channel = np.zeros((CONFIG.size_px, CONFIG.size_px), np.uint8)
    for value, start, stop in layout.groups:
        ends = np.ascontiguousarray(layout.points_xy[start:stop]).reshape(-1, 1, 2)
        pixels = cv2.transform(ends, affine * FIXED_POINT_SCALE).astype(np.int32).reshape(-1, 2, 2)
        cv2.polylines(channel, pixels, False, value, CONFIG.stop_line_width_px, cv2.LINE_8, FIXED_POINT_BITS)
    return channel


def test_boxes_at_the_view_border_are_drawn_or_skipped_exactly():
    # Boxes placed all around the view's bounding circle, one per scene: skipping a kind whose
    # boxes cannot reach the view must never lose a pixel.
    radius = CONFIG.view_radius_m
    for angle in np.linspace(-np.pi, np.pi, 48, endpoint=False):
        for extra in (-1.0, 0.0, 0.5, 1.0, 2.5):
            for half in ((2.3, 1.0), (0.8, 0.8)):
                centre = (np.cos(angle) * (radius + extra), LANE_Y + np.sin(angle) * (radius + extra))
                scene = snapshot(vehicles=boxes([centre], [float(np.degrees(angle))], half_extent=half))
                renderer = BevRenderer(scene.map)
                renderer.render(scene)
                reference = np.zeros((CONFIG.size_px, CONFIG.size_px), np.uint8)
                affine = world_to_pixel_affine(scene.ego.xy, 0.0, CONFIG.pixels_per_m, CONFIG.ego_pixel)
                corners = box_corners(np.array([centre]), np.array([np.degrees(angle)]), np.maximum([half], 0.8))
                pixels = cv2.transform(corners.reshape(-1, 1, 2), affine * FIXED_POINT_SCALE).astype(np.int32)
                cv2.fillPoly(reference, pixels.reshape(-1, 4, 2), 255, cv2.LINE_8, FIXED_POINT_BITS)
                np.testing.assert_array_equal(renderer.last_masks[CONFIG.vehicle_channels[-1]], reference)


@pytest.mark.parametrize("pool", [1, 3])
def test_shared_channels_with_other_pool_sizes(pool):
    config = BevConfig(pool=pool)
    scenes = random_episode(5, 20)
    renderer = BevRenderer(scenes[0].map, config)
    size = config.pooled_size_px
    for scene in scenes:
        bev = renderer.render(scene)
        full = renderer.last_masks
        expected = full.reshape(15, size, pool, size, pool).max(axis=(2, 4))
        np.testing.assert_array_equal(bev, expected)

