"""The learner registry: storage, accepted guidance and tags of each learner, read by the training code."""

from __future__ import annotations

import dataclasses

import pytest

from found_rl.algos.registry import LEARNERS, Storage, learner_entry
from found_rl.guidance_settings import Guidance, GuidanceTerm


def test_every_learner_names_its_storage_and_terms():
    assert {name: entry.storage for name, entry in LEARNERS.items()} == {
        "sac": Storage.REPLAY, "drqv2": Storage.REPLAY, "ppo": Storage.ROLLOUT}
    assert learner_entry("ppo").guidance == (GuidanceTerm.CLIP_BONUS, GuidanceTerm.ADVISOR_BC)


@pytest.mark.parametrize("name", list(LEARNERS))
def test_the_config_has_a_field_for_each_accepted_term_and_for_no_other(name):
    entry = learner_entry(name)
    fields = {item.name for item in dataclasses.fields(entry.config_class)}
    assert {term.value for term in GuidanceTerm} & fields == {term.value for term in entry.guidance}


@pytest.mark.parametrize("name", list(LEARNERS))
def test_actor_step_tags_are_among_the_tags(name):
    entry = learner_entry(name)
    assert entry.actor_step_tags <= entry.tags and "losses/actor_loss" not in entry.tags - entry.actor_step_tags


@pytest.mark.parametrize(
    ("name", "term", "words"),
    [
        ("ppo", "vmr", ["guidance.vmr", "ppo", "Q-learning critic", "ppo accepts: clip_bonus, advisor_bc"]),
        ("ppo", "awag", ["guidance.awag", "advisor_bc"]),
        ("sac", "advisor_bc", ["guidance.advisor_bc", "sac accepts: vmr, awag, clip_bonus"]),
    ],
)
def test_a_term_the_learner_does_not_accept_is_refused_with_the_allowed_list(name, term, words):
    guidance = Guidance.model_validate({term: {"enabled": True}})
    with pytest.raises(ValueError) as error:
        learner_entry(name).check_guidance(guidance)
    for word in words:
        assert word in str(error.value)


def test_an_unknown_learner_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"expected one of 'sac', 'drqv2' or 'ppo', got 'td3'"):
        learner_entry("td3")


def test_guidance_settings_are_handed_on_not_copied():
    guidance = Guidance.model_validate({"vmr": {"enabled": True, "margin": 1.0}, "clip_bonus": {"enabled": True}})

    class Section:  # the run config's learner section, as train/config.py's LearnerConfig
        gamma, tau, batch_size, policy_lr, q_lr, alpha, autotune = 0.9, 0.01, 8, 1e-3, 1e-3, 0.2, True
        drq_pad_px, target_features, update_epochs, num_minibatches = 0, "online_encoder", 2, 2

    from found_rl.models.encoders import NetworkConfig

    for name, entry in LEARNERS.items():
        config = entry.config_from_run(Section(), guidance, NetworkConfig(), 1000)
        for term in entry.guidance:
            if term is not GuidanceTerm.AWAG or not entry.own_defaults:
                assert getattr(config, term.value) is getattr(guidance, term.value), (name, term)
