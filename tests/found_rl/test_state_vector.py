"""The 10-number state vector (ARCHITECTURE §4): order, frames and the light/stop-sign codes."""

from __future__ import annotations

import numpy as np
import pytest

from found_rl.hazards import LightHazard, StopSignHazard
from found_rl.state_vector import STATE_NAMES, STATE_SIZE, state_vector
from found_rl.world import ActorBoxes, EgoState, LightState, MapGeometry, Route, StopLines, WorldSnapshot


def snapshot(yaw_deg=0.0, velocity_xy=(0.0, 0.0), throttle=0.0, steer=0.0, brake=0.0, gear=1) -> WorldSnapshot:
    ego = EgoState(
        xy=np.zeros(2),
        yaw_deg=yaw_deg,
        velocity_xy=np.asarray(velocity_xy, dtype=np.float64),
        half_extent=np.array([2.4, 1.0]),
        throttle=throttle,
        steer=steer,
        brake=brake,
        gear=gear,
    )
    route = Route("r", np.zeros((2, 2)), np.zeros(2), np.full(2, 4, np.int8), ("l", "l"), 0.0)
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
    state = state_vector(snapshot(throttle=0.5, steer=-0.2, brake=0.0, gear=1), None)
    assert state.shape == (STATE_SIZE,) == (len(STATE_NAMES),) and state.dtype == np.float32
    np.testing.assert_allclose(state, [0.5, -0.2, 0.0, 0.2, 0.0, 0.0, 0.0, -1.0, -1.0, 0.0], atol=1e-7)


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
    state = state_vector(snapshot(yaw_deg=yaw_deg, velocity_xy=velocity_xy), None)
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
    vector = state_vector(snapshot(), light(state, distance_m, remaining_ratio=0.4))
    assert vector[6] == code
    assert vector[7] == pytest.approx(ratio)
    assert vector[8] == pytest.approx(0.4)


def test_unknown_phase_passes_through_as_minus_one():
    assert state_vector(snapshot(), light(LightState.GREEN, 12.0, remaining_ratio=-1.0))[8] == -1.0


@pytest.mark.parametrize(("distance_m", "flag"), [(4.0, 1.0), (10.0, 1.0), (12.0, 0.0)])
def test_at_stop_sign_flag_within_ten_metres(distance_m, flag):
    sign = StopSignHazard("stop", "lane", distance_m)
    assert state_vector(snapshot(), None, sign)[9] == flag


def test_reverse_gear_scales_by_five():
    assert state_vector(snapshot(gear=-1), None)[3] == pytest.approx(-0.2)
