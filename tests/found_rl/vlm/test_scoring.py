"""Advisor scores against the expert, checked on hand-worked answers."""

import math

import pytest

from found_rl.vlm.scoring import METRICS, command_name, score, score_by_command


def test_scores_by_hand():
    expert = [(0.5, 0.0), (-0.8, 0.1), (0.2, -0.4), (0.0, 0.0)]
    predicted = [(0.4, 0.0), (-0.6, 0.2), None, (0.9, 0.0)]
    # classes: (accelerating, straight) vs (accelerating, straight): agree;
    # (braking hard, right) vs (braking hard, right sharply? no: 0.2 -> right): agree;
    # unparsed: disagree; (idling, straight) vs (accelerating fast, straight): disagree
    result = score(expert, predicted)
    assert result["parse_rate"] == pytest.approx(0.75)
    assert result["mae_acc"] == pytest.approx((0.1 + 0.2 + 0.9) / 3)
    assert result["mae_steer"] == pytest.approx((0.0 + 0.1 + 0.0) / 3)
    assert result["class_agreement"] == pytest.approx(2 / 4)
    assert (result["samples"], result["parsed"]) == (4, 3)
    assert set(METRICS) <= set(result)


def test_nothing_parsed_gives_nan_errors_and_zero_agreement():
    result = score([(0.1, 0.0)], [None])
    assert result["parse_rate"] == 0.0 and result["class_agreement"] == 0.0
    assert math.isnan(result["mae_acc"]) and math.isnan(result["mae_steer"])


def test_per_command_groups_by_road_option():
    report = score_by_command([4, 1, 4], [(0.5, 0.0), (0.5, -0.5), (0.5, 0.0)], [(0.5, 0.0), None, (0.0, 0.0)])
    assert set(report["per_command"]) == {"LANEFOLLOW", "LEFT"}
    assert report["per_command"]["LEFT"]["parse_rate"] == 0.0
    assert report["per_command"]["LANEFOLLOW"]["mae_acc"] == pytest.approx(0.25)
    assert report["per_command"]["LANEFOLLOW"]["class_agreement"] == pytest.approx(0.5)
    assert report["samples"] == 3
    assert command_name(-1) == "VOID" and command_name(9) == "9"


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="as many predictions"):
        score([(0.0, 0.0)], [])


@pytest.mark.parametrize(
    "expert",
    [(0.5, 0.049), (0.8004, 0.0), (-0.5004, -0.3001)],  # each rounds across a class boundary
)
def test_an_answer_that_writes_the_training_target_back_agrees_with_the_expert(expert):
    from found_rl.dataset.text import chat_answer
    from vlm_server.answers import parse_answer

    written = parse_answer(chat_answer(*expert)).action  # what a perfect model answers
    assert score([expert], [written])["class_agreement"] == 1.0
