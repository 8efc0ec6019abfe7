"""Route points in the ego frame, checked against hand geometry on an L-shaped route."""

import numpy as np

from found_rl.routes.ahead import route_arc_m, route_points_ego, world_to_ego
from tests.scenes import l_route


def test_world_to_ego_uses_carla_frame():
    # Heading south (yaw 90 deg in CARLA's y-south frame): a point further south is ahead,
    # a point to the west (smaller x) is on the right.
    ego_xy = np.array([10.0, 10.0])
    points = np.array([[10.0, 15.0], [7.0, 10.0]])
    np.testing.assert_allclose(world_to_ego(points, ego_xy, 90.0), [[5.0, 0.0], [0.0, 3.0]], atol=1e-9)


def test_arc_length_counts_metres_along_the_polyline():
    arc = route_arc_m(l_route())
    assert arc[0] == 0.0 and arc[50] == 50.0 and arc[-1] == 100.0


def test_points_round_the_corner_appear_to_the_right_of_an_eastbound_ego():
    # 2 m before the corner, heading east: 2 m on is the corner itself, 5 m on is 3 m down
    # the southbound leg (to the ego's right, since CARLA's y points south).
    points = route_points_ego(l_route(), [50.0, 53.0], np.array([48.0, 0.0]), 0.0)
    np.testing.assert_allclose(points, [[2.0, 0.0], [2.0, 3.0]], atol=1e-9)


def test_arcs_past_the_end_give_the_last_waypoint():
    points = route_points_ego(l_route(), [99.0, 120.0, 500.0], np.array([50.0, 40.0]), 90.0)
    np.testing.assert_allclose(points, [[9.0, 0.0], [10.0, 0.0], [10.0, 0.0]], atol=1e-9)
