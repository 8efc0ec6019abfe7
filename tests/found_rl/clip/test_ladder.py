"""The diagnostic ladder on hand-made scorers: each rung says where the image's signal is lost."""

import numpy as np
import pytest

from found_rl.clip.evaluate import score_held_out
from found_rl.clip.ladder import diagnostic_ladder
from tests.found_rl.clip.test_lift import ImageReader, held_out, image_world
from vlm_server.anchors import NUM_ACTIONS


class FlatResidual:
    """A logit-adjusted checkpoint that learnt nothing: its served evidence is flat."""

    objective, context = "logit-adjusted", "command-speed"

    def group_probabilities(self, images, command_rows, speed_bins):
        return np.full((len(images), NUM_ACTIONS), 1.0 / NUM_ACTIONS)


class ImageResidual(ImageReader):
    """A logit-adjusted checkpoint whose served evidence reads the action off the image."""

    objective, context = "logit-adjusted", "command-speed"


def ladder_of(probe, clip):
    frames = image_world()
    scored = held_out(frames)
    return {
        rung.name: rung
        for rung in diagnostic_ladder(
            score_held_out(probe, frames, scored), score_held_out(clip, frames, scored), "probe", "clip"
        )
    }


def test_an_image_reading_probe_above_a_blind_clip_model_puts_the_loss_in_the_contrastive_training():
    rungs = ladder_of(ImageReader(), FlatResidual())
    assert list(rungs) == ["(a) probe", "(b) CLIP model", "(c) served bonus", "(c) learner's bonus"]
    probe, model, served, learner = rungs.values()
    assert probe.auc_lift > 0.3 and probe.shuffled_auc < probe.prior_auc + 0.05
    assert model.auc_lift == pytest.approx(0.0, abs=1e-9)  # evidence x prior = the prior
    assert model.shuffled_auc == pytest.approx(model.auc, abs=1e-12)
    assert served.auc == pytest.approx(0.5) and learner.auc == pytest.approx(0.5)  # flat: every margin is 0
    assert {probe.prior_auc, model.prior_auc, served.prior_auc, learner.prior_auc} == {probe.prior_auc}
    assert learner.top1 is None and probe.top1 > 0.9
    assert set(probe.per_context) == set(model.per_context) == set(served.per_context)


def test_a_clip_model_that_reads_the_image_keeps_its_lift_up_to_the_served_bonus():
    rungs = ladder_of(ImageReader(), ImageResidual())
    model, served = rungs["(b) CLIP model"], rungs["(c) served bonus"]
    assert model.auc_lift > 0.3 and served.auc > 0.9
    assert served.shuffled_auc < 0.75  # the served bonus loses it when the images are shuffled


def test_a_contrastive_checkpoint_serves_its_model_so_rungs_b_and_c_agree():
    rungs = ladder_of(ImageReader(), ImageReader())
    assert rungs["(b) CLIP model"].to_json() | {"name": "", "scores": ""} == (
        rungs["(c) served bonus"].to_json() | {"name": "", "scores": ""}
    )


def test_scores_of_other_frames_are_refused():
    frames = image_world()
    scored = held_out(frames)
    probe = score_held_out(ImageReader(), frames, scored)
    other = score_held_out(ImageReader(), frames, ~scored)
    with pytest.raises(ValueError, match="different frames"):
        diagnostic_ladder(probe, other, "probe", "clip")
