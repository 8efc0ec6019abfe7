"""Image-blind baselines on hand-made samples whose majority and prompt-only answers are known."""

import pytest

from found_rl.vlm.baselines import PromptContext, answer_of, cross_fitted_answers, fit, prompt_buckets
from vlm_server.answers import answer_class

AHEAD = PromptContext(4, 5.0, (8.0, 0.0))  # lane follow, moderate speed, target straight ahead
LEFT = PromptContext(1, 5.0, (8.0, -4.0))  # turn left, target 27 degrees to the left
GO, TURN_LEFT = (0.5, 0.0), (0.5, -0.4)


def test_majority_is_the_most_frequent_class_with_its_median_action():
    answer = answer_of([(0.4, 0.0), (0.5, 0.0), (0.6, 0.01), TURN_LEFT, TURN_LEFT])
    assert answer.action_class == answer_class(GO)
    assert answer.action == pytest.approx((0.5, 0.0))


def test_prompt_only_answers_per_bucket_and_falls_back_to_coarser_ones():
    contexts, actions = [AHEAD] * 4 + [LEFT] * 3, [GO] * 4 + [TURN_LEFT] * 3
    majority, prompt_only = fit(contexts, actions, prompt_only=False), fit(contexts, actions, prompt_only=True)
    assert majority.answer(LEFT).action == pytest.approx(GO)
    assert prompt_only.answer(LEFT).action == pytest.approx(TURN_LEFT)
    assert prompt_only.answer(AHEAD).action == pytest.approx(GO)
    left_at_another_bearing = PromptContext(1, 5.5, (8.0, 0.0))  # same command and speed bin
    assert prompt_buckets(left_at_another_bearing)[1] == prompt_buckets(LEFT)[1]
    assert prompt_only.answer(left_at_another_bearing).action == pytest.approx(TURN_LEFT)
    unseen = PromptContext(2, 0.0, (8.0, 4.0))  # right turn, stopped: only the empty bucket
    assert prompt_only.answer(unseen).action == pytest.approx(GO)


def test_cross_fitting_answers_each_half_from_the_other():
    # episode 0 only goes, episode 1 only turns left, under the same prompt: each half sees the other
    contexts, actions, episodes = [AHEAD] * 4, [GO, GO, TURN_LEFT, TURN_LEFT], [0, 0, 1, 1]
    answers, is_cross_fitted = cross_fitted_answers(contexts, actions, episodes)
    assert is_cross_fitted
    assert [a.action for a in answers["prompt_only"]] == [TURN_LEFT, TURN_LEFT, GO, GO]
    in_sample, is_cross_fitted = cross_fitted_answers(contexts[:2], actions[:2], [0, 0])
    assert not is_cross_fitted and in_sample["majority"][0].action == pytest.approx(GO)
