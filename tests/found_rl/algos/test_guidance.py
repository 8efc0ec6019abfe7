"""VMR, AWAG and CLIP-bonus terms against hand-computed tensors (METHOD §1–3)."""

import math

import pytest
import torch
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform

from found_rl.algos.guidance import (
    GuidanceTerm,
    awag_loss,
    awag_weights,
    clip_bonus_rewards,
    normalized_q_term,
    twin_vmr_loss,
    vmr_loss,
    vmr_margins,
)
from found_rl.algos.schedules import drqv2_cosine, linear_decay, vmr_coefficient
from found_rl.guidance_settings import Vmr
from found_rl.models.encoders import FlatEncoder
from found_rl.models.sac_nets import SquashedGaussianActor, squashed_gaussian_log_prob


def test_vmr_averages_only_labelled_samples_with_margin_two():
    q_advisor = torch.tensor([3.0, 5.0, 1.0])
    q_behaviour = torch.tensor([0.0, 1.0, 0.0])
    has_advisor = torch.tensor([1.0, 0.0, 1.0])
    # labelled: (3 - 0 - 2)^2 = 1 and (1 - 0 - 2)^2 = 1 → (1 + 1) / 2; the unlabelled (5-1-2)^2=4 is ignored
    assert vmr_loss(q_advisor, q_behaviour, has_advisor, 2.0, "squared").item() == pytest.approx(1.0)


def test_vmr_margin_grows_with_the_distance_between_taken_and_advisor_actions():
    taken = torch.tensor([[0.5, 0.0], [0.5, 0.0], [0.5, 0.0], [-1.0, 1.0]])
    advisor = torch.tensor([[0.5, 0.0], [0.5, 0.3], [0.5, 0.4], [1.0, -1.0]])
    assert vmr_margins(Vmr(margin=2.0), taken, advisor) == 2.0  # published: constant
    margins = vmr_margins(Vmr(margin=2.0, margin_distance=0.4), taken, advisor)
    # DQfD: none for the advisor's own action, m·‖a − aᵛ‖/d below d, m beyond
    assert margins.tolist() == pytest.approx([0.0, 1.5, 2.0, 2.0])


def test_twin_vmr_sums_both_critics_with_the_distance_margin():
    taken, advisor = torch.zeros(2, 2), torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    q_advisor, q_behaviour, labelled = torch.tensor([1.0, 1.0]), torch.zeros(2), torch.ones(2)
    settings = Vmr(margin=2.0, margin_distance=0.5)
    # margins 0 and 2: ((1 − 0)² + (1 − 2)²) / 2 = 1 per critic
    loss = twin_vmr_loss(settings, (q_advisor, q_advisor), (q_behaviour, q_behaviour), taken, advisor, labelled)
    assert loss.item() == pytest.approx(2.0)


def test_vmr_is_zero_without_labels_and_ignores_garbage_in_unlabelled_slots():
    q_advisor = torch.tensor([float("nan"), 2.0])
    loss = vmr_loss(q_advisor, torch.zeros(2), torch.zeros(2), 2.0, "squared")
    assert loss.item() == 0.0


def test_vmr_stops_gradient_through_behaviour_q():
    q_advisor = torch.tensor([3.0, 1.0], requires_grad=True)
    q_behaviour = torch.tensor([0.0, 0.0], requires_grad=True)
    vmr_loss(q_advisor, q_behaviour, torch.tensor([1.0, 1.0]), 2.0, "squared").backward()
    # d/dq_adv of Σ (q_adv - q_beh - 2)^2 / 2 = (q_adv - q_beh - 2)
    assert torch.allclose(q_advisor.grad, torch.tensor([1.0, -1.0]))
    assert q_behaviour.grad is None or torch.all(q_behaviour.grad == 0)


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ("hinge", (0.0 + 1.0) / 2),
        ("softplus", (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(1.0))) / 2),
    ],
)
def test_vmr_one_sided_forms_penalise_only_a_small_gap(form, expected):
    gaps_q_advisor = torch.tensor([3.0, 1.0])  # gaps 3 and 1 against margin 2
    loss = vmr_loss(gaps_q_advisor, torch.zeros(2), torch.ones(2), margin=2.0, form=form)
    assert loss.item() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("step", "expected"),
    [(0, 1.0), (50_000, 1.0), (100_000, 0.5), (150_000, 0.0), (400_000, 0.0)],
)
def test_vmr_schedule_is_one_then_linear_to_zero(step, expected):
    assert vmr_coefficient(step) == pytest.approx(expected)


def test_drqv2_cosine_schedule_matches_formula():
    assert drqv2_cosine(0) == pytest.approx(0.03)
    assert drqv2_cosine(150_000) == pytest.approx(0.03 * 0.5 * (1 + math.cos(math.pi * 0.5**0.7)))
    assert drqv2_cosine(300_000) == pytest.approx(0.0, abs=1e-12)
    assert drqv2_cosine(900_000) == pytest.approx(0.0, abs=1e-12)


def test_linear_decay_rejects_reversed_steps():
    with pytest.raises(ValueError, match="end_step"):
        linear_decay(0, 10, 5)


def test_awag_gate_weights_and_cap():
    q_advisor_min = torch.tensor([1.0, -1.0, 10.0, 0.5])
    q_policy_min = torch.zeros(4)
    has_advisor = torch.tensor([1.0, 1.0, 1.0, 0.0])
    out = awag_weights(q_advisor_min, q_policy_min, has_advisor, beta=2.0, max_weight=20.0)
    assert torch.equal(out.advantages, torch.tensor([1.0, -1.0, 10.0, 0.5]))
    assert torch.equal(out.gate, torch.tensor([1.0, 0.0, 1.0, 0.0]))  # A <= 0 and unlabelled are gated out
    expected = torch.tensor([math.exp(0.5), math.exp(-0.5), 20.0, math.exp(0.25)])  # exp(5) > 20 is capped
    assert torch.allclose(out.weights, expected)


def test_awag_without_the_q_filter_imitates_every_labelled_sample_alike():
    q_advisor, q_policy = torch.tensor([5.0, -5.0, 0.0]), torch.zeros(3)
    labelled = torch.tensor([1.0, 1.0, 0.0])
    awag = awag_weights(q_advisor, q_policy, labelled, beta=2.0, max_weight=20.0, q_filter=False)
    assert awag.gate.tolist() == [1.0, 1.0, 0.0]  # the critic's disagreement no longer gates
    assert awag.weights.tolist() == [1.0, 1.0, 1.0]
    assert awag.advantages.tolist() == [5.0, -5.0, 0.0]  # still logged


def test_awag_weights_carry_no_gradient_and_never_overflow():
    q_advisor = torch.tensor([1e6], requires_grad=True)
    out = awag_weights(q_advisor, torch.zeros(1), torch.ones(1), beta=2.0, max_weight=20.0)
    assert not out.weights.requires_grad and out.weights.item() == 20.0


def test_awag_loss_normalises_by_gated_count():
    log_prob = torch.tensor([-1.0, -2.0, -3.0, -4.0], requires_grad=True)
    gate = torch.tensor([1.0, 0.0, 1.0, 0.0])
    weights = torch.tensor([math.exp(0.5), math.exp(-0.5), 20.0, 1.0])
    loss = awag_loss(log_prob, gate, weights)
    assert loss.item() == pytest.approx(-(math.exp(0.5) * -1.0 + 20.0 * -3.0) / 2)
    loss.backward()
    assert torch.allclose(log_prob.grad, torch.tensor([-math.exp(0.5) / 2, 0.0, -10.0, 0.0]))


def test_awag_loss_is_zero_when_nothing_passes_the_gate():
    assert awag_loss(torch.tensor([-5.0, -1.0]), torch.zeros(2), torch.ones(2)).item() == 0.0


def test_awag_loss_refuses_per_dimension_log_probs():
    with pytest.raises(ValueError, match="per sample"):
        awag_loss(torch.zeros(4, 2), torch.ones(4), torch.ones(4))


def test_squashed_gaussian_log_prob_is_per_sample_and_summed_over_dims_once():
    torch.manual_seed(0)
    mean, log_std = torch.randn(5, 2), torch.randn(5, 2) * 0.3
    actions = torch.rand(5, 2) * 1.8 - 0.9
    reference = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform()]).log_prob(actions).sum(-1)
    ours = squashed_gaussian_log_prob(mean, log_std, torch.atanh(actions))
    assert ours.shape == (5,)
    assert torch.allclose(ours, reference, atol=1e-4)


def test_actor_log_prob_of_advisor_actions_is_per_sample():
    actor = SquashedGaussianActor(FlatEncoder(3), action_dim=2, hidden=(8,))
    log_prob = actor.log_prob(torch.randn(6, 3), torch.full((6, 2), 0.999))
    assert log_prob.shape == (6,) and torch.isfinite(log_prob).all()


def test_clip_bonus_is_added_only_where_present():
    rewards = torch.tensor([1.0, 2.0, 3.0])
    bonus = torch.tensor([0.1, float("nan"), -10.0])  # missing slots may hold anything, even the old −10 sentinel
    has_clip = torch.tensor([1.0, 0.0, 0.0])
    assert torch.allclose(clip_bonus_rewards(rewards, bonus, has_clip), torch.tensor([1.1, 2.0, 3.0]))


def test_normalized_q_term_matches_td3_bc():
    q1 = torch.tensor([2.0, -4.0])
    min_q = torch.tensor([1.0, 3.0])
    assert normalized_q_term(q1, min_q).item() == pytest.approx(-(2.5 / 3.0) * 2.0)


def test_unknown_guidance_term_is_named():
    with pytest.raises(ValueError, match="'pvp'"):
        GuidanceTerm.parse("pvp")
