"""BEV renderer on hand-built scenes: each expected pixel is worked out by hand from the
ARCHITECTURE §4 geometry (192 px, 5 px/m, ego at row 152 = 192 - 40, column 96, heading up)."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

import found_rl.bev.renderer as renderer_module
from found_rl.bev import BevConfig, BevRenderer, static_map
from found_rl.bev.layers import FIXED_POINT_BITS, FIXED_POINT_SCALE
from found_rl.bev.pooling import MaxPool
from found_rl.bev.renderer import split_static_bits
from found_rl.bev.static_map import static_raster, value_raster
from found_rl.bev.transform import box_corners, world_to_pixel_affine
from found_rl.world import Polyline
from tests.scenes import EAST_LANE_Y as LANE_Y
from tests.scenes import GREEN, RED, YELLOW, four_lane_road
from tests.scenes import four_lane_snapshot as snapshot
from tests.scenes import standing_boxes as boxes
from tests.scenes import stop_lines_at as stop_lines

CONFIG = BevConfig()
EGO_ROW, EGO_COL = 152, 96
NOW_VEHICLES = CONFIG.vehicle_channels[-1]
NOW_WALKERS = CONFIG.walker_channels[-1]
NOW_LIGHTS = CONFIG.light_channels[-1]


def centroid_rc(mask: np.ndarray) -> tuple[float, float]:
    rows, cols = np.nonzero(mask)
    if len(rows) == 0:
        raise AssertionError("mask is empty")
    return float(rows.mean()), float(cols.mean())


def render(*snapshots, config: BevConfig = CONFIG) -> BevRenderer:
    renderer = BevRenderer(snapshots[0].map, config)
    for snap in snapshots:
        renderer.render(snap)
    return renderer


def test_default_layout_is_roach():
    renderer = BevRenderer(four_lane_road())
    assert renderer.observation_shape == (15, 96, 96)
    assert list(CONFIG.vehicle_channels) == [3, 4, 5, 6]
    assert list(CONFIG.walker_channels) == [7, 8, 9, 10]
    assert list(CONFIG.light_channels) == [11, 12, 13, 14]
    assert CONFIG.ego_pixel == (EGO_ROW, EGO_COL)


def test_vehicle_ten_metres_ahead_lands_in_vehicle_channel_at_expected_pixel():
    masks = render(snapshot(vehicles=boxes([(10.0, LANE_Y)]))).last_masks
    row, col = centroid_rc(masks[NOW_VEHICLES])
    assert abs(row - (192 - 40 - 10 * 5)) <= 1 and abs(col - 96) <= 1
    assert masks[NOW_VEHICLES][102, 96] == 255
    # a 4.6 m x 2 m car is about 23 x 10 pixels
    assert 180 <= np.count_nonzero(masks[NOW_VEHICLES]) <= 290
    assert not masks[CONFIG.walker_channels[0] : CONFIG.walker_channels[-1] + 1].any()


def test_vehicle_on_the_right_appears_right_of_the_ego():
    # Driving east in CARLA's left-handed frame, +y (south) is the ego's right-hand side.
    masks = render(snapshot(vehicles=boxes([(0.0, LANE_Y + 5.0)]))).last_masks
    row, col = centroid_rc(masks[NOW_VEHICLES])
    assert abs(row - EGO_ROW) <= 1 and abs(col - (96 + 25)) <= 1


@pytest.mark.parametrize(
    ("ego_yaw_deg", "offset_xy", "expected_rc"),
    [
        (90.0, (0.0, 10.0), (102, 96)),  # heading south, actor 10 m south: ahead
        (90.0, (5.0, 0.0), (152, 71)),  # heading south, actor 5 m east: on the left
        (180.0, (-8.0, 0.0), (112, 96)),  # heading west, actor 8 m west: ahead
        (-90.0, (0.0, 4.0), (172, 96)),  # heading north, actor 4 m south: behind
    ],
)
def test_view_rotates_with_the_ego(ego_yaw_deg, offset_xy, expected_rc):
    ego_xy = (0.0, LANE_Y)
    actor = (ego_xy[0] + offset_xy[0], ego_xy[1] + offset_xy[1])
    masks = render(snapshot(ego_xy, ego_yaw_deg, vehicles=boxes([actor], half_extent=(1.0, 1.0)))).last_masks
    row, col = centroid_rc(masks[NOW_VEHICLES])
    assert abs(row - expected_rc[0]) <= 1 and abs(col - expected_rc[1]) <= 1


def test_walker_is_inflated_into_walker_channel_only():
    masks = render(snapshot(walkers=boxes([(6.0, LANE_Y)], half_extent=(0.25, 0.25)))).last_masks
    row, col = centroid_rc(masks[NOW_WALKERS])
    assert abs(row - (152 - 30)) <= 1 and abs(col - 96) <= 1
    # Roach: half-extent x2 then floored at 0.8 m -> a 1.6 m square, about 8 x 8 pixels.
    assert 49 <= np.count_nonzero(masks[NOW_WALKERS]) <= 100
    assert not masks[NOW_VEHICLES].any()


@pytest.mark.parametrize(("state", "value"), [(RED, 255), (YELLOW, 170), (GREEN, 80)])
def test_stop_line_ahead_has_its_light_value(state, value):
    line = ((8.0, 0.0), (8.0, 3.5))  # across the ego's lane, 8 m ahead
    masks = render(snapshot(lights=stop_lines([line], [state]))).last_masks
    assert masks[NOW_LIGHTS][152 - 40, 96] == value
    assert set(np.unique(masks[NOW_LIGHTS])) == {0, value}


def test_stop_line_is_6_px_thick():
    # The line 8 m ahead lies on row 112; 6 px thick, cv2 covers rows 112 -+ 3.
    line = ((8.0, 0.0), (8.0, 3.5))
    masks = render(snapshot(lights=stop_lines([line], [RED]))).last_masks
    assert np.flatnonzero(masks[NOW_LIGHTS][:, EGO_COL]).tolist() == list(range(112 - 3, 112 + 4))


def test_light_state_change_reaches_every_history_frame():
    # The stop-line layout is memoised per line geometry and states; a new state must show.
    line = ((8.0, 0.0), (8.0, 3.5))
    frames = [snapshot(lights=stop_lines([line], [RED if t < 10 else GREEN]), time_s=t / 10) for t in range(16)]
    masks = render(*frames).last_masks
    values = [masks[channel][152 - 40, 96] for channel in CONFIG.light_channels]
    assert values == [255, 255, 80, 80]  # t = 0.0 and 0.5 s red; t = 1.0 s and now (1.5 s) green


def test_culling_stop_lines_keeps_every_visible_pixel():
    # Lines far outside the view are skipped; lines whose thick stroke only grazes the image
    # border must still be drawn exactly as OpenCV draws them.
    near = [((8.0, 0.0), (8.0, 3.5)), ((-20.0, -9.0), (-20.0, -9.0 - 60.0))]
    grazing = [((x, LANE_Y + dy), (x + 2.0, LANE_Y + dy)) for x in (-30.0, 20.0) for dy in (-19.6, 19.6, 19.9)]
    far = [((x, 200.0), (x, 203.5)) for x in np.linspace(-300.0, 300.0, 40)]
    lines = near + grazing + far
    states = [RED, GREEN] + [YELLOW] * len(grazing) + [RED] * len(far)
    masks = render(snapshot(lights=stop_lines(lines, states))).last_masks.copy()
    reference = np.zeros_like(masks[NOW_LIGHTS])
    affine = world_to_pixel_affine(np.array([0.0, LANE_Y]), 0.0, CONFIG.pixels_per_m, CONFIG.ego_pixel)
    for value in sorted({80, 170, 255}):
        for (a, b), state in zip(lines, states):
            if {RED: 255, YELLOW: 170, GREEN: 80}[state] != value:
                continue
            ends = np.array([a, b], dtype=np.float64).reshape(-1, 1, 2)
            pixels = cv2.transform(ends, affine * FIXED_POINT_SCALE).astype(np.int32)
            cv2.polylines(reference, [pixels], False, value, CONFIG.stop_line_width_px, cv2.LINE_8, FIXED_POINT_BITS)
    assert masks[NOW_LIGHTS].any()
    np.testing.assert_array_equal(masks[NOW_LIGHTS], reference)


def test_stop_sign_is_255_in_light_channel():
    masks = render(snapshot(signs=stop_lines([((8.0, 0.0), (8.0, 3.5))], [RED]))).last_masks
    assert masks[NOW_LIGHTS][112, 96] == 255


def test_route_passes_under_the_ego_and_ahead():
    masks = render(snapshot()).last_masks
    route = masks[1]
    assert route[EGO_ROW, EGO_COL] == 255
    assert route[10, EGO_COL] == 255  # the route runs straight ahead out of the view
    # 16 px wide: columns 96 +- 8 are set on a row ahead, 96 +- 12 are not.
    assert route[100, 96 - 7] == 255 and route[100, 96 + 7] == 255
    assert route[100, 96 - 12] == 0 and route[100, 96 + 12] == 0


def test_static_layers_are_cropped_from_the_map():
    masks = render(snapshot()).last_masks
    road, lanes = masks[0], masks[2]
    assert road[EGO_ROW, EGO_COL] == 255
    # The road ends 8.75 m to the ego's left (y = -7): column 96 - 43.75.
    assert road[EGO_ROW, 96 - 40] == 255 and road[EGO_ROW, 96 - 48] == 0
    assert lanes[EGO_ROW, 96 - 44 : 96 - 42].max() == 255  # solid edge
    assert lanes[EGO_ROW, 96 - 10 : 96 - 7].max() == 255  # solid centre line, 1.75 m left
    assert lanes[EGO_ROW, 96 + 8 : 96 + 11].max() == 120  # broken line, 1.75 m right
    assert lanes[EGO_ROW, EGO_COL] == 0


def test_history_shows_past_positions_in_the_current_ego_frame():
    # Ego at 1 m/s, vehicle at 2 m/s ahead of it; render 1.5 s of 0.1 s steps.
    snaps = [
        snapshot((t, LANE_Y), vehicles=boxes([(10.0 + 2.0 * t, LANE_Y)], half_extent=(1.0, 1.0)), time_s=t)
        for t in np.round(np.arange(16) * 0.1, 1)
    ]
    masks = render(*snaps).last_masks
    ego_now_x = 1.5
    for channel, age_s in zip(CONFIG.vehicle_channels, CONFIG.history_s):
        vehicle_x = 10.0 + 2.0 * (1.5 - age_s)
        expected_row = EGO_ROW - 5 * (vehicle_x - ego_now_x)
        row, col = centroid_rc(masks[channel])
        assert abs(row - expected_row) <= 1 and abs(col - 96) <= 1, (age_s, row, expected_row)


def test_history_falls_back_to_the_oldest_frame_early_in_an_episode():
    snaps = [snapshot(vehicles=boxes([(10.0 + t, LANE_Y)]), time_s=t) for t in (0.0, 0.1, 0.2)]
    masks = render(*snaps).last_masks
    oldest, newest = masks[CONFIG.vehicle_channels[0]], masks[NOW_VEHICLES]
    assert np.array_equal(oldest, masks[CONFIG.vehicle_channels[1]])
    assert abs(centroid_rc(oldest)[0] - (152 - 50)) <= 1  # the t = 0 frame
    assert abs(centroid_rc(newest)[0] - (152 - 51)) <= 1  # the t = 0.2 frame


def test_reset_clears_history():
    renderer = render(*[snapshot(vehicles=boxes([(10.0, LANE_Y)]), time_s=t) for t in (0.0, 0.1, 0.2)])
    renderer.reset()
    renderer.render(snapshot(vehicles=boxes([(0.0, LANE_Y + 10.0)]), time_s=0.0))
    for channel in CONFIG.vehicle_channels:
        row, col = centroid_rc(renderer.last_masks[channel])
        assert abs(row - EGO_ROW) <= 1 and abs(col - 146) <= 1


def test_overlapping_boxes_are_filled_without_holes():
    # Two cars overlapping by 2 m. One even-odd fill of both would leave the overlap empty.
    masks = render(snapshot(vehicles=boxes([(10.0, LANE_Y), (12.0, LANE_Y)]))).last_masks
    assert masks[NOW_VEHICLES][152 - 55, 96] == 255
    assert masks[NOW_VEHICLES][152 - 55, 94:99].all()


def test_many_crossing_walkers_fill_their_union():
    # A tight group of walkers crossing ahead; every box's centre pixel must be filled.
    xy = [(5.0 + 0.5 * k, LANE_Y + 0.3 * (k % 3)) for k in range(8)]
    masks = render(snapshot(walkers=boxes(xy, yaw_deg=[20.0 * k for k in range(8)], half_extent=(0.3, 0.3)))).last_masks
    for x, y in xy:
        assert masks[NOW_WALKERS][round(152 - 5 * x), round(96 + 5 * (y - LANE_Y))] == 255


def test_empty_scene_renders_empty_dynamic_channels():
    renderer = BevRenderer(four_lane_road())
    bev = renderer.render(snapshot())
    assert bev.shape == (15, 96, 96) and bev.dtype == np.uint8 and bev.flags.c_contiguous
    assert not bev[3:].any()
    assert bev[0].any() and bev[1].any() and bev[2].any()


def test_actors_outside_the_view_are_not_drawn():
    far = boxes([(30.0 * k + 40.0, LANE_Y) for k in range(20)])  # all more than 38 m ahead
    masks = render(snapshot(vehicles=far)).last_masks
    assert not masks[NOW_VEHICLES].any()


def test_pooled_output_is_the_max_of_each_2x2_block():
    rng = np.random.default_rng(3)
    xy = rng.uniform([-10, -10], [25, 12], size=(30, 2))
    snap = snapshot(
        vehicles=boxes(xy, yaw_deg=rng.uniform(-180, 180, 30)),
        walkers=boxes(xy[:10] + 1.0, half_extent=(0.3, 0.3)),
        lights=stop_lines([((8.0, 0.0), (8.0, 3.5)), ((4.0, -3.5), (4.0, 0.0))], [YELLOW, GREEN]),
    )
    renderer = BevRenderer(snap.map)
    bev = renderer.render(snap)
    full = renderer.last_masks.astype(np.int32)
    expected = np.maximum(
        np.maximum(full[:, 0::2, 0::2], full[:, 0::2, 1::2]), np.maximum(full[:, 1::2, 0::2], full[:, 1::2, 1::2])
    )
    assert np.array_equal(bev, expected)


@pytest.mark.parametrize("pool", [1, 3, 4])
def test_other_pool_sizes(pool):
    config = BevConfig(pool=pool)
    renderer = BevRenderer(four_lane_road(), config)
    bev = renderer.render(snapshot(vehicles=boxes([(10.0, LANE_Y)])))
    assert bev.shape == (15, 192 // pool, 192 // pool)
    full = renderer.last_masks
    size = 192 // pool
    expected = full.reshape(15, size, pool, size, pool).max(axis=(2, 4))
    assert np.array_equal(bev, expected)


def test_render_returns_a_fresh_array_each_call():
    renderer = BevRenderer(four_lane_road())
    first = renderer.render(snapshot(vehicles=boxes([(10.0, LANE_Y)]), time_s=0.0))
    kept = first.copy()
    renderer.render(snapshot(time_s=0.1))
    assert np.array_equal(first, kept)


def test_rgb_colours():
    snap = snapshot(
        vehicles=boxes([(10.0, LANE_Y)]),
        walkers=boxes([(0.0, LANE_Y + 5.0)], half_extent=(0.25, 0.25)),
        lights=stop_lines([((20.0, 0.0), (20.0, 3.5))], [RED]),
        signs=stop_lines([((-5.0, 0.0), (-5.0, 3.5))], [RED]),
    )
    renderer = BevRenderer(snap.map)
    renderer.render(snap)
    rgb = renderer.render_rgb()
    assert rgb.shape == (192, 192, 3) and rgb.dtype == np.uint8
    assert tuple(rgb[102, 96]) == (0, 0, 255)  # vehicle, current frame: blue
    assert tuple(rgb[152, 121]) == (0, 255, 255)  # walker: cyan
    assert tuple(rgb[152, 96]) == (255, 255, 255)  # ego: white
    assert not renderer.last_masks[3:7, 152, 96].any()  # but not in the vehicle channels (Roach)
    assert tuple(rgb[152 - 100, 96]) == (255, 0, 0)  # red light
    assert tuple(rgb[152 + 25, 96]) == (160, 160, 0)  # stop sign
    assert tuple(rgb[152, 96 - 40]) == (46, 52, 54)  # road
    assert tuple(rgb[60, 96 - 6]) == (136, 138, 133)  # route
    assert tuple(rgb[60, 96 - 9]) == (255, 0, 255)  # solid marking
    assert tuple(rgb[60, 96 + 9]) == (255, 140, 255)  # broken marking
    assert tuple(rgb[5, 5]) == (0, 0, 0)  # off the road


def test_rgb_tints_older_frames_towards_white():
    snaps = [
        snapshot(vehicles=boxes([(10.0 + 4 * t, LANE_Y)], half_extent=(0.5, 0.5)), time_s=t)
        for t in np.round(np.arange(16) * 0.1, 1)
    ]
    renderer = render(*snaps)
    rgb = renderer.render_rgb()
    # The -1.5 s frame (vehicle at x = 10) is tinted by 3 * 0.2 = 0.6 towards white.
    assert tuple(rgb[152 - 50, 96]) == (153, 153, 255)


def test_map_change_switches_the_static_raster():
    narrow = four_lane_road("test-other")
    narrow = type(narrow)(
        map_id="test-other",
        road_polygons=(np.array([[-200.0, 0.0], [200.0, 0.0], [200.0, 3.5], [-200.0, 3.5]]),),
        solid_markings=(),
        broken_markings=(),
    )
    renderer = BevRenderer(four_lane_road())
    renderer.render(snapshot())
    assert renderer.last_masks[0][EGO_ROW, 96 - 30] == 255
    renderer.render(snapshot(geometry=narrow, time_s=0.1))
    assert renderer.last_masks[0][EGO_ROW, 96 - 30] == 0 and renderer.last_masks[0][EGO_ROW, EGO_COL] == 255
    assert not renderer.last_masks[2].any()


def test_huge_map_is_rasterised_at_capped_resolution():
    from found_rl.bev.static_map import rasterize_map

    huge = type(four_lane_road())(
        map_id="test-huge",
        road_polygons=(np.array([[-1000.0, -7.0], [1000.0, -7.0], [1000.0, 1000.0], [-1000.0, 1000.0]]),),
        solid_markings=(),
        broken_markings=(),
    )
    raster = rasterize_map(huge, 5.0, 2, max_pixels=2_000_000)
    assert raster.bits.size <= 2_000_000 and raster.pixels_per_m < 5.0
    config = BevConfig(max_static_pixels=2_000_000)
    renderer = BevRenderer(huge, config)
    renderer.render(snapshot(geometry=huge))
    road = renderer.last_masks[0]
    assert road[EGO_ROW, EGO_COL] == 255 and road[EGO_ROW + 30, EGO_COL] == 255  # still road behind
    # About 1 px/m now: the edge 8.75 m to the left (column 52) moves by at most a metre.
    assert road[EGO_ROW, 96 - 35] == 255 and road[EGO_ROW, 96 - 55] == 0


def test_last_masks_is_read_only():
    renderer = render(snapshot())
    with pytest.raises(ValueError):
        renderer.last_masks[0, 0, 0] = 1


def test_render_rgb_before_render_is_an_error():
    with pytest.raises(RuntimeError, match="render"):
        BevRenderer(four_lane_road()).render_rgb()


@pytest.mark.parametrize(
    ("field", "value"),
    [("pool", 5), ("size_px", 0), ("ego_from_bottom_px", 192), ("history_s", ()), ("green_value", 300)],
)
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        BevConfig(**{field: value})


def test_route_index_can_be_given_by_the_caller():
    renderer = BevRenderer(four_lane_road())
    renderer.render(snapshot(), route_index=115)  # waypoint x = 15: the route starts 14 m ahead
    route = renderer.last_masks[1]
    assert route[EGO_ROW, EGO_COL] == 0 and route[152 - 5 * 10, EGO_COL] == 0
    assert route[152 - 5 * 20, EGO_COL] == 255


def test_union_of_many_random_boxes_equals_boxes_drawn_one_at_a_time():
    rng = np.random.default_rng(7)
    count = 40
    xy = rng.uniform([-15.0, -12.0], [25.0, 15.0], size=(count, 2))
    yaw = rng.uniform(-180.0, 180.0, size=count)
    together = render(snapshot(vehicles=boxes(xy, yaw))).last_masks[NOW_VEHICLES].copy()
    one_by_one = np.zeros_like(together)
    for k in range(count):
        single = render(snapshot(vehicles=boxes(xy[k : k + 1], yaw[k : k + 1]))).last_masks[NOW_VEHICLES]
        one_by_one |= single
    assert np.array_equal(together, one_by_one)


def test_time_going_backwards_starts_a_new_history():
    renderer = render(*[snapshot(vehicles=boxes([(10.0, LANE_Y)]), time_s=t) for t in (0.0, 0.1, 0.2, 0.3)])
    renderer.render(snapshot(vehicles=boxes([(0.0, LANE_Y + 10.0)]), time_s=0.0))  # next episode, no reset()
    for channel in CONFIG.vehicle_channels:
        assert abs(centroid_rc(renderer.last_masks[channel])[1] - 146) <= 1


def test_broken_marking_wins_where_it_meets_a_solid_one():
    crossing = type(four_lane_road())(
        map_id="test-crossing-markings",
        road_polygons=(np.array([[-50.0, -7.0], [50.0, -7.0], [50.0, 7.0], [-50.0, 7.0]]),),
        solid_markings=(Polyline(np.array([[-50.0, 0.0], [50.0, 0.0]])),),
        broken_markings=(Polyline(np.array([[5.0, -7.0], [5.0, 7.0]])),),  # crosses it 5 m ahead
    )
    lanes = render(snapshot(geometry=crossing)).last_masks[2]
    centre_line_col = round(96 - 5 * LANE_Y)
    assert lanes[152 - 25, centre_line_col] == 120  # the crossing point
    assert lanes[152 - 40, centre_line_col] == 255  # the solid line elsewhere


# --- widths, reaches and orderings pinned pixel by pixel -------------------------------------


def render_at(snap, route_index: int) -> np.ndarray:
    renderer = BevRenderer(snap.map, CONFIG)
    renderer.render(snap, route_index=route_index)
    return renderer.last_masks


def test_route_is_16_px_wide():
    # cv2 draws a 16 px line over the 17 columns 96 - 8 ... 96 + 8 (both centre-line neighbours).
    row = render(snapshot()).last_masks[1][100]
    assert np.flatnonzero(row).tolist() == list(range(96 - 8, 96 + 9))


def test_route_layer_draws_80_waypoints_from_the_nearest():
    # Waypoint 40 is at x = -60; waypoints 39 ... 119 are drawn, so the route ends at x = 19,
    # 19 m ahead of the ego (row 152 - 95 = 57), plus the line's 8 px round cap (row 49).
    route = render_at(snapshot(), route_index=40)[1]
    column = np.flatnonzero(route[:, EGO_COL])
    assert column.min() == 152 - 5 * 19 - 8
    assert route[152 - 5 * 19, EGO_COL] == 255 and route[EGO_ROW, EGO_COL] == 255


def test_walkers_are_inflated_by_two():
    # Half-extents (0.6, 0.5) m become (1.2, 1.0) m (both above the 0.8 m floor): the box spans
    # rows 122 -+ 6 and columns 96 -+ 5 (edges inclusive).
    masks = render(snapshot(walkers=boxes([(6.0, LANE_Y)], half_extent=(0.6, 0.5)))).last_masks
    rows, cols = np.nonzero(masks[NOW_WALKERS])
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (116, 128, 91, 101)


def test_a_vehicle_turned_45_degrees_clockwise_points_up_and_to_the_right():
    # Heading 45 deg (CARLA: clockwise, south-east): its front half lies up-right of its centre
    # (row 102, column 96) in the image, its rear half down-left; the other diagonal stays empty.
    masks = render(snapshot(vehicles=boxes([(10.0, LANE_Y)], yaw_deg=[45.0]))).last_masks
    vehicles = masks[NOW_VEHICLES]
    assert vehicles[95, 103] == 255 and vehicles[109, 89] == 255  # 7 px along each diagonal
    assert vehicles[95, 89] == 0 and vehicles[109, 103] == 0


@pytest.mark.parametrize(
    ("states", "value"),
    [((RED, GREEN), 255), ((GREEN, RED), 255), ((YELLOW, GREEN), 170), ((GREEN, YELLOW), 170)],
)
def test_where_stop_lines_cross_the_higher_value_wins(states, value):
    # One line across the lane 8 m ahead, one along the lane centre through it: they cross at
    # row 112, column 96; the listing order of the lights must not matter.
    lines = [((8.0, -1.0), (8.0, 4.5)), ((5.0, LANE_Y), (11.0, LANE_Y))]
    masks = render(snapshot(lights=stop_lines(lines, list(states)))).last_masks
    assert masks[NOW_LIGHTS][152 - 40, 96] == value


def test_history_frames_are_1_5_1_0_0_5_s_old_and_now():
    # A vehicle moving 5 m/s past a standing ego for 2 s: at -1.5, -1.0, -0.5 s and now it is at
    # x = 2.5, 5.0, 7.5 and 10.0 m, rows 152 - 5 x (hand-computed, not read from the config).
    snaps = [
        snapshot(vehicles=boxes([(5.0 * t, LANE_Y)], half_extent=(1.0, 1.0)), time_s=t)
        for t in np.round(np.arange(21) * 0.1, 1)
    ]
    masks = render(*snaps).last_masks
    rows = [centroid_rc(masks[channel])[0] for channel in (3, 4, 5, 6)]
    np.testing.assert_allclose(rows, [152 - 12.5, 152 - 25.0, 152 - 37.5, 152 - 50.0], atol=1.0)


# --- caches and skipped work against the plain drawing, on random scenes -------------------


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


@pytest.mark.parametrize("pool", [2, 3, 4, 6, 8])
def test_every_pool_size_is_the_max_of_each_block(pool):
    """Power-of-two pools run as 2 x 2 pools in turn, the others row then column: both exact."""
    rng = np.random.default_rng(pool)
    masks = (rng.random((15, 192, 192)) < 0.05).astype(np.uint8) * rng.integers(1, 256, (15, 1, 1), np.uint8)
    size = 192 // pool
    expected = masks.reshape(15, size, pool, size, pool).max(axis=(2, 4))
    pooled = MaxPool(masks.shape, pool)(masks)
    assert pooled.flags.c_contiguous
    np.testing.assert_array_equal(pooled, expected)
    runs = [(0, 3), (7, 9)]
    np.testing.assert_array_equal(MaxPool(masks.shape, pool)(masks, runs)[3:7], 0)


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
def test_cached_line_culls_and_the_16_bit_crop_render_like_the_plain_path(monkeypatch, seed):
    scenes = random_episode(seed, 40)
    fast = render_all(scenes)
    # The plain path: stop lines culled afresh every render, bit-split static crop.
    monkeypatch.setattr(renderer_module, "_LINE_CACHE_MARGIN_M", 0.0)
    monkeypatch.setattr(static_map, "MAX_VALUE_RASTER_PIXELS", 0)
    slow = render_all(scenes)
    for step, ((bev, masks, rgb), (slow_bev, slow_masks, slow_rgb)) in enumerate(zip(fast, slow)):
        np.testing.assert_array_equal(masks, slow_masks, err_msg=f"step {step}")
        np.testing.assert_array_equal(bev, slow_bev, err_msg=f"step {step}")
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
