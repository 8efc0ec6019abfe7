"""The supervised action probe (ladder rung (a)) on tiny synthetic worlds.

Where the image names the action, the probe must find it (a clear lift over the prior, lost when
the images are shuffled within contexts); where the action is independent of the image, it must
find nothing (no lift, and shuffling the images changes nothing).
"""

import numpy as np
import pytest
import torch

from found_rl.clip.data import ClipFrames
from found_rl.clip.evaluate import evaluate
from found_rl.clip.probe import ProbeConfig, ProbeScorer, load_probe
from found_rl.clip.probe_training import train_probe
from tests.found_rl.clip.test_lift import ACTIONS, FOLLOW_HIGH, FOLLOW_MODERATE, held_out, make_frames

SIDE = 16
COLOURS = np.array([[230, 30, 30], [30, 230, 30], [30, 30, 230], [230, 230, 30], [30, 230, 230]], np.uint8)


def noisy_images(colour_index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[N, 16, 16, 3]`` flat colours ``COLOURS[colour_index]`` with pixel noise."""
    images = np.repeat(COLOURS[colour_index][:, None, None, :], SIDE, axis=1).repeat(SIDE, axis=2)
    noise = rng.integers(-20, 21, images.shape)
    return np.clip(images.astype(np.int64) + noise, 0, 255).astype(np.uint8)


def image_world(n: int = 400, seed: int = 0) -> ClipFrames:
    """Two contexts drawing the same actions uniformly; the image's colour names the action."""
    rng = np.random.default_rng(seed)
    groups = np.where(rng.random(n) < 0.5, FOLLOW_MODERATE, FOLLOW_HIGH)
    which = rng.integers(len(ACTIONS), size=n)
    return make_frames(groups, ACTIONS[which], noisy_images(which, rng), frames_per_episode=20)


def independent_world(n: int = 400, seed: int = 0) -> ClipFrames:
    """Each context has its favourite action (80 %); the image's colour is drawn apart from the action."""
    rng = np.random.default_rng(seed)
    groups = np.where(rng.random(n) < 0.5, FOLLOW_MODERATE, FOLLOW_HIGH)
    favourite = np.where(groups == FOLLOW_MODERATE, ACTIONS[1], ACTIONS[3])
    actions = np.where(rng.random(n) < 0.8, favourite, rng.choice(ACTIONS, n))
    return make_frames(groups, actions, noisy_images(rng.integers(len(COLOURS), size=n), rng), frames_per_episode=20)


def probe_config(micro_model: str) -> ProbeConfig:
    return ProbeConfig(
        model_name=micro_model, image_size=SIDE, epochs=4, batch_size=32, lr=5e-3, warmup_steps=5, hidden=32
    )


def trained_probe_evaluation(frames: ClipFrames, micro_model: str):
    torch.manual_seed(0)
    scored = held_out(frames)
    trained, run = train_probe(probe_config(micro_model), frames.subset(~scored), {})
    assert run.stopped_by == "--epochs 4"
    return trained, evaluate(ProbeScorer(trained), frames, scored, "test")


def test_where_the_image_names_the_action_the_probe_finds_it(micro_model):
    _, result = trained_probe_evaluation(image_world(), micro_model)
    evidence = result.evidence
    assert evidence.prior_auc < 0.7  # uniform actions: the context says little
    assert evidence.auc_lift > 0.2
    assert evidence.shuffled_auc < evidence.prior_auc + 0.05  # the lift lives in the image
    assert result.quality.top1 > 0.6


def test_where_the_action_is_independent_of_the_image_the_probe_finds_nothing(micro_model):
    _, result = trained_probe_evaluation(independent_world(), micro_model)
    evidence = result.evidence
    assert evidence.prior_auc > 0.75  # the context carries the signal
    assert evidence.auc_lift == pytest.approx(0.0, abs=0.03)
    assert evidence.shuffled_auc == pytest.approx(evidence.model_auc, abs=0.02)


def test_a_saved_probe_scores_as_the_trained_one(tmp_path, micro_model):
    frames = image_world(n=160)
    config = ProbeConfig(model_name=micro_model, image_size=SIDE, epochs=1, batch_size=32, hidden=32)
    trained, _ = train_probe(config, frames.subset(~held_out(frames)), {"held_out_episodes": [0, 4]})
    trained.save(tmp_path / "probe.pt")
    loaded = load_probe(tmp_path / "probe.pt")
    assert loaded.config == config and loaded.record["held_out_episodes"] == [0, 4]
    assert loaded.record["stopped_by"] == "--epochs 1"
    test = frames.subset(held_out(frames))
    args = (test.inputs(slice(None)), test.command_rows, test.speed_bins)
    np.testing.assert_allclose(
        ProbeScorer(loaded).group_probabilities(*args), ProbeScorer(trained).group_probabilities(*args), atol=1e-6
    )


def test_an_untrained_probe_is_the_prior(micro_model):
    """The head's last layer starts at zero: before a step, the probe scores exactly the context prior."""
    frames = image_world(n=160)
    config = ProbeConfig(model_name=micro_model, image_size=SIDE, epochs=1, batch_size=32, lr=1e-12, warmup_steps=1)
    trained, _ = train_probe(config, frames, {})
    probs = ProbeScorer(trained).group_probabilities(frames.inputs(slice(None)), frames.command_rows, frames.speed_bins)
    np.testing.assert_allclose(probs, trained.prior[frames.groups], atol=1e-5)
