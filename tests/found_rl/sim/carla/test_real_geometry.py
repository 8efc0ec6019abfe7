"""Town geometry on real libcarla data (``carla.Map`` parses OpenDRIVE in the client, no server).

``data/straight_road.xodr`` is one isolated 20 m road: a whole number of metres (libcarla repeats
its last waypoint), a right lane the topology leaves out, a sidewalk, and an open and a closed
crosswalk outline.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

carla = pytest.importorskip("carla")

from found_rl.sim.carla.town_geometry import extract_town_geometry  # noqa: E402

ROAD = (DATA / "straight_road.xodr").read_text(encoding="utf-8")


def geometry(text: str = ROAD):
    return extract_town_geometry(carla.Map("Straight", text), "straight")


def test_libcarla_repeats_a_whole_metre_lane_s_last_waypoint_and_leaves_a_lane_out_of_the_topology():
    """What the geometry must cope with, as libcarla 0.9.16 does it."""
    town = carla.Map("Straight", ROAD)
    assert {(a.road_id, a.lane_id) for a, _ in town.get_topology()} == {(1, 1)}
    start = next(w for w in town.generate_waypoints(1.0) if w.lane_id == -1)
    ends = [w.s for w in start.next_until_lane_end(1.0)[-2:]]
    assert ends == pytest.approx([20.0, 20.0])


def test_sidewalks_have_no_spike_from_a_repeated_waypoint():
    (sidewalk,) = geometry().sidewalk_polygons
    # The sidewalk lane lies 3.5 to 5.5 m right of the centre line (CARLA frame: +y), along 0..20 m.
    np.testing.assert_allclose(sidewalk.min(axis=0), [0.0, 3.5], atol=0.01)
    np.testing.assert_allclose(sidewalk.max(axis=0), [20.0, 5.5], atol=0.01)


def test_every_polyline_drops_repeated_points():
    town = geometry()
    for polyline in [lane.centerline for lane in town.lanes.values()] + [m.xy for m in town.solid_markings]:
        assert (np.linalg.norm(np.diff(polyline, axis=0), axis=1) > 1e-3).all()


def test_lanes_left_out_of_the_topology_come_from_the_waypoints():
    lanes = geometry().lanes
    assert sorted(lanes) == ["1_0_-1", "1_0_1"]
    np.testing.assert_allclose(lanes["1_0_-1"].centerline[[0, -1]], [[0.0, 1.75], [20.0, 1.75]], atol=0.01)
    np.testing.assert_allclose(lanes["1_0_1"].centerline[[0, -1]], [[20.0, -1.75], [0.0, -1.75]], atol=0.01)


def test_a_road_with_an_empty_topology_still_has_its_lane_and_road_polygon():
    one_way = ROAD.replace(ROAD[ROAD.index("<left>") : ROAD.index("</left>") + len("</left>")], "")
    assert carla.Map("OneWay", one_way).get_topology() == []
    town = geometry(one_way)
    assert list(town.lanes) == ["1_0_-1"] and len(town.road_polygons) == 1


def test_open_and_closed_crosswalk_outlines_both_become_crossings():
    crossings = sorted(geometry().crossing_polygons, key=lambda c: c[:, 0].min())
    assert [len(c) for c in crossings] == [4, 4]
    for crossing, x0 in zip(crossings, (3.5, 13.5)):
        np.testing.assert_allclose(crossing.min(axis=0), [x0, -3.5], atol=0.01)
        np.testing.assert_allclose(crossing.max(axis=0), [x0 + 3.0, 3.5], atol=0.01)
