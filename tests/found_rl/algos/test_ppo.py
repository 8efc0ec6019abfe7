"""PPO with SMPO: padded batches give the unpadded loss and gradients; config errors."""

import numpy as np
import pytest
import torch

from found_rl.algos.ppo import ADVISOR_BC_TAGS, LOSS_TAGS, PPO, PpoConfig, ppo_losses
from found_rl.models.encoders import NetworkConfig
from found_rl.models.observation import ObsSpec
from found_rl.models.ppo_nets import ActionKind
from found_rl.storage.rollout import RolloutSamples, RolloutStorage
from tests.guidance_terms import switched_on

VECTOR = ObsSpec(vector_dim=4)
SMALL = NetworkConfig(actor_hidden=(16,), critic_hidden=(16,))


def padded_batch(kind: ActionKind, agent, size: int = 12, seed: int = 0) -> tuple[RolloutSamples, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    valid = torch.ones(size)
    valid[[2, 5, 6, 11]] = 0.0
    obs = torch.randn(size, 4, generator=gen)
    obs[valid == 0] = 1e3  # padding holds a held (here: absurd) observation
    with torch.no_grad():
        actions, log_probs, _, values = agent.get_action_and_value(obs)
    log_probs = log_probs + 0.1 * torch.randn(size, generator=gen)  # behaviour ≠ current policy
    batch = RolloutSamples(
        observations=obs,
        actions=actions,
        log_probs=log_probs,
        values=values,
        advantages=torch.randn(size, generator=gen) * valid,
        returns=torch.randn(size, generator=gen) * valid,
        valid=valid,
    )
    return batch, valid


@pytest.mark.parametrize("kind", [ActionKind.CATEGORICAL, ActionKind.BETA, ActionKind.GAUSSIAN])
def test_padded_batch_gives_unpadded_loss_and_gradients(kind):
    torch.manual_seed(0)
    ppo = PPO(
        VECTOR,
        kind,
        3 if kind is ActionKind.CATEGORICAL else 2,
        PpoConfig(network=SMALL, ent_coef=0.01),
    )
    batch, valid = padded_batch(kind, ppo.agent)
    unpadded = batch.index(torch.nonzero(valid).squeeze(-1))._replace(valid=torch.ones(int(valid.sum())))

    def loss_and_grads(mb: RolloutSamples):
        ppo.agent.zero_grad()
        _, log_probs, entropy, values = ppo.agent.get_action_and_value(mb.observations, mb.actions)
        losses = ppo_losses(log_probs, entropy, values, mb, ppo.config)
        losses.loss.backward()
        return losses, [p.grad.clone() for p in ppo.agent.parameters()]

    padded_losses, padded_grads = loss_and_grads(batch)
    plain_losses, plain_grads = loss_and_grads(unpadded)
    for name in (
        "loss",
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clipfrac",
    ):
        assert getattr(padded_losses, name).item() == pytest.approx(
            getattr(plain_losses, name).item(), rel=1e-5, abs=1e-6
        )
    for padded, plain in zip(padded_grads, plain_grads):
        assert torch.allclose(padded, plain, rtol=1e-4, atol=1e-6)


def reference_gae(rewards, values, next_values, terminated, gamma, lam):
    """Plain GAE over one unpadded episode fragment, written out by hand."""
    advantages, carried = [], 0.0
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * (0.0 if terminated[t] else next_values[t]) - values[t]
        carried = delta + gamma * lam * carried * (0.0 if t == len(rewards) - 1 else 1.0)
        advantages.append(carried)
    return advantages[::-1]


def test_storage_gae_ignores_padding_and_bootstraps_truncation():
    storage = RolloutStorage(4, 2, VECTOR, (), discrete=True)
    rewards = torch.tensor([[1.0, 0.5], [2.0, 0.5], [9.0, 0.5], [9.0, 0.5]])
    values = torch.tensor([[0.3, 0.1], [0.2, 0.2], [50.0, 0.3], [50.0, 0.4]])
    # clip 0 terminates at t=1 then is padding; clip 1 is truncated at t=2 (final V = 5) and restarts at t=3
    terminated = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 0]], dtype=torch.bool)
    truncated = torch.tensor([[0, 0], [0, 0], [0, 1], [0, 0]], dtype=torch.bool)
    valid = torch.tensor([[1, 1], [1, 1], [0, 1], [0, 1]], dtype=torch.float32)
    final_values = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 5.0], [0.0, 0.0]])
    for t in range(4):
        storage.add(
            torch.zeros(2, 4),
            torch.zeros(2, dtype=torch.int64),
            torch.zeros(2),
            values[t],
            rewards[t],
            terminated[t],
            truncated[t],
            valid[t],
            final_values[t],
        )
    out = storage.compute_returns(last_values=torch.tensor([0.0, 0.7]), gamma=0.9, gae_lambda=0.8)
    advantages = out.advantages.reshape(4, 2)
    clip0 = reference_gae([1.0, 2.0], [0.3, 0.2], [0.2, 0.0], [False, True], 0.9, 0.8)
    clip1_first = reference_gae(
        [0.5, 0.5, 0.5],
        [0.1, 0.2, 0.3],
        [0.2, 0.3, 5.0],
        [False, False, False],
        0.9,
        0.8,
    )
    clip1_second = reference_gae([0.5], [0.4], [0.7], [False], 0.9, 0.8)
    assert torch.allclose(advantages[:2, 0], torch.tensor(clip0))
    assert torch.all(advantages[2:, 0] == 0)
    assert torch.allclose(advantages[:3, 1], torch.tensor(clip1_first))
    assert torch.allclose(advantages[3:, 1], torch.tensor(clip1_second))


def test_clip_bonus_in_rollout_is_masked_per_entry():
    storage = RolloutStorage(1, 2, VECTOR, (), discrete=True)
    storage.add(
        torch.zeros(2, 4),
        torch.zeros(2, dtype=torch.int64),
        torch.zeros(2),
        torch.zeros(2),
        torch.ones(2),
        torch.ones(2, dtype=torch.bool),
        torch.zeros(2, dtype=torch.bool),
        torch.ones(2),
    )
    storage.attach_clip_bonus(0, 1, 0.25)
    out = storage.compute_returns(torch.zeros(2), gamma=0.99, gae_lambda=0.95)
    assert torch.allclose(out.returns, torch.tensor([1.0, 1.25]))


def test_update_reports_loss_tags():
    ppo = PPO(VECTOR, "beta", 2, PpoConfig(network=SMALL, num_minibatches=2, update_epochs=2))
    batch, _ = padded_batch(ActionKind.BETA, ppo.agent)
    logs = ppo.update(batch, global_step=12)
    assert set(logs) == set(LOSS_TAGS)
    assert logs["perf/valid_fraction"] == pytest.approx(8 / 12)


def test_beta_actions_stay_inside_bounds():
    ppo = PPO(VECTOR, "beta", 2, PpoConfig(network=SMALL))
    actions = ppo.act(
        np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32),
        deterministic=False,
    )
    assert actions.shape == (64, 2) and np.all(np.abs(actions) <= 1.0)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"clip_coef": 0.0}, "clip_coef"),
        ({"gae_lambda": 2.0}, "gae_lambda"),
        ({"action_kind": "dirichlet"}, "dirichlet"),
        ({"vmr": True}, "vmr"),
        ({"awac": True}, "awac"),
        ({"num_minibatches": 0}, "num_minibatches"),
    ],
)
def test_bad_config_names_the_problem(overrides, field):
    with pytest.raises((ValueError, TypeError), match=field):
        PpoConfig(**overrides)


def test_nan_advantage_stops_with_the_term_named():
    ppo = PPO(VECTOR, "gaussian", 2, PpoConfig(network=SMALL, num_minibatches=1))
    batch, _ = padded_batch(ActionKind.GAUSSIAN, ppo.agent)
    batch = batch._replace(returns=torch.full_like(batch.returns, float("nan")))
    with pytest.raises(FloatingPointError, match="losses/value_loss"):
        ppo.update(batch, global_step=1)


def test_ppo_losses_match_hand_computed_clipped_terms():
    # Three valid entries and one padding entry full of NaN (it must not leak). clip ε = 0.2.
    nan = float("nan")
    ratios = torch.tensor([1.5, 0.5, 1.1, 9.0])
    mb = RolloutSamples(
        observations=torch.zeros(4, 4),
        actions=torch.zeros(4, dtype=torch.int64),
        log_probs=torch.tensor([-1.0, -2.0, -0.5, nan]),
        values=torch.tensor([0.0, 1.0, 2.0, nan]),
        advantages=torch.tensor([1.0, 1.0, -2.0, nan]),
        returns=torch.tensor([1.0, 1.0, 0.0, nan]),
        valid=torch.tensor([1.0, 1.0, 1.0, 0.0]),
    )
    new_log_probs = mb.log_probs + ratios.log()
    new_values = torch.tensor([0.5, 1.1, 1.0, nan])
    entropy = torch.tensor([1.0, 2.0, 3.0, nan])
    config = PpoConfig(norm_adv=False, clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5)
    losses = ppo_losses(new_log_probs, entropy, new_values, mb, config)
    # Surrogate max(−A·r, −A·clip(r, 0.8, 1.2)): max(−1.5, −1.2) = −1.2; max(−0.5, −0.8) = −0.5;
    # A = −2, r = 1.1 inside the clip: 2.2. Mean over the 3 valid entries: 0.5 / 3.
    policy_loss = (-1.2 - 0.5 + 2.2) / 3
    # Value: max((V − R)², (V_old + clip(V − V_old, ±0.2) − R)²): max(0.25, 0.64) = 0.64;
    # max(0.01, 0.01) = 0.01; max(1.0, 1.8² = 3.24) = 3.24. Half their valid mean.
    value_loss = 0.5 * (0.64 + 0.01 + 3.24) / 3
    assert losses.policy_loss.item() == pytest.approx(policy_loss, rel=1e-5)
    assert losses.value_loss.item() == pytest.approx(value_loss, rel=1e-5)
    assert losses.entropy.item() == pytest.approx(2.0, rel=1e-6)
    assert losses.loss.item() == pytest.approx(policy_loss - 0.01 * 2.0 + 0.5 * value_loss, rel=1e-5)
    approx_kl = sum((r - 1) - np.log(r) for r in (1.5, 0.5, 1.1)) / 3
    assert losses.approx_kl.item() == pytest.approx(approx_kl, rel=1e-4)
    assert losses.old_approx_kl.item() == pytest.approx(-sum(np.log(r) for r in (1.5, 0.5, 1.1)) / 3, rel=1e-4)
    assert losses.clipfrac.item() == pytest.approx(2 / 3)  # |r − 1| > 0.2 for 1.5 and 0.5


def test_ppo_losses_without_value_clipping_use_the_plain_squared_error():
    mb = RolloutSamples(
        observations=torch.zeros(2, 4),
        actions=torch.zeros(2, dtype=torch.int64),
        log_probs=torch.zeros(2),
        values=torch.tensor([0.0, 2.0]),
        advantages=torch.zeros(2),
        returns=torch.tensor([1.0, 0.0]),
        valid=torch.ones(2),
    )
    config = PpoConfig(norm_adv=False, clip_vloss=False)
    losses = ppo_losses(torch.zeros(2), torch.zeros(2), torch.tensor([0.5, 1.0]), mb, config)
    assert losses.value_loss.item() == pytest.approx(0.5 * (0.25 + 1.0) / 2)


@pytest.mark.parametrize("kind", [ActionKind.CATEGORICAL, ActionKind.BETA, ActionKind.GAUSSIAN])
def test_an_all_padding_minibatch_gives_zero_losses_and_zero_gradients(kind):
    torch.manual_seed(0)
    ppo = PPO(VECTOR, kind, 3 if kind is ActionKind.CATEGORICAL else 2, PpoConfig(network=SMALL, ent_coef=0.01))
    batch, _ = padded_batch(kind, ppo.agent)
    padding = batch._replace(valid=torch.zeros_like(batch.valid))
    _, log_probs, entropy, values = ppo.agent.get_action_and_value(padding.observations, padding.actions)
    losses = ppo_losses(log_probs, entropy, values, padding, ppo.config)
    losses.loss.backward()
    for name in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac"):
        assert getattr(losses, name).item() == 0.0, name
    for parameter in ppo.agent.parameters():
        assert parameter.grad is None or torch.count_nonzero(parameter.grad) == 0


# ---------------------------------------------------------------- update() under FAST padding


def fast_rollout(kind: ActionKind, agent, pad_value: float, seed: int = 0) -> RolloutSamples:
    """A flattened (T=4, N=4) rollout: 11 valid entries (not a multiple of the minibatch count)
    and 5 padding entries that hold ``pad_value`` everywhere (observation, action, old
    log-prob, value, advantage, return)."""
    gen = torch.Generator().manual_seed(seed)
    size = 16
    valid = torch.ones(size)
    valid[[3, 7, 8, 12, 15]] = 0.0
    obs = torch.randn(size, 4, generator=gen)
    with torch.no_grad():
        actions, log_probs, _, values = agent.get_action_and_value(obs)
    padding = valid == 0
    obs[padding] = pad_value
    actions = actions.clone()
    if actions.dtype.is_floating_point:
        actions[padding] = pad_value
    return RolloutSamples(
        observations=obs,
        actions=actions,
        log_probs=torch.where(padding, torch.full_like(log_probs, pad_value), log_probs + 0.05),
        values=torch.where(padding, torch.full_like(values, pad_value), values),
        advantages=torch.where(padding, torch.tensor(pad_value), torch.randn(size, generator=gen)),
        returns=torch.where(padding, torch.tensor(pad_value), torch.randn(size, generator=gen)),
        valid=valid,
    )


def without_padding(rollout: RolloutSamples) -> RolloutSamples:
    kept = rollout.index(torch.nonzero(rollout.valid).squeeze(-1))
    return kept._replace(valid=torch.ones_like(kept.valid))


def trained_parameters(kind: ActionKind, rollout_of, updates: int = 2) -> list[torch.Tensor]:
    """Parameters after ``updates`` calls of ``PPO.update`` (3 epochs × 3 minibatches each)."""
    torch.manual_seed(0)
    config = PpoConfig(network=SMALL, ent_coef=0.01, update_epochs=3, num_minibatches=3, learning_rate=1e-2)
    ppo = PPO(VECTOR, kind, 3 if kind is ActionKind.CATEGORICAL else 2, config, seed=7)
    for step in range(updates):
        ppo.update(rollout_of(ppo.agent, step), global_step=16 * (step + 1))
    return [p.detach().clone() for p in ppo.agent.parameters()]


@pytest.mark.parametrize("kind", [ActionKind.CATEGORICAL, ActionKind.BETA, ActionKind.GAUSSIAN])
@pytest.mark.parametrize("pad_value", [1e3, float("nan")])
def test_update_on_a_padded_rollout_gives_the_unpadded_parameters(kind, pad_value):
    padded = trained_parameters(kind, lambda agent, step: fast_rollout(kind, agent, pad_value, seed=step))
    plain = trained_parameters(kind, lambda agent, step: without_padding(fast_rollout(kind, agent, 0.0, seed=step)))
    for got, expected in zip(padded, plain):
        assert torch.isfinite(got).all()
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_minibatches_use_every_valid_entry_once_per_epoch_and_never_padding():
    ppo = PPO(VECTOR, "gaussian", 2, PpoConfig(network=SMALL, num_minibatches=3))
    valid = torch.ones(16)
    valid[[3, 7, 8, 12, 15]] = 0.0
    parts = ppo.minibatch_indices(valid)
    assert sorted(len(part) for part in parts) == [3, 4, 4]
    drawn = torch.cat(parts).sort().values
    assert torch.equal(drawn, torch.nonzero(valid).squeeze(-1))
    few = ppo.minibatch_indices(torch.tensor([0.0, 1.0, 0.0, 1.0]))  # fewer valid entries than minibatches
    assert sorted(torch.cat(few).tolist()) == [1, 3] and all(len(part) == 1 for part in few)


def test_an_all_padding_rollout_is_refused():
    ppo = PPO(VECTOR, "gaussian", 2, PpoConfig(network=SMALL))
    rollout = fast_rollout(ActionKind.GAUSSIAN, ppo.agent, 0.0)._replace(valid=torch.zeros(16))
    before = [p.detach().clone() for p in ppo.agent.parameters()]
    with pytest.raises(ValueError, match="no valid transition"):
        ppo.update(rollout, global_step=16)
    assert all(torch.equal(a, b) for a, b in zip(before, ppo.agent.parameters()))


# ---------------------------------------------------------------- guidance


def labelled_storage(bonus: float = 0.5) -> RolloutStorage:
    """Two lock-steps of one clip that terminate at once (return = reward), with step ids."""
    storage = RolloutStorage(2, 1, VECTOR, (), discrete=True)
    for step in range(2):
        storage.add(
            torch.zeros(1, 4),
            torch.zeros(1, dtype=torch.int64),
            torch.zeros(1),
            torch.zeros(1),
            torch.ones(1),
            torch.ones(1, dtype=torch.bool),
            torch.zeros(1, dtype=torch.bool),
            torch.ones(1),
            step_ids=[(0, step, 0)],
        )
    assert storage.attach_labels((0, 1, 0), action=2, clip_bonus=bonus)
    return storage


@pytest.mark.parametrize(("guidance", "second_return"), [((), 1.0), (("clip_bonus",), 1.5)])
def test_the_clip_bonus_enters_the_returns_only_when_the_config_lists_it(guidance, second_return):
    ppo = PPO(VECTOR, "categorical", 3, PpoConfig(network=SMALL, **switched_on(PpoConfig, *guidance)))
    rollout = ppo.compute_returns(labelled_storage(), torch.zeros(1))
    assert rollout.returns.tolist() == pytest.approx([1.0, second_return])
    assert rollout.has_advisor.tolist() == [0.0, 1.0] and rollout.advisor_actions.tolist() == [0, 2]


def test_advisor_bc_coefficient_decays_linearly_between_its_steps():
    config = PpoConfig(
        network=SMALL,
        **switched_on(PpoConfig, "advisor_bc", advisor_bc={"coef": 0.2, "decay_start_steps": 100,
                                                          "decay_end_steps": 300}),
    )
    ppo = PPO(VECTOR, "gaussian", 2, config)
    coefficients = [ppo.advisor_bc_coefficient(t) for t in (0, 100, 200, 300, 10_000)]
    assert coefficients == pytest.approx([0.2, 0.2, 0.1, 0.0, 0.0])


def test_advisor_bc_gate_and_loss_match_hand_computation():
    from found_rl.algos.guidance import advisor_bc_gate, advisor_bc_loss

    has_advisor = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0])
    advantages = torch.tensor([-0.5, 0.7, -0.1, -2.0, -0.3])
    differs = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0])  # the last one executed the advisor's own action
    gate = advisor_bc_gate(has_advisor, advantages, differs)
    assert gate.tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert advisor_bc_gate(has_advisor, advantages, differs, negative_advantage_only=False).tolist() == [
        1.0,
        1.0,
        1.0,
        0.0,
        1.0,
    ]
    log_probs = torch.tensor([-1.0, -9.0, -3.0, float("nan"), -5.0])
    assert advisor_bc_loss(torch.where(gate > 0, log_probs, 0.0), gate).item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="per sample"):
        advisor_bc_loss(torch.zeros(5, 2), gate)


def guided_rollout(agent, advantage_sign: float) -> RolloutSamples:
    """Eight valid entries, every one labelled with advisor action 2 ≠ the executed action 0."""
    gen = torch.Generator().manual_seed(3)
    obs = torch.randn(8, 4, generator=gen)
    actions = torch.zeros(8, dtype=torch.int64)
    with torch.no_grad():
        _, log_probs, _, values = agent.get_action_and_value(obs, actions)
    return RolloutSamples(
        observations=obs,
        actions=actions,
        log_probs=log_probs,
        values=values,
        advantages=advantage_sign * (0.5 + torch.rand(8, generator=gen)),
        returns=values,
        valid=torch.ones(8),
        has_advisor=torch.ones(8),
        advisor_actions=torch.full((8,), 2, dtype=torch.int64),
    )


def advisor_log_prob_after_update(guidance: tuple[str, ...], advantage_sign: float, step: int = 0):
    torch.manual_seed(0)
    config = PpoConfig(
        network=SMALL,
        **switched_on(PpoConfig, *guidance, advisor_bc={"coef": 1.0}),
        update_epochs=4,
        num_minibatches=2,
        anneal_lr=False,
        learning_rate=1e-2,
    )
    ppo = PPO(VECTOR, "categorical", 3, config)
    rollout = guided_rollout(ppo.agent, advantage_sign)
    logs = ppo.update(rollout, global_step=step)
    with torch.no_grad():
        _, log_probs, _, _ = ppo.agent.get_action_and_value(rollout.observations, rollout.advisor_actions)
    return log_probs.mean().item(), logs, [p.detach().clone() for p in ppo.agent.parameters()]


def test_advisor_bc_raises_the_advisor_likelihood_where_the_executed_action_did_badly():
    guided, logs, _ = advisor_log_prob_after_update(("advisor_bc",), advantage_sign=-1.0)
    plain, _, _ = advisor_log_prob_after_update((), advantage_sign=-1.0)
    assert guided > plain + 0.05
    assert logs["guidance/advisor_bc_gate_fraction"] == 1.0 and logs["guidance/advisor_bc_coef"] == 1.0
    assert logs["guidance/label_coverage"] == 1.0


@pytest.mark.parametrize(("advantage_sign", "step"), [(1.0, 0), (-1.0, 300_000)])
def test_a_closed_gate_or_a_spent_schedule_leaves_the_update_unchanged(advantage_sign, step):
    _, logs, guided = advisor_log_prob_after_update(("advisor_bc",), advantage_sign, step)
    _, _, plain = advisor_log_prob_after_update((), advantage_sign, step)
    for got, expected in zip(guided, plain):
        assert torch.allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert set(ADVISOR_BC_TAGS) <= set(logs)


def test_storage_drops_labels_for_ids_it_does_not_hold_and_checks_actions():
    storage = labelled_storage()
    assert not storage.attach_labels((0, 5, 0), action=1)
    with pytest.raises(ValueError, match="integer action index"):
        storage.attach_labels((0, 0, 0), action=1.5)
    with pytest.raises(ValueError, match="clip_bonus"):
        storage.attach_labels((0, 0, 0), clip_bonus=float("nan"))
    storage.reset()
    assert not storage.attach_labels((0, 1, 0), action=1)  # a label for the consumed rollout


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"vmr": True}, ["'vmr'"]),
        ({"awag": True}, ["'awag'"]),
        ({"advisor_bc": {"enabled": True}}, ["PpoConfig.advisor_bc", "AdvisorBc", "dict"]),
        ({"vf_coef": float("inf")}, ["vf_coef", "finite"]),
        ({"advisor_action_eps": 0.0}, ["advisor_action_eps"]),
    ],
)
def test_guidance_and_schedule_errors_name_the_field(overrides, words):
    with pytest.raises((ValueError, TypeError)) as error:
        PpoConfig(**overrides)
    for word in words:
        assert word in str(error.value)
