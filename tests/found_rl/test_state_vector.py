"""The 18-number state vector (ARCHITECTURE §4): order, frames, the light/stop-sign codes and the
route points ahead."""

from __future__ import annotations

import numpy as np
import pytest

from found_rl.hazards import LightHazard, StopSignHazard
from found_rl.state_vector import ROUTE_POINT_NAMES, STATE_NAMES, STATE_SIZE, state_vector
from found_rl.world import ActorBoxes, EgoState, LightState, MapGeometry, Route, StopLines, WorldSnapshot


def east_route() -> Route:
    """From the origin 30 m east (metre-spaced waypoints)."""
    xy = np.stack([np.arange(31.0), np.zeros(31)], axis=1)
    return Route("r", xy, np.zeros(31), np.full(31, 4, np.int8), ("l",) * 31, 30.0)


def snapshot(
    yaw_deg=0.0, velocity_xy=(0.0, 0.0), throttle=0.0, steer=0.0, brake=0.0, gear=1, xy=(0.0, 0.0)
) -> WorldSnapshot:
    ego = EgoState(
        xy=np.asarray(xy, dtype=np.float64),
        yaw_deg=yaw_deg,
        velocity_xy=np.asarray(velocity_xy, dtype=np.float64),
        half_extent=np.array([2.4, 1.0]),
        throttle=throttle,
        steer=steer,
        brake=brake,
        gear=gear,
    )
    route = east_route()
    return WorldSnapshot(
        0,
        0.0,
        ego,
        ActorBoxes.empty(),
        ActorBoxes.empty(),
        StopLines.empty(),
        StopLines.empty(),
        route,
        MapGeometry("m", (), (), ()),
    )


def light(state: LightState, distance_m: float, remaining_ratio: float = 0.4) -> LightHazard:
    return LightHazard("tl", "lane", state, distance_m, remaining_ratio)


def test_controls_and_no_light():
    state = state_vector(snapshot(throttle=0.5, steer=-0.2, brake=0.0, gear=1), None, None, 0.0)
    assert state.shape == (STATE_SIZE,) == (len(STATE_NAMES),) == (18,) and state.dtype == np.float32
    np.testing.assert_allclose(state[:10], [0.5, -0.2, 0.0, 0.2, 0.0, 0.0, 0.0, -1.0, -1.0, 0.0], atol=1e-7)
    assert STATE_NAMES[10:] == ROUTE_POINT_NAMES == (
        "route_2m_forward", "route_2m_right", "route_5m_forward", "route_5m_right",
        "route_10m_forward", "route_10m_right", "route_20m_forward", "route_20m_right",
    )


def test_route_points_are_ahead_along_the_route_in_tens_of_metres():
    # 1 m left of the route (CARLA y points south: north is -y), 4 m along it, heading east.
    state = state_vector(snapshot(xy=(4.0, -1.0)), None, None, 4.0)
    np.testing.assert_allclose(state[10:], [0.2, 0.1, 0.5, 0.1, 1.0, 0.1, 2.0, 0.1], atol=1e-6)


def test_route_points_turn_with_the_ego_and_stop_at_the_route_end():
    # At 25 m heading south: the route runs to the ego's left (east), and ends 5 m on.
    state = state_vector(snapshot(xy=(25.0, 0.0), yaw_deg=90.0), None, None, 25.0)
    np.testing.assert_allclose(state[10:], [0.0, -0.2, 0.0, -0.5, 0.0, -0.5, 0.0, -0.5], atol=1e-6)


@pytest.mark.parametrize(
    ("yaw_deg", "velocity_xy", "forward_right"),
    [
        (0.0, (4.0, 0.0), (4.0, 0.0)),  # heading east, moving east
        (90.0, (0.0, 3.0), (3.0, 0.0)),  # heading south, moving south
        (90.0, (-2.0, 0.0), (0.0, 2.0)),  # heading south, sliding west = to its right
        (0.0, (0.0, -1.5), (0.0, -1.5)),  # heading east, sliding north = to its left
        (180.0, (5.0, 0.0), (-5.0, 0.0)),  # heading west, moving east = reversing
    ],
)
def test_velocity_is_in_the_ego_frame(yaw_deg, velocity_xy, forward_right):
    state = state_vector(snapshot(yaw_deg=yaw_deg, velocity_xy=velocity_xy), None, None, 0.0)
    np.testing.assert_allclose(state[4:6], forward_right, atol=1e-6)


@pytest.mark.parametrize(
    ("state", "distance_m", "code", "ratio"),
    [
        (LightState.RED, 7.5, 1.0, 0.5),  # clip(7.5 - 5, 0, 5) / 5
        (LightState.RED, 3.0, 1.0, 0.0),  # closer than 5 m
        (LightState.YELLOW, 20.0, 2.0, 1.0),  # farther than 10 m
        (LightState.GREEN, 7.5, 3.0, -1.0),  # the distance ratio is for red or yellow only
    ],
)
def test_light_code_and_distance_ratio(state, distance_m, code, ratio):
    vector = state_vector(snapshot(), light(state, distance_m, remaining_ratio=0.4), None, 0.0)
    assert vector[6] == code
    assert vector[7] == pytest.approx(ratio)
    assert vector[8] == pytest.approx(0.4)


def test_unknown_phase_passes_through_as_minus_one():
    assert state_vector(snapshot(), light(LightState.GREEN, 12.0, remaining_ratio=-1.0), None, 0.0)[8] == -1.0


@pytest.mark.parametrize(("distance_m", "flag"), [(4.0, 1.0), (10.0, 1.0), (12.0, 0.0)])
def test_at_stop_sign_flag_within_ten_metres(distance_m, flag):
    sign = StopSignHazard("stop", "lane", distance_m)
    assert state_vector(snapshot(), None, sign, 0.0)[9] == flag


def test_reverse_gear_scales_by_five():
    assert state_vector(snapshot(gear=-1), None, None, 0.0)[3] == pytest.approx(-0.2)
