"""SUMO <-> CARLA frame conversion against hand-computed poses."""

import numpy as np
import pytest

from found_rl.world.frames import (
    SumoFrame,
    carla_yaw_to_sumo_angle,
    sumo_angle_to_carla_yaw,
    wrap_deg,
)


@pytest.mark.parametrize(
    ("sumo_angle", "carla_yaw"),
    [
        (0.0, -90.0),
        (90.0, 0.0),
        (180.0, 90.0),
        (270.0, 180.0),
        (45.0, -45.0),
        (359.0, -91.0),
    ],
)
def test_headings(sumo_angle, carla_yaw):
    # SUMO: clockwise from north. CARLA: clockwise from east with y south, so north is -90.
    assert sumo_angle_to_carla_yaw(sumo_angle) == pytest.approx(carla_yaw)
    assert carla_yaw_to_sumo_angle(carla_yaw) == pytest.approx(sumo_angle % 360.0)


def test_wrap_is_half_open():
    assert wrap_deg(np.array([-180.0, 180.0, 540.0, -190.0])).tolist() == [
        180.0,
        180.0,
        180.0,
        170.0,
    ]


def test_points_remove_offset_and_flip_y():
    frame = SumoFrame(net_offset=(100.0, 50.0))
    sumo = np.array([[100.0, 50.0], [110.0, 70.0]])
    carla = frame.to_carla_xy(sumo)
    np.testing.assert_allclose(carla, [[0.0, 0.0], [10.0, -20.0]])
    np.testing.assert_allclose(frame.to_sumo_xy(carla), sumo)


def test_a_car_heading_north_keeps_its_heading_vector():
    frame = SumoFrame()
    # Front bumper at (10, 20) heading north (SUMO angle 0), 4 m long: centre 2 m further south.
    centre, yaw = frame.front_to_centre_carla(
        np.array([[10.0, 20.0]]), np.array([0.0]), np.array([2.0])
    )
    np.testing.assert_allclose(centre, [[10.0, -18.0]])
    np.testing.assert_allclose(yaw, [-90.0])
    np.testing.assert_allclose(
        frame.velocity_to_carla(np.array([5.0]), yaw), [[0.0, -5.0]], atol=1e-12
    )


@pytest.mark.parametrize("yaw_deg", [-135.0, -90.0, 0.0, 30.0, 179.0])
def test_centre_to_front_inverts_front_to_centre(yaw_deg):
    frame = SumoFrame(net_offset=(-3.0, 7.5))
    centre = np.array([12.0, -4.0])
    x, y, angle = frame.centre_to_front_sumo_scalar(*centre, yaw_deg, 2.45)
    back, yaw = frame.front_to_centre_carla(
        np.array([[x, y]]), np.array([angle]), np.array([2.45])
    )
    np.testing.assert_allclose(back[0], centre, atol=1e-9)
    assert yaw[0] == pytest.approx(yaw_deg)
    assert (x, y, angle) == pytest.approx(
        frame.centre_to_front_sumo(centre, yaw_deg, 2.45)
    )
