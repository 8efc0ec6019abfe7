"""Kinematic bicycle model of the ego car, with actuator limits (pure math, no simulator).

The state is in CARLA's frame (x east, y south, yaw clockwise from east), so positive steer
(CARLA's "turn right") gives a positive (clockwise) yaw rate. Throttle and brake map to a
longitudinal acceleration; the road-wheel angle follows the steer command at a limited rate.
Defaults approximate a mid-size sedan (CARLA's Lincoln MKZ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from found_rl.actions import Controls


@dataclass(frozen=True)
class VehicleParams:
    """Geometry and actuator limits.

    Attributes:
        length_m, width_m: bounding box.
        wheelbase_m: front-to-rear axle distance.
        rear_axle_to_centre_m: distance from the rear axle to the box centre.
        max_accel_mps2: acceleration at full throttle from standstill.
        max_brake_mps2: deceleration at full brake.
        max_speed_mps: top speed (throttle authority fades linearly towards it).
        drag_mps2: coasting deceleration (rolling resistance and drag), applied while moving.
        max_steer_deg: road-wheel angle at steer = ±1. CARLA's cars reach about 70°;
            35° would give a 4.4 m minimum turning radius, wider than the ~4 m junction
            turns of SUMO's networks.
        max_steer_rate_dps: how fast the road-wheel angle can change.
    """

    length_m: float = 4.9
    width_m: float = 2.1
    wheelbase_m: float = 2.9
    rear_axle_to_centre_m: float = 1.45
    max_accel_mps2: float = 3.0
    max_brake_mps2: float = 8.0
    max_speed_mps: float = 25.0
    drag_mps2: float = 0.3
    max_steer_deg: float = 70.0
    max_steer_rate_dps: float = 120.0


@dataclass(frozen=True)
class VehicleState:
    """Pose and motion of the box centre in CARLA's frame.

    Attributes:
        x_m, y_m: box centre.
        yaw_deg: heading, clockwise from east.
        speed_mps: forward speed (>= 0; the model has no reverse gear).
        wheel_angle_deg: current road-wheel angle (positive right).
        accel_mps2: longitudinal acceleration over the last step.
    """

    x_m: float
    y_m: float
    yaw_deg: float
    speed_mps: float = 0.0
    wheel_angle_deg: float = 0.0
    accel_mps2: float = 0.0


def longitudinal_accel(
    controls: Controls, speed_mps: float, params: VehicleParams
) -> float:
    """Acceleration commanded by throttle and brake at the current speed."""
    drive = (
        controls.throttle
        * params.max_accel_mps2
        * max(0.0, 1.0 - speed_mps / params.max_speed_mps)
    )
    resist = controls.brake * params.max_brake_mps2 + (
        params.drag_mps2 if speed_mps > 0.0 else 0.0
    )
    return drive - resist


def step_vehicle(
    state: VehicleState,
    controls: Controls,
    dt_s: float,
    params: VehicleParams = VehicleParams(),
) -> VehicleState:
    """Advance the bicycle model by ``dt_s`` seconds.

    Speed never goes negative (braking stops the car); the wheel angle moves towards
    ``steer * max_steer_deg`` by at most ``max_steer_rate_dps * dt_s``.
    """
    target_wheel = controls.steer * params.max_steer_deg
    max_change = params.max_steer_rate_dps * dt_s
    wheel = state.wheel_angle_deg + min(
        max(target_wheel - state.wheel_angle_deg, -max_change), max_change
    )

    accel = longitudinal_accel(controls, state.speed_mps, params)
    speed = min(max(state.speed_mps + accel * dt_s, 0.0), params.max_speed_mps)
    mean_speed = 0.5 * (state.speed_mps + speed)

    # Slip angle at the box centre for a rear-axle-referenced bicycle.
    tan_wheel = math.tan(math.radians(wheel))
    beta = math.atan(params.rear_axle_to_centre_m * tan_wheel / params.wheelbase_m)
    yaw_rate = mean_speed * math.cos(beta) * tan_wheel / params.wheelbase_m
    yaw_mid = math.radians(state.yaw_deg) + 0.5 * yaw_rate * dt_s
    x = state.x_m + mean_speed * math.cos(yaw_mid + beta) * dt_s
    y = state.y_m + mean_speed * math.sin(yaw_mid + beta) * dt_s
    yaw = math.degrees(math.radians(state.yaw_deg) + yaw_rate * dt_s)
    yaw = (yaw + 180.0) % 360.0 - 180.0
    return VehicleState(x, y, yaw, speed, wheel, (speed - state.speed_mps) / dt_s)
