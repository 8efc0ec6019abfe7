"""The ego's kinematic bicycle model: limits and turning geometry."""

import dataclasses
import math

import pytest

from found_rl.actions import Controls
from found_rl.sim.vehicle_dynamics import VehicleParams, VehicleState, step_vehicle

PARAMS = VehicleParams()


def drive(
    controls: Controls, steps: int, state: VehicleState | None = None
) -> VehicleState:
    state = state or VehicleState(0.0, 0.0, 0.0)
    for _ in range(steps):
        state = step_vehicle(state, controls, 0.1, PARAMS)
    return state


def test_full_throttle_from_rest_accelerates_at_the_limit():
    state = drive(Controls(1.0, 0.0, 0.0), 1)
    assert state.speed_mps == pytest.approx(0.1 * PARAMS.max_accel_mps2 - 0.0, abs=1e-9)
    one_second = drive(Controls(1.0, 0.0, 0.0), 10)
    assert 2.5 < one_second.speed_mps < PARAMS.max_accel_mps2
    assert one_second.y_m == pytest.approx(0.0) and one_second.x_m > 1.0


def test_full_brake_stops_without_reversing():
    moving = VehicleState(0.0, 0.0, 0.0, speed_mps=10.0)
    after = step_vehicle(moving, Controls(0.0, 0.0, 1.0), 0.1, PARAMS)
    assert after.speed_mps == pytest.approx(
        10.0 - 0.1 * (PARAMS.max_brake_mps2 + PARAMS.drag_mps2)
    )
    stopped = drive(Controls(0.0, 0.0, 1.0), 30, moving)
    assert stopped.speed_mps == 0.0
    assert stopped.x_m < 10.0**2 / (2 * PARAMS.max_brake_mps2) + 1.0


def test_speed_never_exceeds_top_speed():
    assert drive(Controls(1.0, 0.0, 0.0), 2000).speed_mps <= PARAMS.max_speed_mps


def test_positive_steer_turns_right_in_the_carla_frame():
    state = drive(
        Controls(0.5, 1.0, 0.0), 5, VehicleState(0.0, 0.0, 0.0, speed_mps=5.0)
    )
    # Less than a quarter turn (at full lock the car circles in about 2 s).
    assert state.yaw_deg < 90.0
    # Heading east, turning right means towards +y (south) with growing yaw.
    assert state.yaw_deg > 0.0 and state.y_m > 0.0


def test_wheel_angle_follows_steer_at_a_limited_rate():
    state = step_vehicle(
        VehicleState(0.0, 0.0, 0.0, speed_mps=5.0), Controls(0.0, 1.0, 0.0), 0.1, PARAMS
    )
    assert state.wheel_angle_deg == pytest.approx(PARAMS.max_steer_rate_dps * 0.1)
    full = drive(Controls(0.0, -1.0, 0.0), 20, state)
    assert full.wheel_angle_deg == pytest.approx(-PARAMS.max_steer_deg)


def test_steady_turn_follows_the_bicycle_radius():
    wheel = 10.0
    params = VehicleParams(max_steer_deg=wheel, drag_mps2=0.0)
    state = VehicleState(0.0, 0.0, 0.0, speed_mps=5.0, wheel_angle_deg=wheel)
    start_yaw = state.yaw_deg
    for _ in range(10):
        state = step_vehicle(state, Controls(0.0, 1.0, 0.0), 0.1, params)
    tan = math.tan(math.radians(wheel))
    beta = math.atan(params.rear_axle_to_centre_m * tan / params.wheelbase_m)
    expected_yaw_rate = (
        5.0 * math.cos(beta) * tan / params.wheelbase_m
    )  # rad/s, 1 s of driving
    assert math.radians(state.yaw_deg - start_yaw) == pytest.approx(
        expected_yaw_rate, rel=1e-6
    )


def test_default_car_turns_tighter_than_a_junction_corner():
    """SUMO's junction-internal lanes turn at about 4 m radius; the ego must follow them."""
    params = dataclasses.replace(VehicleParams(), drag_mps2=0.0)
    state = VehicleState(
        0.0, 0.0, 0.0, speed_mps=3.0, wheel_angle_deg=params.max_steer_deg
    )
    turned = step_vehicle(state, Controls(0.0, 1.0, 0.0), 0.1, params)
    radius_m = 3.0 * 0.1 / math.radians(turned.yaw_deg - state.yaw_deg)
    assert radius_m < 4.0
