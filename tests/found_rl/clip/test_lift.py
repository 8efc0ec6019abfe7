"""The lift over the caption prior, per context, and the shuffle control, on tiny synthetic frames.

Two worlds: in one the image decides the action (the lift is large and vanishes when the images
are shuffled within contexts), in the other the context decides it (the lift is nil and the
shuffle changes nothing).
"""

import numpy as np
import pytest

from found_rl.clip.data import ClipFrames
from found_rl.clip.evaluate import ANCHOR_GROUPS, RecordedPriors, evaluate
from found_rl.clip.lift import context_name, shuffle_within_groups
from found_rl.clip.quality import prior_table
from vlm_server.anchors import NEIGHBOUR_MASK, NUM_ACTIONS

FOLLOW_MODERATE, FOLLOW_HIGH, LEFT_STOPPED = 3 * 4 + 2, 3 * 4 + 3, 0
ACTIONS = np.array([0, 7, 13, 21, 29])  # pairwise outside each other's neighbourhoods
assert not NEIGHBOUR_MASK[np.ix_(ACTIONS, ACTIONS)][~np.eye(len(ACTIONS), dtype=bool)].any()


def make_frames(groups: np.ndarray, actions: np.ndarray, images: np.ndarray, frames_per_episode: int) -> ClipFrames:
    n = len(groups)
    return ClipFrames(
        pool=images,
        stack_rows=np.arange(n)[:, None],
        caption_ids=groups * NUM_ACTIONS + actions,
        episodes=np.arange(n) // frames_per_episode,
        input_size=images.shape[1],
    )


class ImageReader:
    """Reads the action off pixel (0, 0, 0): the model every image-reading reward should be."""

    def group_probabilities(self, images, command_rows, speed_bins):
        probs = np.full((len(images), NUM_ACTIONS), 0.1 / (NUM_ACTIONS - 1))
        probs[np.arange(len(images)), images[:, 0, 0, 0].astype(np.int64)] = 0.9
        return probs


class CaptionReader:
    """Scores the action frequencies of the frame's (command, speed): never looks at the image."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def group_probabilities(self, images, command_rows, speed_bins):
        return self.table[np.asarray(command_rows) * 4 + np.asarray(speed_bins)]


def image_world(n: int = 1200, seed: int = 0) -> ClipFrames:
    """Both contexts draw the same actions uniformly; the image names the action."""
    rng = np.random.default_rng(seed)
    groups = np.where(rng.random(n) < 0.5, FOLLOW_MODERATE, FOLLOW_HIGH)
    actions = rng.choice(ACTIONS, n)
    images = rng.integers(100, 256, (n, 4, 4, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = actions
    return make_frames(groups, actions, images, frames_per_episode=20)


def context_world(n: int = 1200, seed: int = 0) -> ClipFrames:
    """Each context has its own favourite action (80 %); the images are noise."""
    rng = np.random.default_rng(seed)
    groups = np.where(rng.random(n) < 0.5, FOLLOW_MODERATE, FOLLOW_HIGH)
    favourite = np.where(groups == FOLLOW_MODERATE, ACTIONS[1], ACTIONS[3])
    actions = np.where(rng.random(n) < 0.8, favourite, rng.choice(ACTIONS, n))
    images = rng.integers(0, 256, (n, 4, 4, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = rng.choice(ACTIONS, n)  # an image reader would read a random usual action
    return make_frames(groups, actions, images, frames_per_episode=20)


def held_out(frames: ClipFrames) -> np.ndarray:
    return frames.episodes % 4 == 0


def test_when_the_image_decides_the_lift_is_large_and_the_shuffle_removes_it():
    frames = image_world()
    result = evaluate(ImageReader(), frames, held_out(frames), "test")
    evidence = result.evidence
    assert result.quality.auc > 0.95 and evidence.model_auc == result.quality.auc  # contrastive: served = model
    assert evidence.prior_auc < 0.7  # uniform actions: the caption says little
    assert evidence.auc_lift == pytest.approx(evidence.model_auc - evidence.prior_auc)
    assert evidence.auc_lift > 0.3
    # the lift is gone; what is left is that a shuffled image still names one of the context's
    # usual actions (a far action outside them never scores), about what the prior knows
    assert evidence.shuffled_auc - evidence.prior_auc < 0.05
    assert set(evidence.per_context) == {"follow the current lane / moderate", "follow the current lane / high"}
    assert all(context.auc_lift > 0.3 for context in evidence.per_context.values())


def test_when_the_context_decides_there_is_no_lift_and_the_shuffle_changes_nothing():
    frames = context_world()
    train = frames.subset(~held_out(frames))
    scorer = CaptionReader(prior_table(train.groups, train.action_ids, ANCHOR_GROUPS))
    result = evaluate(scorer, frames, held_out(frames), "test")
    evidence = result.evidence
    assert evidence.prior_auc > 0.75  # the caption carries the signal
    assert evidence.auc_lift == pytest.approx(0.0, abs=1e-12)
    assert evidence.shuffled_auc == pytest.approx(result.quality.auc, abs=1e-12)
    assert evidence.shuffled_auc > evidence.prior_auc - 0.01


def test_an_image_reader_in_the_context_world_keeps_nothing_under_the_shuffle():
    """Noise images name random actions: no lift, before or after the shuffle (the metric can fail)."""
    frames = context_world()
    result = evaluate(ImageReader(), frames, held_out(frames), "test")
    assert result.evidence.auc_lift < 0.0
    assert result.evidence.shuffled_auc < result.evidence.prior_auc


def test_contexts_with_too_few_frames_are_skipped_and_named():
    frames = image_world(n=400)
    rare = np.flatnonzero(held_out(frames))[:5]
    caption_ids = frames.caption_ids.copy()
    caption_ids[rare] = LEFT_STOPPED * NUM_ACTIONS + frames.action_ids[rare]
    frames = ClipFrames(frames.pool, frames.stack_rows, caption_ids, frames.episodes, frames.input_size)
    evidence = evaluate(ImageReader(), frames, held_out(frames), "test", min_context_frames=20).evidence
    assert evidence.skipped_contexts == {"turn left at the intersection / stopped": 5}
    assert "turn left at the intersection / stopped" not in evidence.per_context
    assert sum(c.frames for c in evidence.per_context.values()) == int(held_out(frames).sum()) - 5


def test_a_logit_adjusted_scorer_is_measured_on_its_residual_times_the_prior():
    """A residual that learned nothing is flat: the served AUC is one half, and the model's
    p(a | image, context) = residual x prior is exactly the prior (no lift)."""
    frames = context_world()

    class FlatResidual:
        objective, context = "logit-adjusted", "command-speed"

        def group_probabilities(self, images, command_rows, speed_bins):
            return np.full((len(images), NUM_ACTIONS), 1.0 / NUM_ACTIONS)

    result = evaluate(FlatResidual(), frames, held_out(frames), "test")
    assert result.quality.auc == pytest.approx(0.5)
    assert result.evidence.model_auc == pytest.approx(result.evidence.prior_auc, abs=1e-9)
    assert result.evidence.auc_lift == pytest.approx(0.0, abs=1e-9)

    class ImageResidual(ImageReader):
        objective, context = "logit-adjusted", "command-speed"

    image = image_world()
    evidence = evaluate(ImageResidual(), image, held_out(image), "test").evidence
    assert evidence.auc_lift > 0.3 and evidence.shuffled_auc - evidence.prior_auc < 0.05


def test_the_shuffle_stays_within_each_group_and_is_seeded():
    groups = np.array([1, 2, 1, 1, 2, 3, 1])
    order = shuffle_within_groups(groups, seed=4)
    np.testing.assert_array_equal(groups[order], groups)
    assert sorted(order) == list(range(len(groups))) and order[5] == 5
    np.testing.assert_array_equal(order, shuffle_within_groups(groups, seed=4))


def test_without_training_frames_the_recorded_prior_is_used():
    frames = image_world(n=200)
    everything = np.ones(len(frames), dtype=bool)
    assert evaluate(ImageReader(), frames, everything, "whole").evidence is None
    table = np.full((ANCHOR_GROUPS, NUM_ACTIONS), 1.0 / NUM_ACTIONS)
    result = evaluate(ImageReader(), frames, everything, "whole", recorded=RecordedPriors(table, table))
    assert result.evidence.prior_auc == pytest.approx(0.5)


def test_context_names():
    assert context_name(0) == "turn left at the intersection / stopped"
    assert context_name(FOLLOW_HIGH) == "follow the current lane / high"
