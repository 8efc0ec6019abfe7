"""SAC learner: tags, guidance wiring, configuration errors, NaN stop."""

import dataclasses

import numpy as np
import pytest
import torch

from found_rl.algos import make_config, parse_algorithm
from found_rl.algos.sac import (
    ACTOR_TAGS,
    AWAG_TAGS,
    CLIP_TAGS,
    CRITIC_TAGS,
    LABEL_TAGS,
    SAC,
    VMR_TAGS,
    SacConfig,
)
from found_rl.models.encoders import EncoderConfig, NetworkConfig
from found_rl.models.observation import ObsSpec
from found_rl.storage.replay import ReplaySamples

TINY = NetworkConfig(
    encoder=EncoderConfig(
        conv_channels=(4, 4, 4, 4),
        bottleneck_channels=2,
        state_hidden=(8, 8),
        features_dim=16,
    ),
    actor_hidden=(16,),
    critic_hidden=(16,),
)
DRIVING = ObsSpec(bev_shape=(15, 16, 16), state_dim=10)


def driving_batch(batch_size: int = 8, labelled: float = 1.0, seed: int = 0) -> ReplaySamples:
    gen = torch.Generator().manual_seed(seed)

    def obs():
        return {
            "bev": torch.randint(0, 256, (batch_size, 15, 16, 16), generator=gen, dtype=torch.uint8),
            "state": torch.randn(batch_size, 10, generator=gen),
        }

    has = (torch.arange(batch_size) < labelled * batch_size).float()
    return ReplaySamples(
        observations=obs(),
        actions=torch.rand(batch_size, 2, generator=gen) * 2 - 1,
        rewards=torch.randn(batch_size, generator=gen),
        next_observations=obs(),
        dones=torch.zeros(batch_size),
        has_advisor=has,
        advisor_actions=(torch.rand(batch_size, 2, generator=gen) * 2 - 1) * has[:, None],
        has_clip=has,
        clip_bonus=torch.full((batch_size,), 0.25) * has,
    )


def test_update_reports_every_tag_on_an_actor_step():
    config = SacConfig(network=TINY, guidance=("vmr", "awag", "clip_bonus"), drq_pad_px=2)
    sac = SAC(DRIVING, 2, config)
    sac.update(driving_batch(), global_step=1)  # critic only: the actor waits policy_frequency updates
    logs = sac.update(driving_batch(), global_step=2)
    expected = set(CRITIC_TAGS + ACTOR_TAGS + LABEL_TAGS + VMR_TAGS + AWAG_TAGS + CLIP_TAGS)
    assert set(logs) == expected
    assert all(np.isfinite(value) for value in logs.values())


def test_critic_only_step_skips_actor_tags():
    logs = SAC(DRIVING, 2, SacConfig(network=TINY)).update(driving_batch(), global_step=1)
    assert set(logs) == set(CRITIC_TAGS + LABEL_TAGS)


def advisor_gap_after_training(guidance: tuple[str, ...]) -> float:
    gen = torch.Generator().manual_seed(0)
    obs = torch.randn(32, 3, generator=gen)
    batch = ReplaySamples(
        observations=obs,
        actions=torch.rand(32, 2, generator=gen) * 2 - 1,
        rewards=torch.zeros(32),
        next_observations=obs,
        dones=torch.zeros(32),
        has_advisor=torch.ones(32),
        advisor_actions=torch.rand(32, 2, generator=gen) * 2 - 1,
        has_clip=torch.zeros(32),
        clip_bonus=torch.zeros(32),
    )
    torch.manual_seed(0)
    network = NetworkConfig(actor_hidden=(32,), critic_hidden=(64, 64))
    config = SacConfig(network=network, guidance=guidance, gamma=0.0, q_lr=3e-3, policy_frequency=1000)
    sac = SAC(ObsSpec(vector_dim=3), 2, config)
    for step in range(1, 101):
        sac.update(batch, global_step=step)
    with torch.no_grad():
        q_advisor = torch.min(*sac.qf(obs, batch.advisor_actions))
        q_behaviour = torch.min(*sac.qf(obs, batch.actions))
    return (q_advisor - q_behaviour).mean().item()


def test_vmr_opens_a_margin_between_advisor_and_behaviour_q():
    # γ = 0 and r = 0: TD alone pulls every Q to 0; VMR adds Q(s, aᵛ) → Q(s, a) + 2.
    assert abs(advisor_gap_after_training(())) < 0.5
    assert advisor_gap_after_training(("vmr",)) > 1.0


def test_awag_term_in_update_matches_hand_computation():
    torch.manual_seed(0)
    batch = driving_batch(labelled=0.5)
    # A vanishing critic learning rate keeps Q fixed across the critic step, so the expected
    # AWAG loss can be computed from the networks before the update.
    config = SacConfig(network=TINY, guidance=("awag",), q_lr=1e-12, policy_frequency=1)
    sac = SAC(DRIVING, 2, config)
    with torch.no_grad():
        features = sac.qf.encoder(batch.observations)
        advisor = batch.advisor_actions.clamp(-0.999, 0.999)
        mean, log_std = sac.actor.params_from_features(features)
        advantage = torch.min(*sac.qf.q_values(features, advisor)) - torch.min(*sac.qf.q_values(features, mean.tanh()))
        gate = batch.has_advisor * (advantage > 0).float()
        weight = torch.clamp(torch.exp(advantage / 2.0), max=20.0)
        normal = torch.distributions.Normal(mean, log_std.exp())
        pre = torch.atanh(advisor)
        log_prob = (normal.log_prob(pre) - torch.log(1 - advisor.pow(2))).sum(-1)
        expected = -(gate * weight * log_prob).sum() / gate.sum().clamp(min=1)
    logs = sac.update(batch, global_step=1)
    assert logs["guidance/awag_gate_fraction"] == pytest.approx(gate.mean().item())
    assert logs["guidance/awag_loss"] == pytest.approx(expected.item(), rel=1e-3, abs=1e-3)
    assert logs["guidance/label_coverage"] == pytest.approx(0.5)


def test_nan_reward_stops_with_the_term_named():
    batch = driving_batch()._replace(rewards=torch.full((8,), float("nan")))
    with pytest.raises(FloatingPointError, match="losses/qf1_loss"):
        SAC(DRIVING, 2, SacConfig(network=TINY)).update(batch, global_step=1)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gamma", 1.5),
        ("tau", 0.0),
        ("batch_size", 0),
        ("awag_max_weight", 0.5),
        ("vmr_form", "cubic"),
        ("awag_schedule", "exp"),
    ],
)
def test_out_of_range_hyperparameter_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        SacConfig(**{field: value})


def test_unknown_guidance_and_algorithm_are_named():
    with pytest.raises(ValueError, match="'pvp'"):
        SacConfig(guidance=("pvp",))
    with pytest.raises(ValueError, match="'td3'"):
        parse_algorithm("td3")
    with pytest.raises(ValueError, match="'ddpg'"):
        make_config("ddpg")


def test_state_dict_round_trip_gives_same_actions():
    sac = SAC(DRIVING, 2, SacConfig(network=TINY))
    sac.update(driving_batch(), global_step=2)
    other = SAC(DRIVING, 2, SacConfig(network=TINY), seed=1)
    other.load_state_dict(sac.state_dict())
    obs = {k: v.numpy() for k, v in driving_batch().observations.items()}
    assert np.allclose(sac.act(obs, deterministic=True), other.act(obs, deterministic=True))


def test_config_is_a_documented_dataclass():
    assert all(f.name for f in dataclasses.fields(SacConfig))


def test_critic_stays_trainable_after_an_actor_step():
    sac = SAC(DRIVING, 2, SacConfig(network=TINY, policy_frequency=1))
    sac.update(driving_batch(), global_step=1)
    assert all(p.requires_grad for p in sac.qf.parameters())
    before = [p.detach().clone() for p in sac.qf.parameters()]
    sac.update(driving_batch(seed=1), global_step=2)
    assert any(not torch.equal(a, b) for a, b in zip(before, sac.qf.parameters()))
