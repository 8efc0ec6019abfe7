import itertools

import numpy as np
import pytest

from found_rl.clip.quality import auc, learner_bonuses, prior_probabilities, reward_quality, scored_bonuses
from vlm_server.anchors import NEIGHBOUR_MASK, NUM_ACTIONS, alignment_margin, normalised_bonus
from vlm_server.running_stats import RunningMoments


def test_auc_counts_wins_and_half_ties():
    assert auc([1.0, 2.0], [0.0, 1.5]) == pytest.approx(3 / 4)
    assert auc([1.0], [1.0]) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 4, 30), rng.integers(0, 4, 40)
    brute = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg)])
    assert auc(pos, neg) == pytest.approx(brute)


def far_action(action: int, rng) -> int:
    return int(rng.choice(np.flatnonzero(~NEIGHBOUR_MASK[action])))


@pytest.fixture
def frames():
    rng = np.random.default_rng(1)
    actions = rng.integers(0, NUM_ACTIONS, 400)
    commands = rng.integers(0, 6, 400)
    return rng, actions, commands


def test_a_scorer_that_knows_the_expert_action_scores_one(frames):
    _, actions, commands = frames
    probs = np.full((len(actions), NUM_ACTIONS), 0.1 / (NUM_ACTIONS - 1))
    probs[np.arange(len(actions)), actions] = 0.9
    quality = reward_quality(probs, actions, commands)
    assert quality.auc == pytest.approx(1.0) and quality.top1 == 1.0
    assert quality.bonus_expert.mean > quality.bonus_far.mean
    assert set(quality.per_command_top1.values()) == {1.0}
    assert sum(quality.per_command_frames.values()) == len(actions)


def test_a_scorer_that_prefers_far_actions_scores_below_one_half(frames):
    """The metric can fail: a scorer pointing away from the expert gets less than 0.5.

    Not much less: margins are clipped at 0, so the expert's 0 ties with every far action
    except the preferred one.
    """
    rng, actions, commands = frames
    probs = np.full((len(actions), NUM_ACTIONS), 0.1 / (NUM_ACTIONS - 1))
    wrong = [far_action(a, rng) for a in actions]
    probs[np.arange(len(actions)), wrong] = 0.9
    quality = reward_quality(probs, actions, commands)
    assert quality.auc < 0.5 and quality.top1 == 0.0 and quality.top1_neighbourhood == 0.0
    assert quality.bonus_expert.mean < quality.bonus_far.mean


def test_a_scorer_blind_to_the_action_scores_one_half(frames):
    rng, actions, commands = frames
    probs = rng.dirichlet(np.ones(NUM_ACTIONS), len(actions))
    quality = reward_quality(probs, actions, commands)
    assert quality.auc == pytest.approx(0.5, abs=0.05)
    assert quality.top1 < 0.1


def test_per_command_top1_is_split_by_command():
    actions = np.array([0, 0, 5, 5])
    commands = np.array([0, 0, 3, 3])
    probs = np.full((4, NUM_ACTIONS), 0.01)
    probs[[0, 1, 2], [0, 0, 5]] = 0.7  # frame 3 (follow the lane) is wrong
    probs[3, 20] = 0.7
    quality = reward_quality(probs / probs.sum(1, keepdims=True), actions, commands)
    assert quality.per_command_top1 == {"turn left at the intersection": 1.0, "follow the current lane": 0.5}


def test_prior_is_the_action_frequency_of_each_group():
    probs = prior_probabilities(np.array([0, 0, 0, 2]), np.array([4, 4, 7, 1]), np.array([0, 1]))
    # group 0: counts 1 + (2 at action 4, 1 at action 7) over 30 + 3
    assert probs[0, 4] == pytest.approx(3 / 33) and probs[0, 7] == pytest.approx(2 / 33)
    # group 1 was never seen: the overall frequencies
    assert probs[1, 4] == pytest.approx(3 / 34)
    np.testing.assert_allclose(probs.sum(1), 1.0)


def test_the_learners_bonus_is_the_servers_running_normalisation_in_frame_order(frames):
    """As ``OpenClipScorer.score_batch``: each expert margin updates the moments, then is normalised by them."""
    rng, actions, _ = frames
    probs = rng.dirichlet(np.full(NUM_ACTIONS, 0.3), len(actions))
    stats = RunningMoments()
    served = [normalised_bonus(m, *stats.update(m)[1:]) for m in alignment_margin(probs, actions).tolist()]
    bonuses = learner_bonuses(probs, actions)
    np.testing.assert_allclose(bonuses.expert, served, atol=1e-12)
    np.testing.assert_array_equal(bonuses.expert_margin, scored_bonuses(probs, actions).expert_margin)
    # a far action is normalised by the moments of its own frame: the first frame's are its margin alone
    first = bonuses.frame_of_far == 0
    expected = np.clip((bonuses.far_margin[first] - bonuses.expert_margin[0]) / 1e-4, -1, 1) * 0.25
    np.testing.assert_allclose(bonuses.far[first], expected)


def test_the_learners_bonus_by_hand():
    """Margins 0.5, 0.1, 0.3: moments (0.5, 0), (0.3, 0.04), (0.3, 0.08 / 3) give bonuses 0, -0.25, 0."""
    probs = np.full((3, NUM_ACTIONS), 0.0)
    probs[:, 29] = 0.1  # the best action outside N(0)
    probs[:, 0] = [0.6, 0.2, 0.4]
    probs[:, 5] = 1.0 - probs.sum(axis=1)  # braking, straight: in N(0), so outside the margin
    actions = np.zeros(3, dtype=np.int64)
    margins = alignment_margin(probs, actions)
    np.testing.assert_allclose(margins, [0.5, 0.1, 0.3])
    np.testing.assert_allclose(learner_bonuses(probs, actions).expert, [0.0, -0.25, 0.0], atol=1e-6)  # eps 1e-8
