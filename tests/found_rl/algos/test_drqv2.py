"""DrQ-v2 learner: losses, targets and σ schedule pinned by hand; guidance, tags, resume, errors."""

import copy

import numpy as np
import pytest
import torch

from found_rl.algos import make_config
from found_rl.algos.drqv2 import (
    ACTOR_TAGS,
    AWAG_TAGS,
    CLIP_TAGS,
    CRITIC_TAGS,
    LABEL_TAGS,
    VMR_TAGS,
    DrQV2,
    DrQV2Config,
    gaussian_log_prob,
)
from found_rl.algos.guidance import awag_weights, vmr_loss
from found_rl.algos.schedules import drqv2_cosine
from found_rl.checkpoint import save_checkpoint
from found_rl.models.encoders import EncoderConfig, NetworkConfig
from found_rl.models.observation import ObsSpec
from found_rl.models.policy import PolicySpec, build_actor
from found_rl.storage.replay import ReplaySamples
from tests.guidance_terms import switched_on

VECTOR = ObsSpec(vector_dim=3)
SMALL = NetworkConfig(actor_hidden=(8,), critic_hidden=(8,))
TINY = NetworkConfig(
    encoder=EncoderConfig(conv_channels=(4, 4), bottleneck_channels=2, state_hidden=(8,), features_dim=8),
    actor_hidden=(8,),
    critic_hidden=(8,),
)
DRIVING = ObsSpec(bev_shape=(3, 8, 8), state_dim=4)


def vector_batch(size: int = 6, seed: int = 0, done_first: bool = True) -> ReplaySamples:
    gen = torch.Generator().manual_seed(seed)
    has = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])[:size]
    dones = torch.zeros(size)
    if done_first:
        dones[0] = 1.0
    return ReplaySamples(
        observations=torch.randn(size, 3, generator=gen),
        actions=torch.rand(size, 2, generator=gen) * 2 - 1,
        rewards=torch.randn(size, generator=gen),
        next_observations=torch.randn(size, 3, generator=gen),
        dones=dones,
        has_advisor=has,
        advisor_actions=(torch.rand(size, 2, generator=gen) * 2 - 1) * has[:, None],
        has_clip=has,
        clip_bonus=0.5 * has,
        discounts=torch.tensor([0.9**3, 0.9**3, 0.9**2, 0.9**3, 0.9, 0.9**3])[:size],
    )


def learner(**overrides) -> DrQV2:
    torch.manual_seed(0)
    config = DrQV2Config(network=SMALL, drq_pad_px=0, max_grad_norm=0.0, gamma=0.9, **overrides)
    return DrQV2(VECTOR, 2, config, seed=3)


def replay_noise(drq: DrQV2, shape: tuple[int, ...], std: float, clip: float, draws: int) -> list[torch.Tensor]:
    """The learner's next ``draws`` clipped-noise tensors, from a copy of its generator."""
    gen = torch.Generator()
    gen.set_state(drq.generator.get_state())
    return [(torch.randn(shape, generator=gen) * std).clamp(-clip, clip) for _ in range(draws)]


def test_std_schedule_is_linear_between_its_steps():
    drq = learner(std_init=1.0, std_final=0.1, std_decay_start_steps=100, std_decay_end_steps=1100)
    assert [drq.std(t) for t in (0, 100, 600, 1100, 50_000)] == pytest.approx([1.0, 1.0, 0.55, 0.1, 0.1])
    drq.update(vector_batch(), global_step=600)
    assert drq.actor.exploration_std.item() == pytest.approx(0.55)  # the exported policy explores alike


@pytest.mark.parametrize("guidance", [(), ("vmr", "clip_bonus")])
def test_critic_loss_matches_the_hand_computed_n_step_target(guidance):
    drq = learner(**switched_on(DrQV2Config, *guidance), std_decay_end_steps=1000)
    batch = vector_batch()
    step = 500
    std = drq.std(step)
    before = copy.deepcopy(drq)
    target_noise, _ = replay_noise(drq, (6, 2), std, 0.3, draws=2)
    logs = drq.update(batch, global_step=step)

    rewards = batch.rewards + (batch.clip_bonus * batch.has_clip if "clip_bonus" in guidance else 0.0)
    with torch.no_grad():
        next_actions = (before.actor(batch.next_observations) + target_noise).clamp(-1, 1)
        target = torch.min(*before.qf_target(batch.next_observations, next_actions))
        y = rewards + (1 - batch.dones) * batch.discounts * target
        q1, q2 = before.qf(batch.observations, batch.actions)
        qf1_loss, qf2_loss = ((q1 - y) ** 2).mean(), ((q2 - y) ** 2).mean()
        expected = qf1_loss + qf2_loss
        if "vmr" in guidance:
            a1, a2 = before.qf(batch.observations, batch.advisor_actions)
            has = batch.has_advisor
            vmr = vmr_loss(a1, q1, has, 2.0, "squared") + vmr_loss(a2, q2, has, 2.0, "squared")
            assert logs["guidance/vmr_loss"] == pytest.approx(vmr.item(), rel=1e-5)
            expected = expected + 1.0 * vmr  # λ(500) = 1
    assert logs["losses/qf1_loss"] == pytest.approx(qf1_loss.item(), rel=1e-5)
    assert logs["losses/qf2_loss"] == pytest.approx(qf2_loss.item(), rel=1e-5)
    assert logs["losses/qf_loss"] == pytest.approx(expected.item() / 2, rel=1e-5)


@pytest.mark.parametrize("awag", [False, True])
def test_actor_loss_matches_hand_computation(awag):
    drq = learner(**switched_on(DrQV2Config, *(("awag",) if awag else ())), std_decay_end_steps=1000)
    batch = vector_batch()
    step = 250
    std = drq.std(step)
    before = copy.deepcopy(drq)
    _, actor_noise = replay_noise(drq, (6, 2), std, 0.3, draws=2)
    logs = drq.update(batch, global_step=step)
    with torch.no_grad():
        mean = before.actor(batch.observations)
        actions = (mean + actor_noise).clamp(-1, 1)
        q1, q2 = drq.qf(batch.observations, actions)  # the critic after this update's critic step
        min_q = torch.min(q1, q2)
        if not awag:
            expected = -min_q.mean()
        else:
            expected = -(2.5 / q1.abs().mean()) * min_q.mean()
            advisor = batch.advisor_actions.clamp(-1 + 1e-6, 1 - 1e-6)
            weights = awag_weights(
                torch.min(*drq.qf(batch.observations, advisor)),
                torch.min(*drq.qf(batch.observations, mean)),
                batch.has_advisor,
                beta=2.0,
                max_weight=20.0,
            )
            log_prob = (-((advisor - mean) ** 2) / (2 * std**2) - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
            gated = (weights.gate * weights.weights * log_prob).sum() / weights.gate.sum().clamp(min=1)
            coef = drqv2_cosine(step)
            expected = expected - coef * gated
            assert logs["guidance/awag_coef"] == pytest.approx(coef)
            assert logs["guidance/awag_loss"] == pytest.approx(-gated.item(), rel=1e-5, abs=1e-6)
    assert logs["losses/actor_loss"] == pytest.approx(expected.item(), rel=1e-5, abs=1e-6)
    assert logs["losses/std"] == pytest.approx(std)


def test_gaussian_log_prob_is_the_normal_density_with_the_scheduled_std():
    actions, mean = torch.tensor([[0.2, -0.4]]), torch.tensor([[0.0, 0.1]])
    expected = torch.distributions.Normal(mean, 0.3).log_prob(actions).sum(-1)
    assert torch.allclose(gaussian_log_prob(actions, mean, 0.3), expected)


def test_targets_move_by_polyak_tau_and_every_tag_is_reported():
    drq = learner(**switched_on(DrQV2Config, "vmr", "awag", "clip_bonus"), tau=0.25)
    target_before = [p.clone() for p in drq.qf_target.parameters()]
    logs = drq.update(vector_batch(), global_step=10)
    expected_tags = set(CRITIC_TAGS + ACTOR_TAGS + LABEL_TAGS + VMR_TAGS + AWAG_TAGS + CLIP_TAGS)
    assert set(logs) == expected_tags
    for old, new, online in zip(target_before, drq.qf_target.parameters(), drq.qf.parameters()):
        assert torch.allclose(new, old + 0.25 * (online - old))
    assert set(learner().update(vector_batch(), 10)) == set(CRITIC_TAGS + ACTOR_TAGS + LABEL_TAGS)


def test_an_n_step_config_refuses_a_one_step_batch():
    drq = learner(n_step=3)
    with pytest.raises(ValueError, match="n_step=3"):
        drq.update(vector_batch()._replace(discounts=None), global_step=1)
    one_step = learner(n_step=1)
    one_step.update(vector_batch()._replace(discounts=None), global_step=1)  # γ is used


def test_driving_update_with_shift_and_rotation_and_resume_is_exact():
    config = DrQV2Config(network=TINY, drq_pad_px=2, drq_rotate_deg=10.0, **switched_on(DrQV2Config, "vmr", "awag"))
    gen = torch.Generator().manual_seed(0)

    def batch() -> ReplaySamples:
        def obs():
            return {
                "bev": torch.randint(0, 256, (4, 3, 8, 8), generator=gen, dtype=torch.uint8),
                "state": torch.randn(4, 4, generator=gen),
            }

        return ReplaySamples(
            obs(),
            torch.zeros(4, 2),
            torch.ones(4),
            obs(),
            torch.zeros(4),
            torch.ones(4),
            torch.full((4, 2), 0.5),
            torch.zeros(4),
            torch.zeros(4),
            torch.full((4,), 0.9**3),
        )

    batches = [batch() for _ in range(3)]
    drq = DrQV2(DRIVING, 2, config, seed=1)
    drq.update(batches[0], global_step=1)
    resumed = DrQV2(DRIVING, 2, config, seed=99)
    resumed.load_state_dict(copy.deepcopy(drq.state_dict()))
    for step, b in enumerate(batches[1:], start=2):
        drq.update(b, global_step=step)
        resumed.update(b, global_step=step)
    for a, b in zip(drq.actor.parameters(), resumed.actor.parameters()):
        assert torch.equal(a, b)
    assert all(torch.isfinite(p).all() for p in drq.qf.parameters())


def test_acting_explores_inside_the_bounds_and_the_policy_round_trips_through_a_checkpoint(tmp_path):
    drq = learner(std_init=2.0, std_final=2.0)
    obs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    noisy = drq.act(obs, global_step=0)
    assert noisy.shape == (64, 2) and np.all(np.abs(noisy) <= 1.0)
    assert not np.allclose(noisy, drq.act(obs, deterministic=True))
    policy = drq.policy()
    np.testing.assert_array_equal(policy.act(obs), drq.act(obs, deterministic=True))
    spec = PolicySpec.from_dict(drq.policy_spec.to_dict())
    assert spec.algo == "drqv2" and spec.action_kind == "deterministic"
    path = save_checkpoint(tmp_path / "drqv2.pt", spec, policy.actor.state_dict(), drq.state_dict())
    rebuilt = build_actor(spec)
    rebuilt.load_state_dict(torch.load(path, weights_only=False)["policy_state"])
    np.testing.assert_allclose(rebuilt.act(torch.as_tensor(obs)).detach().numpy(), policy.act(obs), rtol=1e-6)


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"advisor_bc": True}, ["'advisor_bc'"]),
        ({"vmr": {"enabled": True}}, ["DrQV2Config.vmr", "Vmr", "dict"]),
        ({"std_decay_start_steps": 10, "std_decay_end_steps": 5}, ["std_decay_end_steps"]),
        ({"std_clip": float("inf")}, ["std_clip", "finite"]),
        ({"n_step": 0}, ["n_step"]),
        ({"td3bc_alpha": 0.0}, ["td3bc_alpha"]),
    ],
)
def test_bad_config_names_the_field(overrides, words):
    with pytest.raises((ValueError, TypeError)) as error:
        DrQV2Config(**overrides)
    for word in words:
        assert word in str(error.value)


def test_make_config_knows_drqv2():
    assert isinstance(make_config("drqv2", n_step=1), DrQV2Config)


def test_awag_defaults_are_drqv2s_own_cosine_schedule():
    assert DrQV2Config().awag.schedule == "drqv2_cosine" and DrQV2Config().awag.coef == 0.03


def test_config_fields_are_documented():
    import ast
    import dataclasses
    import inspect
    import itertools

    from found_rl.algos.ppo import PpoConfig

    for config in (DrQV2Config, PpoConfig):
        body = ast.parse(inspect.getsource(config)).body[0].body
        documented = {
            node.target.id
            for node, after in itertools.pairwise(body)
            if isinstance(node, ast.AnnAssign)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
            and after.value.value.strip()
        }
        fields = {f.name for f in dataclasses.fields(config)}
        assert fields <= documented, f"{config.__name__} undocumented: {sorted(fields - documented)}"
