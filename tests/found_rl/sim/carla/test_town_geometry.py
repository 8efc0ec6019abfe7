"""Town geometry from waypoints: lanes, markings, the per-town cache."""

from __future__ import annotations

from pathlib import Path

import fake_carla
import numpy as np
import pytest

from found_rl.maps.build import cache_root
from found_rl.sim.carla import town_geometry
from found_rl.sim.carla.town_geometry import extract_town_geometry, load_town_geometry, town_map_id


@pytest.fixture
def town_map():
    return fake_carla.Map(fake_carla.load_town())


def test_lanes_markings_and_road_of_the_recorded_town(town_map):
    geometry = extract_town_geometry(town_map, "x")
    lanes = geometry.lanes
    junction = [k for k, lane in lanes.items() if lane.is_junction]
    assert len(lanes) == 72 and len(junction) == 48  # 4 junctions x 4 arms x 3 ways (no U-turns)
    assert lanes["143_0_-1"].successors == ("180_0_-1", "181_0_-1", "182_0_-1")
    assert lanes["143_0_-1"].width_m == pytest.approx(3.2)
    # Each of the 24 one-lane roads outside junctions is marked solid on both sides; junctions are unmarked.
    assert len(geometry.solid_markings) == 2 * 24 and not geometry.broken_markings
    road = lanes["138_0_-1"].centerline  # eastbound along y = -38.4
    beside = [
        m for m in geometry.solid_markings
        if np.allclose(m.xy[[0, -1], 0], road[[0, -1], 0], atol=0.01) and abs(m.xy[0, 1] + 38.4) < 3
    ]  # fmt: skip
    offsets = {round(float(np.mean(m.xy[:, 1])) + 38.4, 1) for m in beside}
    assert offsets == {-1.6, 1.6}
    assert len(geometry.road_polygons) == 72
    x0, y0, x1, y1 = geometry.bounds
    assert x0 < 0.5 and x1 > 139.5 and y0 < -139.5 and y1 > -0.5


def test_geometry_is_cached_per_town_in_memory_and_on_disk(town_map, monkeypatch):
    map_id = town_map_id(town_map.to_opendrive())
    town_geometry._MEMORY.pop(map_id, None)
    first = load_town_geometry(town_map)
    assert (cache_root() / "carla-geometry" / f"{map_id}-v{town_geometry.GEOMETRY_VERSION}.pkl").is_file()
    assert load_town_geometry(town_map) is first  # memory
    town_geometry._MEMORY.pop(map_id)
    monkeypatch.setattr(town_geometry, "extract_town_geometry", lambda *a: pytest.fail("not read from disk"))
    again = load_town_geometry(town_map)
    assert again.lanes.keys() == first.lanes.keys() and again.map_id == map_id


def test_distinct_points_drops_only_repeats():
    from found_rl.sim.carla.town_geometry import distinct_points

    points = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 0.0], [2.0, 0.0005]])
    np.testing.assert_array_equal(distinct_points(points), [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])


SQUARE = [[0.0, 0.0], [3.0, 0.0], [3.0, 7.0], [0.0, 7.0]]


@pytest.mark.parametrize(
    ("outlines", "counts"),
    [
        ([SQUARE, SQUARE], [4, 4]),  # open outlines
        ([SQUARE + SQUARE[:1], SQUARE + SQUARE[:1]], [5, 5]),  # closed: the first corner repeated
        ([SQUARE, SQUARE + SQUARE[:1]], [5, 4]),  # both, counts in another order than the points
        ([SQUARE + SQUARE[:1], SQUARE], []),  # a file whose outlines could not be read
    ],
)
def test_crosswalk_outlines_open_or_closed_split_into_one_polygon_each(outlines, counts):
    from found_rl.sim.carla.town_geometry import crosswalk_outlines

    shifted = [np.asarray(o) + [10.0 * i, 0.0] for i, o in enumerate(outlines)]
    polygons = crosswalk_outlines(np.concatenate(shifted), counts)
    assert len(polygons) == 2
    for i, polygon in enumerate(polygons):
        np.testing.assert_allclose(polygon, np.asarray(SQUARE) + [10.0 * i, 0.0])


def test_crosswalk_corner_counts_come_from_the_opendrive_outlines():
    from found_rl.sim.carla.town_geometry import crosswalk_corner_counts

    road = Path(__file__).parent / "data" / "straight_road.xodr"  # not via `conftest`: another one may own the name
    assert crosswalk_corner_counts(road.read_text()) == [4, 5]
    assert crosswalk_corner_counts("not xml") == []
