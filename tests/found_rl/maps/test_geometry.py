"""Static map geometry extracted from SUMO networks."""

import numpy as np
import pytest

from found_rl.maps import (
    build_network,
    extract_map_geometry,
    load_map_geometry,
    network_hash,
    read_network,
)
from found_rl.maps.geometry import lane_polygon, offset_polyline
from found_rl.scenario import parse_scenario


def geometry_for(**generate):
    spec = {"type": "grid", "junctions": 2, "block_length_m": 60, **generate}
    net_path = build_network(
        parse_scenario(
            {"map": {"generate": spec}, "routes": {"random_length_m": 50}}
        ).map
    )
    return net_path, read_network(net_path)


def test_offset_is_to_the_left_in_a_right_handed_frame():
    line = np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0]])
    left = offset_polyline(line, 1.0)
    np.testing.assert_allclose(left[0], [0.0, 1.0])
    np.testing.assert_allclose(
        left[1], [9.0, 1.0]
    )  # mitre corner stays 1 m from both legs
    np.testing.assert_allclose(left[2], [9.0, 10.0])


def test_lane_polygon_has_the_lane_width():
    polygon = lane_polygon(np.array([[0.0, 0.0], [20.0, 0.0]]), 3.2)
    assert polygon[:, 1].max() == pytest.approx(1.6) and polygon[
        :, 1
    ].min() == pytest.approx(-1.6)


def test_one_lane_roads_have_solid_borders_only():
    net_path, net = geometry_for()
    geometry = extract_map_geometry(net, net_path)
    assert geometry.map_id == network_hash(net_path)
    assert geometry.broken_markings == ()
    normal = [lane for lane in geometry.lanes.values() if not lane.is_junction]
    assert len(geometry.solid_markings) == 2 * len(normal)
    assert geometry.sidewalk_polygons and geometry.crossing_polygons
    min_x, min_y, max_x, max_y = geometry.bounds
    for polygon in geometry.road_polygons:
        assert (polygon >= [min_x - 1e-9, min_y - 1e-9]).all() and (
            polygon <= [max_x + 1e-9, max_y + 1e-9]
        ).all()


def test_two_lane_roads_have_broken_lines_and_neighbours():
    net_path, net = geometry_for(lanes=2)
    geometry = extract_map_geometry(net, net_path)
    normal = [lane for lane in geometry.lanes.values() if not lane.is_junction]
    assert len(geometry.broken_markings) == len(normal) // 2
    for lane in normal:
        neighbour = lane.left_neighbor or lane.right_neighbor
        assert neighbour in geometry.lanes
        other = geometry.lanes[neighbour]
        # Neighbours run side by side, one lane width apart.
        gap = np.linalg.norm(
            lane.centerline.mean(axis=0) - other.centerline.mean(axis=0)
        )
        assert gap == pytest.approx(lane.width_m, abs=0.05)


def test_lanes_are_in_the_carla_frame_and_connected():
    net_path, net = geometry_for()
    geometry = extract_map_geometry(net, net_path)
    sumo_lane = net.getLane(
        next(iter(lid for lid in geometry.lanes if not lid.startswith(":")))
    )
    ours = geometry.lanes[sumo_lane.getID()]
    offset = np.asarray(net.getLocationOffset())
    expected = np.asarray(sumo_lane.getShape()) - offset
    expected[:, 1] *= -1.0
    np.testing.assert_allclose(ours.centerline, expected)
    inner = [
        lane
        for lane in geometry.lanes.values()
        if not lane.is_junction and lane.successors
    ]
    assert inner, "some road lanes lead into junctions"
    for lane in inner:
        for successor in lane.successors:
            assert successor in geometry.lanes
            gap = np.linalg.norm(
                geometry.lanes[successor].centerline[0] - lane.centerline[-1]
            )
            assert gap < 0.5


def test_geometry_is_cached_between_calls():
    net_path, net = geometry_for()
    first = load_map_geometry(net_path, net)
    second = load_map_geometry(net_path)
    assert second.map_id == first.map_id
    assert len(second.road_polygons) == len(first.road_polygons)
