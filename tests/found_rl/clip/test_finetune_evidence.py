"""The logit-adjusted objective learns the image's evidence, with the text tower frozen by default.

A trainable text tower lowers the logit-adjusted loss fastest by collapsing the anchors of a
context onto one vector; the evidence is then constant across actions, no gradient reaches
either tower, and the lift over the prior stays 0. These tests build tiny in-memory datasets (no
shards, no downloads) in which the image decides the action within each context, or has nothing
to do with it, and fine-tune a micro model for a few hundred steps.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from found_rl.clip import model as clip_model
from found_rl.clip.data import ClipFrames, EpisodeSplit
from found_rl.clip.finetune import DataInfo, FinetuneConfig, Finetuner, text_tower_parameters
from found_rl.errors import UserError
from tests.found_rl.clip.conftest import MICRO_CONFIG
from vlm_server.anchors import NUM_ACTIONS, action_index
from vlm_server.backends.clip import OpenClipScorer
from vlm_server.clip_checkpoint import load_model, read_checkpoint

SIDE = 16
"""image side, px: two of the micro model's 8 px patches across"""
# two (command row * 4 + speed bin) contexts, each with two far-apart actions (outside each
# other's neighbourhood): braking or accelerating; steering left or right
CONTEXT_ACTIONS = {
    3 * 4 + 1: (action_index(-0.8, 0.0), action_index(0.9, 0.0)),
    0 * 4 + 2: (action_index(0.0, -0.5), action_index(0.4, 0.5)),
}
EPISODES, FRAMES_PER_EPISODE = 40, 24
HELD_OUT = tuple(range(0, EPISODES, 4))
RARER_SHARE = 0.4
"""the second action's share: a prior of 0.6 / 0.4, so evidence must overturn it to lift the AUC"""


@pytest.fixture
def avg_pool_model(monkeypatch) -> str:
    """The micro model, its image tower pooling the patch tokens.

    With one layer that reads only its class token, the tower sees where the bright patch is only
    through the attention weights (found in 1 of 4 seeds within 110 steps); averaging the patch
    tokens, each mixed with its position by the MLP, found it in each of seeds 0-5 within 180.
    """
    config = copy.deepcopy(MICRO_CONFIG)
    config["vision_cfg"]["pool_type"] = "avg"
    monkeypatch.setitem(clip_model.SMALL_CONFIGS, "test-micro-avg", config)
    return "test-micro-avg"


def synthetic_frames(image_decides: bool, seed: int = 0) -> tuple[ClipFrames, np.ndarray]:
    """``(frames, held-out mask)``: dark noisy images with one bright patch, left or right.

    With ``image_decides`` the patch's side names the action within the frame's context (left:
    the first, right: the rarer second); otherwise side and action are drawn independently.
    """
    rng = np.random.default_rng(seed)
    count = EPISODES * FRAMES_PER_EPISODE
    contexts = rng.choice(list(CONTEXT_ACTIONS), size=count)
    second = rng.random(count) < RARER_SHARE
    right = second if image_decides else rng.random(count) < RARER_SHARE
    images = rng.integers(0, 40, (count, SIDE, SIDE, 3), dtype=np.uint8)
    half = SIDE // 2
    for index, is_right in enumerate(right):
        top, left = half * int(rng.integers(2)), half * int(is_right)
        images[index, top : top + half, left : left + half] = 230
    actions = np.array([CONTEXT_ACTIONS[c][int(s)] for c, s in zip(contexts, second)])
    episodes = np.repeat(np.arange(EPISODES), FRAMES_PER_EPISODE)
    frames = ClipFrames(images, np.arange(count)[:, None], contexts * NUM_ACTIONS + actions, episodes, SIDE)
    return frames, np.isin(episodes, HELD_OUT)


def make_finetuner(
    out: Path, model_name: str, image_decides: bool = True, resume: bool = False, **overrides
) -> Finetuner:
    """A run of 22 steps an epoch; 12 epochs by default (the slowest of seeds 0-5 found the patch in 8)."""
    frames, held = synthetic_frames(image_decides)
    settings = {"epochs": 12, "batch_size": 32, "lr": 5e-3, "warmup_steps": 5, **overrides}
    config = FinetuneConfig(model_name, None, SIDE, **settings)
    data = DataInfo("synthetic", "synthetic-sha256", SIDE, EpisodeSplit(HELD_OUT), 0.25)
    return Finetuner(config, frames.subset(~held), frames.subset(held), data, out, resume=resume)


def trained(out: Path, model_name: str, **overrides) -> Finetuner:
    torch.manual_seed(0)
    finetuner = make_finetuner(out, model_name, **overrides)
    finetuner.run(show_progress=False)
    return finetuner


def text_tower_state(model: torch.nn.Module) -> list[torch.Tensor]:
    return [parameter.detach().clone() for parameter in text_tower_parameters(model)]


def test_the_model_learns_evidence_the_image_carries(tmp_path, avg_pool_model):
    """The failure this guards: with the text tower trained (``train_text_tower=True``) the anchors
    of each context collapse within ~10 steps and the lift stays 0.000 (seeds 0-5)."""
    validation = trained(tmp_path / "clip.pt", avg_pool_model).validate()
    assert validation["auc_lift"] > 0.05, validation


def test_the_model_invents_no_evidence_the_image_lacks(tmp_path, avg_pool_model):
    """The lift moves in steps of ~0.04 here (evidence overturning the prior for a context's rarer
    action), so |lift| < 0.02 means no such step; seeds 0-5 all end at 0.000."""
    validation = trained(tmp_path / "clip.pt", avg_pool_model, image_decides=False).validate()
    assert abs(validation["auc_lift"]) < 0.02, validation


@pytest.mark.parametrize("train_text_tower", [False, True])
def test_the_text_tower_is_frozen_unless_asked(tmp_path, micro_model, train_text_tower):
    out = tmp_path / "clip.pt"
    torch.manual_seed(0)
    finetuner = make_finetuner(out, micro_model, epochs=1, train_text_tower=train_text_tower)
    before = text_tower_state(finetuner.model)
    finetuner.run(show_progress=False)
    changed = [not torch.equal(a, b) for a, b in zip(before, text_tower_state(load_model(read_checkpoint(out), out)))]
    if train_text_tower:
        assert any(changed)
        return
    assert not any(changed)
    # the server encodes its anchors from the checkpoint: the very targets training used
    scorer = OpenClipScorer(checkpoint=str(out))
    scorer.load()
    assert finetuner.text_bank is not None
    torch.testing.assert_close(scorer.text_anchors.reshape(finetuner.text_bank.shape), finetuner.text_bank)


def test_the_contrastive_objective_still_trains_the_text_tower(tmp_path, micro_model):
    torch.manual_seed(0)
    finetuner = make_finetuner(tmp_path / "clip.pt", micro_model, epochs=1, objective="contrastive")
    before = text_tower_state(finetuner.model)
    finetuner.run(show_progress=False)
    assert any(not torch.equal(a, b) for a, b in zip(before, text_tower_state(finetuner.model)))


@pytest.mark.parametrize(("saved", "resumed"), [(False, True), (True, False)])
def test_resume_refuses_another_text_tower_setting(tmp_path, micro_model, saved, resumed):
    out = tmp_path / "clip.pt"
    make_finetuner(out, micro_model, epochs=1, train_text_tower=saved).save()
    with pytest.raises(UserError, match=f"trained with train_text_tower={saved}, this run has {resumed}"):
        make_finetuner(out, micro_model, epochs=1, train_text_tower=resumed, resume=True)


def without_text_tower_setting(out: Path) -> None:
    """Make ``out`` look like a checkpoint written before ``train_text_tower`` existed."""
    stored = torch.load(out, weights_only=False)
    del stored["training"]["config"]["train_text_tower"]
    torch.save(stored, out)


def test_a_checkpoint_from_before_the_setting_trained_its_text_tower(tmp_path, micro_model):
    out = tmp_path / "clip.pt"
    make_finetuner(out, micro_model, epochs=1, train_text_tower=True).save()
    without_text_tower_setting(out)
    with pytest.raises(UserError, match="train_text_tower=True, this run has False"):
        make_finetuner(out, micro_model, epochs=1, resume=True)
    assert make_finetuner(out, micro_model, epochs=1, train_text_tower=True, resume=True).step == 0


def test_a_contrastive_run_resumes_whatever_its_text_tower_setting_says(tmp_path, micro_model):
    out = tmp_path / "clip.pt"
    make_finetuner(out, micro_model, epochs=1, objective="contrastive").save()
    without_text_tower_setting(out)
    assert make_finetuner(out, micro_model, epochs=1, objective="contrastive", resume=True).step == 0
