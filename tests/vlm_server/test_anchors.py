import numpy as np
import pytest

from vlm_server.anchors import (
    LAT_PHRASES,
    LON_PHRASES,
    NEIGHBOUR_MASK,
    action_class,
    action_index,
    alignment_margin,
    anchor_captions,
    command_index,
    normalised_bonus,
    speed_bin,
)


def test_there_are_720_distinct_captions_in_command_speed_action_order():
    captions = anchor_captions()
    assert len(captions) == 720 == len(set(captions))
    assert captions[0] == (
        "Command is to turn left at the intersection. The car is currently stopped. "
        "Action behavior: The car is braking hard and going straight."
    )
    # command 4 (LANEFOLLOW) row 3, speed bin 2, lon "accelerating" (3), lat "turning left" (4)
    index = ((3 * 4) + 2) * 30 + 3 * 5 + 4
    assert captions[index] == (
        "Command is to follow the current lane. The car is driving at a moderate speed. "
        "Action behavior: The car is accelerating and turning left."
    )


@pytest.mark.parametrize(
    ("command", "row"),
    [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5), (-1, 3), (0, 3), (9, 3)],
)
def test_command_rows_follow_roadoption_minus_one_and_void_is_lane_follow(command, row):
    assert command_index(command) == row


@pytest.mark.parametrize(
    ("speed", "expected"),
    [
        (-1.0, 0),
        (0.0, 0),
        (0.09, 0),
        (0.1, 1),
        (1.99, 1),
        (2.0, 2),
        (4.49, 2),
        (4.5, 3),
        (30.0, 3),
    ],
)
def test_speed_bins_have_the_method_thresholds(speed, expected):
    assert speed_bin(speed) == expected


@pytest.mark.parametrize(
    ("acc", "steer", "lon", "lat"),
    [
        (
            1.0,
            0.0,
            "accelerating fast",
            "going straight",
        ),  # the public code called this idling + right sharply
        (0.5, 0.2, "accelerating", "turning right"),
        (0.2, -0.2, "accelerating gently", "turning left"),
        (0.04, 0.31, "idling", "turning right sharply"),
        (-0.3, -0.31, "braking", "turning left sharply"),
        (-0.6, 0.04, "braking hard", "going straight"),
        (-0.05, 0.0, "idling", "going straight"),
    ],
)
def test_action_is_read_as_acc_then_steer(acc, steer, lon, lat):
    lon_index, lat_index = action_class(acc, steer)
    assert (LON_PHRASES[lon_index], LAT_PHRASES[lat_index]) == (lon, lat)
    assert action_index(acc, steer) == lon_index * 5 + lat_index


def test_neighbour_sets_are_products_of_lon_and_lat_neighbours():
    def idx(lon, lat):
        return LON_PHRASES.index(lon) * 5 + LAT_PHRASES.index(lat)

    a = idx("accelerating", "turning right")
    expected = {
        idx(lon, lat)
        for lon in ("accelerating fast", "accelerating", "accelerating gently")
        for lat in ("turning right", "turning right sharply")
    }
    assert set(np.flatnonzero(NEIGHBOUR_MASK[a])) == expected
    assert set(np.flatnonzero(NEIGHBOUR_MASK[idx("idling", "going straight")])) == {
        idx("idling", "going straight")
    }
    assert NEIGHBOUR_MASK.diagonal().all()


def test_margin_is_executed_probability_minus_best_non_neighbour():
    probs = np.full((2, 30), 0.01)
    a = LON_PHRASES.index("idling") * 5  # idling, straight: only itself is a neighbour
    probs[0, a] = 0.5
    probs[0, 7] = 0.2  # a non-neighbour
    probs[1, a] = 0.1
    probs[1, 7] = 0.3
    np.testing.assert_allclose(alignment_margin(probs, np.array([a, a])), [0.3, 0.0])


def test_neighbours_do_not_count_against_the_margin():
    probs = np.zeros((1, 30))
    a = LON_PHRASES.index("braking") * 5 + 0
    neighbour = LON_PHRASES.index("braking hard") * 5 + 0
    probs[0, a], probs[0, neighbour], probs[0, 29] = 0.4, 0.5, 0.1
    np.testing.assert_allclose(alignment_margin(probs, np.array([a])), [0.3])


def test_bonus_is_quarter_of_clipped_z_score():
    assert normalised_bonus(0.3, 0.1, 0.04) == pytest.approx(0.25 * 1.0)
    assert normalised_bonus(0.15, 0.1, 0.04) == pytest.approx(0.25 * 0.25, rel=1e-6)
    assert normalised_bonus(0.0, 0.5, 0.01) == pytest.approx(-0.25)
    assert normalised_bonus(0.2, 0.2, 0.0) == 0.0
