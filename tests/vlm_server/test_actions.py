import math

import pytest

from vlm_server.actions import action_to_controls, controls_to_action


@pytest.mark.parametrize(
    ("acc", "steer", "expected"),
    [
        (0.7, 0.2, (0.7, 0.2, 0.0)),
        (-0.4, -0.9, (0.0, -0.9, 0.4)),
        (0.0, 0.0, (0.0, 0.0, 0.0)),
        (1.5, -2.0, (1.0, -1.0, 0.0)),
    ],
)
def test_action_to_controls_splits_acc_into_throttle_and_brake(acc, steer, expected):
    assert tuple(action_to_controls(acc, steer)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("throttle", "steer", "brake", "expected"),
    [
        (0.6, 0.1, 0.2, (0.6, 0.1)),
        (0.1, -0.3, 0.5, (-0.5, -0.3)),
        (0.0, 0.0, 0.0, (0.0, 0.0)),
        (0.3, 0.0, 0.3, (-0.3, 0.0)),
    ],
)
def test_controls_to_action_picks_the_dominant_pedal(throttle, steer, brake, expected):
    assert controls_to_action(throttle, steer, brake) == pytest.approx(expected)


def test_round_trip_is_identity_inside_the_box():
    for acc in (-1.0, -0.25, 0.0, 0.5, 1.0):
        controls = action_to_controls(acc, 0.3)
        assert controls_to_action(*controls) == pytest.approx((acc, 0.3))


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_action_is_rejected(bad):
    with pytest.raises(ValueError, match="finite"):
        action_to_controls(bad, 0.0)
