"""SAC learner: tags, guidance wiring, configuration errors, NaN stop."""

import ast
import dataclasses
import inspect
import itertools
import math

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
from tests.guidance_terms import switched_on

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
    config = SacConfig(network=TINY, **switched_on(SacConfig, "vmr", "awag", "clip_bonus"), drq_pad_px=2)
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
    config = SacConfig(network=network, **switched_on(SacConfig, *guidance), gamma=0.0, q_lr=3e-3,
                       policy_frequency=1000)
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
    config = SacConfig(network=TINY, **switched_on(SacConfig, "awag"), q_lr=1e-12, policy_frequency=1)
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


def test_awag_mode_mse_imitates_the_mode_in_the_action_space():
    torch.manual_seed(0)
    batch = driving_batch(labelled=0.5)._replace(advisor_actions=torch.ones(8, 2))  # at the bounds
    awag = {"loss": "mode_mse", "filter": "none"}  # every labelled sample, weight 1
    config = SacConfig(network=TINY, **switched_on(SacConfig, "awag", awag=awag), q_lr=1e-12, policy_frequency=1)
    sac = SAC(DRIVING, 2, config)
    with torch.no_grad():
        mode = sac.actor.params_from_features(sac.qf.encoder(batch.observations))[0].tanh()
        error = (mode - batch.advisor_actions).pow(2).sum(-1)  # the bound itself: no atanh, no clipping
        expected = (batch.has_advisor * error).sum() / batch.has_advisor.sum()
    logs = sac.update(batch, global_step=1)
    assert logs["guidance/awag_gate_fraction"] == pytest.approx(0.5)
    assert logs["guidance/awag_loss"] == pytest.approx(expected.item(), rel=1e-4)


def _actor_head_gradients(awag: dict) -> dict[str, torch.Tensor]:
    """The gradients the actor step gives its mean and log-std heads (Adam's first step is
    sign(g): the weights it writes cannot tell a term's share)."""
    torch.manual_seed(0)
    config = SacConfig(network=TINY, **switched_on(SacConfig, "awag", awag=awag), q_lr=1e-12, policy_frequency=1)
    sac = SAC(DRIVING, 2, config)
    grads: dict[str, torch.Tensor] = {}
    for name in ("fc_mean", "fc_logstd"):
        getattr(sac.actor, name).weight.register_hook(lambda grad, name=name: grads.setdefault(name, grad.clone()))
    sac.update(driving_batch(), global_step=1)
    return grads


@pytest.mark.parametrize("detach_std", [False, True])
def test_awag_with_detach_std_moves_the_mean_and_leaves_the_std_to_the_entropy_term(detach_std):
    without = _actor_head_gradients({"coef": 0.0, "detach_std": detach_std})
    with_awag = _actor_head_gradients({"coef": 1.0, "detach_std": detach_std})
    assert not torch.allclose(without["fc_mean"], with_awag["fc_mean"])
    assert torch.allclose(without["fc_logstd"], with_awag["fc_logstd"]) == detach_std


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
        ("advisor_action_eps", 1.0),
        ("target_features", "pixels"),
    ],
)
def test_out_of_range_hyperparameter_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        SacConfig(**{field: value})


def test_unknown_guidance_and_algorithm_are_named():
    with pytest.raises(TypeError, match="'pvp'"):
        SacConfig(pvp=True)
    with pytest.raises(TypeError, match=r"SacConfig\.awag: expected a Awag .*got tuple"):
        SacConfig(awag=("awag",))
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
    # Every field carries a one-line docstring (STYLE §5): an attribute docstring is the string
    # expression right after the field's annotated assignment in the class body.
    body = ast.parse(inspect.getsource(SacConfig)).body[0].body
    documented = {
        node.target.id
        for node, after in itertools.pairwise(body)
        if isinstance(node, ast.AnnAssign)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
        and after.value.value.strip()
    }
    fields = {f.name for f in dataclasses.fields(SacConfig)}
    assert fields and fields <= documented, f"undocumented: {sorted(fields - documented)}"


def test_critic_stays_trainable_after_an_actor_step():
    sac = SAC(DRIVING, 2, SacConfig(network=TINY, policy_frequency=1))
    sac.update(driving_batch(), global_step=1)
    assert all(p.requires_grad for p in sac.qf.parameters())
    before = [p.detach().clone() for p in sac.qf.parameters()]
    sac.update(driving_batch(seed=1), global_step=2)
    assert any(not torch.equal(a, b) for a, b in zip(before, sac.qf.parameters()))


# ---- hand-computed critic targets, schedules and coefficients (METHOD §1–3) ------------------

VECTOR3 = ObsSpec(vector_dim=3)
SMALL = NetworkConfig(actor_hidden=(16,), critic_hidden=(16,))


def terminal_batch(batch_size: int = 6, seed: int = 0, advisor_bound: float = 0.9) -> ReplaySamples:
    """Every transition terminated, so the TD target is the (bonus-augmented) reward alone and no
    sampled next action enters it; half the samples carry an advisor action and a CLIP bonus."""
    gen = torch.Generator().manual_seed(seed)
    has = (torch.arange(batch_size) % 2 == 0).float()
    return ReplaySamples(
        observations=torch.randn(batch_size, 3, generator=gen),
        actions=torch.rand(batch_size, 2, generator=gen) * 1.8 - 0.9,
        rewards=torch.randn(batch_size, generator=gen),
        next_observations=torch.randn(batch_size, 3, generator=gen),
        dones=torch.ones(batch_size),
        has_advisor=has,
        advisor_actions=(torch.rand(batch_size, 2, generator=gen) * 2 - 1).sign() * advisor_bound * has[:, None],
        has_clip=has,
        clip_bonus=torch.linspace(-0.5, 0.5, batch_size) * has,
    )


def critic_values(sac: SAC, batch: ReplaySamples) -> tuple[torch.Tensor, ...]:
    """Q₁, Q₂ of the stored and the advisor actions, before any update."""
    with torch.no_grad():
        q1, q2 = sac.qf(batch.observations, batch.actions)
        q1_advisor, q2_advisor = sac.qf(batch.observations, batch.advisor_actions)
    return q1, q2, q1_advisor, q2_advisor


@pytest.mark.parametrize("guidance", [(), ("clip_bonus",)], ids=["env-reward", "with-clip-bonus"])
def test_td_target_of_a_terminal_transition_is_its_reward_plus_the_attached_bonus(guidance):
    # dones = 1 ⇒ target = r (+ h·b with the CLIP bonus); a learner that bootstraps through
    # terminated, or leaves the bonus out of the TD reward, gets a different loss.
    torch.manual_seed(0)
    sac = SAC(VECTOR3, 2, SacConfig(network=SMALL, **switched_on(SacConfig, *guidance)))
    batch = terminal_batch()
    q1, q2, _, _ = critic_values(sac, batch)
    target = batch.rewards + (batch.has_clip * batch.clip_bonus if guidance else 0.0)
    logs = sac.update(batch, global_step=1)
    assert logs["losses/qf1_loss"] == pytest.approx((q1 - target).pow(2).mean().item(), rel=1e-5)
    assert logs["losses/qf2_loss"] == pytest.approx((q2 - target).pow(2).mean().item(), rel=1e-5)
    if guidance:
        # b = linspace(-0.5, 0.5, 6) on samples 0, 2, 4: (-0.5 - 0.1 + 0.3) / 6 = -0.05
        assert logs["guidance/clip_bonus_mean"] == pytest.approx(-0.05, abs=1e-6)


@pytest.mark.parametrize(("step", "coef"), [(0, 1.0), (100_000, 0.5), (200_000, 0.0)])
def test_vmr_enters_the_critic_loss_scaled_by_its_schedule(step, coef):
    torch.manual_seed(0)
    sac = SAC(VECTOR3, 2, SacConfig(network=SMALL, **switched_on(SacConfig, "vmr")))
    batch = terminal_batch()
    q1, q2, q1_advisor, q2_advisor = critic_values(sac, batch)
    h = batch.has_advisor
    # METHOD §1 by hand: Σ h (Q(s, aᵛ) − Q(s, a) − 2)² / Σ h, for each critic.
    vmr = sum(((qa - qb - 2.0).pow(2) * h).sum() / h.sum() for qa, qb in ((q1_advisor, q1), (q2_advisor, q2)))
    td = (q1 - batch.rewards).pow(2).mean() + (q2 - batch.rewards).pow(2).mean()
    logs = sac.update(batch, global_step=step)
    assert logs["guidance/vmr_coef"] == pytest.approx(coef)
    assert logs["guidance/vmr_loss"] == pytest.approx(vmr.item(), rel=1e-5)
    assert 2 * logs["losses/qf_loss"] == pytest.approx((td + coef * vmr).item(), rel=1e-5)


def test_vmr_after_its_schedule_ends_leaves_the_critic_update_unchanged():
    def critic_after_update(guidance: tuple[str, ...], step: int) -> list[torch.Tensor]:
        torch.manual_seed(0)
        sac = SAC(VECTOR3, 2, SacConfig(network=SMALL, **switched_on(SacConfig, *guidance)))
        sac.update(terminal_batch(), global_step=step)
        return [p.detach().clone() for p in sac.qf.parameters()]

    plain = critic_after_update((), 200_000)
    for got, expected in zip(critic_after_update(("vmr",), 200_000), plain, strict=True):
        assert torch.equal(got, expected)
    # ... while inside the schedule the same VMR term does move the critic.
    assert any(not torch.equal(a, b) for a, b in zip(critic_after_update(("vmr",), 0), plain))


@pytest.mark.parametrize(
    ("schedule", "step", "coef"),
    [
        ("constant", 1, 0.5),
        ("drqv2_cosine", 150_000, 0.5 * 0.5 * (1 + math.cos(math.pi * 0.5**0.7))),
        ("drqv2_cosine", 300_000, 0.0),
    ],
)
def test_awag_enters_the_actor_loss_scaled_by_its_coefficient(schedule, step, coef):
    # Same initial weights, batch and noise with and without AWAG: the critic step is identical
    # (AWAG is an actor term), so the actor losses differ by exactly c(t) · L_AWAG.
    def actor_logs(guidance: tuple[str, ...]) -> dict[str, float]:
        torch.manual_seed(0)
        config = SacConfig(network=SMALL, **switched_on(SacConfig, *guidance, awag={"coef": 0.5, "schedule": schedule}),
                           policy_frequency=1)
        sac = SAC(VECTOR3, 2, config)
        torch.manual_seed(1)
        return sac.update(terminal_batch(), global_step=step)

    with_awag, without = actor_logs(("awag",)), actor_logs(())
    assert with_awag["guidance/awag_coef"] == pytest.approx(coef, abs=1e-12)
    assert with_awag["guidance/awag_loss"] != 0.0
    difference = with_awag["losses/actor_loss"] - without["losses/actor_loss"]
    assert difference == pytest.approx(coef * with_awag["guidance/awag_loss"], rel=1e-4, abs=1e-6)


def test_awag_clips_advisor_actions_on_the_bound_before_log_prob():
    # An advisor answering full throttle (a = ±1 exactly) must give a finite AWAG term computed at
    # clip(aᵛ, ±(1 − ε)); atanh(±1) = ±inf would stop the run.
    torch.manual_seed(0)
    eps = 1e-2
    config = SacConfig(network=SMALL, **switched_on(SacConfig, "awag"), q_lr=1e-12, policy_frequency=1,
                       advisor_action_eps=eps)
    sac = SAC(VECTOR3, 2, config)
    batch = terminal_batch(advisor_bound=1.0)
    assert batch.advisor_actions.abs().max().item() == 1.0
    with torch.no_grad():
        features = sac.qf.encoder(batch.observations)
        advisor = batch.advisor_actions.clamp(-1 + eps, 1 - eps)
        mean, log_std = sac.actor.params_from_features(features)
        advantage = torch.min(*sac.qf.q_values(features, advisor)) - torch.min(*sac.qf.q_values(features, mean.tanh()))
        gate = batch.has_advisor * (advantage > 0).float()
        weight = torch.clamp(torch.exp(advantage / 2.0), max=20.0)
        normal = torch.distributions.Normal(mean, log_std.exp())
        log_prob = (normal.log_prob(torch.atanh(advisor)) - torch.log(1 - advisor.pow(2))).sum(-1)
        expected = -(gate * weight * log_prob).sum() / gate.sum().clamp(min=1)
    logs = sac.update(batch, global_step=1)
    assert np.isfinite(logs["guidance/awag_loss"])
    assert logs["guidance/awag_loss"] == pytest.approx(expected.item(), rel=1e-3, abs=1e-4)


def test_target_critics_move_by_polyak_tau():
    torch.manual_seed(0)
    sac = SAC(VECTOR3, 2, SacConfig(network=SMALL, tau=0.1))
    before = [p.detach().clone() for p in sac.qf_target.parameters()]
    sac.update(terminal_batch(), global_step=1)
    for old, new, target in zip(before, sac.qf.parameters(), sac.qf_target.parameters(), strict=True):
        torch.testing.assert_close(target, 0.9 * old + 0.1 * new.detach(), rtol=0, atol=1e-6)
