"""Foundation-model guidance terms as pure tensor functions: VMR, AWAG, CLIP reward bonus.

Definitions are METHOD §1–3, which fix three defects of the public Found-RL code: the VMR mask
is per sample (not a batch fraction), the AWAG log-probability is per sample and summed over
action dimensions once (not collapsed over the batch), and a missing CLIP bonus is masked
(never a −10 sentinel). Masks h, g are float tensors in {0, 1} of shape ``(B,)``.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import torch
import torch.nn.functional as F

from fast_sampler.smpo import masked_mean
from found_rl.guidance_settings import GuidanceTerm as GuidanceTerm  # re-exported: the learners' switch names
from found_rl.guidance_settings import Vmr


class VmrForm(str, Enum):
    """Shape of the VMR penalty: two-sided squared regression (published) or a one-sided hinge."""

    SQUARED = "squared"
    HINGE = "hinge"
    SOFTPLUS = "softplus"


def vmr_loss(
    q_advisor: torch.Tensor,
    q_behaviour: torch.Tensor,
    has_advisor: torch.Tensor,
    margin: float | torch.Tensor,
    form: VmrForm | str,
) -> torch.Tensor:
    """VMR for one critic: Σ h (Q(s, aᵛ) − sg(Q(s, a)) − m)² / max(1, Σ h)  (METHOD §1).

    Args:
        q_advisor: Q_k(s, aᵛ), ``(B,)``.
        q_behaviour: Q_k(s, a) of the stored action, ``(B,)``; detached here (stop-gradient).
        has_advisor: h, ``(B,)``.
        margin: m, or per-sample margins ``(B,)`` (:func:`vmr_margins`).
        form: 'squared' (published), or 'hinge' / 'softplus' of m − (Q(s, aᵛ) − Q(s, a)).

    Returns:
        A scalar, before the schedule λ(t).
    """
    gap = q_advisor - q_behaviour.detach()
    form = VmrForm(form)
    if form is VmrForm.SQUARED:
        per_sample = (gap - margin).pow(2)
    elif form is VmrForm.HINGE:
        per_sample = F.relu(margin - gap)
    else:
        per_sample = F.softplus(margin - gap)
    return masked_mean(per_sample, has_advisor)


def vmr_margins(
    settings: Vmr, actions: torch.Tensor, advisor_actions: torch.Tensor
) -> float | torch.Tensor:
    """The margin m, or with ``settings.margin_distance`` d > 0 per-sample margins
    m·min(1, ‖a − aᵛ‖ / d), ``(B,)``.

    A constant margin asks Q(s, aᵛ) to stand m above Q(s, a) even where the taken action is the
    advisor's, which the critic can only meet with a cliff of height m within the policy's noise
    around aᵛ. Scaling the margin with the distance between the actions is DQfD's large margin
    (Hester et al. 2018: zero for the expert's own action).
    """
    if settings.margin_distance <= 0:
        return settings.margin
    distance = (actions - advisor_actions).norm(dim=1)
    return settings.margin * (distance / settings.margin_distance).clamp(max=1.0)


def twin_vmr_loss(
    settings: Vmr,
    q_advisor: tuple[torch.Tensor, torch.Tensor],
    q_behaviour: tuple[torch.Tensor, torch.Tensor],
    actions: torch.Tensor,
    advisor_actions: torch.Tensor,
    has_advisor: torch.Tensor,
) -> torch.Tensor:
    """VMR summed over both critics (METHOD §1), before the schedule λ(t)."""
    margin = vmr_margins(settings, actions, advisor_actions)
    (q1_advisor, q2_advisor), (q1_behaviour, q2_behaviour) = q_advisor, q_behaviour
    return vmr_loss(q1_advisor, q1_behaviour, has_advisor, margin, settings.form) + vmr_loss(
        q2_advisor, q2_behaviour, has_advisor, margin, settings.form
    )


class AwagWeights(NamedTuple):
    """Per-sample AWAG quantities, all ``(B,)`` and free of gradient."""

    advantages: torch.Tensor
    """A = min_k Q_k(s, aᵛ) − min_k Q_k(s, μ(s))"""
    gate: torch.Tensor
    """g = h · [A > 0] (the Q-filter), in {0, 1}"""
    weights: torch.Tensor
    """w = min(exp(A / β), w_max)"""


def awag_weights(
    q_advisor_min: torch.Tensor,
    q_policy_min: torch.Tensor,
    has_advisor: torch.Tensor,
    beta: float,
    max_weight: float,
    q_filter: bool = True,
) -> AwagWeights:
    """Advantage, Q-filter gate and capped weights of AWAG (METHOD §2), computed without gradient.

    Args:
        q_advisor_min: min_k Q_k(s, aᵛ), ``(B,)``.
        q_policy_min: min_k Q_k(s, μ(s)) of the deterministic policy action, ``(B,)``.
        has_advisor: h, ``(B,)``.
        beta: temperature β.
        max_weight: cap w_max.
        q_filter: False: g = h and w = 1 (every labelled sample imitated alike: behaviour
            cloning of the advisor, ``guidance.awag.filter: none``).
    """
    with torch.no_grad():
        advantages = (q_advisor_min - q_policy_min).detach()
        if not q_filter:
            return AwagWeights(advantages, has_advisor, torch.ones_like(advantages))
        gate = has_advisor * (advantages > 0).to(advantages.dtype)
        # exp of a clamped exponent: identical after the cap, and never overflows to inf.
        exponent = torch.clamp(advantages / beta, max=torch.log(torch.tensor(max_weight)).item())
        weights = torch.clamp(torch.exp(exponent), max=max_weight)
    return AwagWeights(advantages, gate, weights)


def mode_imitation_score(mode: torch.Tensor, advisor_actions: torch.Tensor) -> torch.Tensor:
    """−‖mode − aᵛ‖² per sample, ``(B,)``: what ``guidance.awag.loss: mode_mse`` imitates with, in
    the place of log π(aᵛ | s). In the action space its pull fades as the mode nears an advisor
    action at the bounds, where −log π of a squashed Gaussian keeps pulling the mean to ±∞."""
    return -(mode - advisor_actions).pow(2).sum(dim=1)


def awag_loss(log_prob_advisor: torch.Tensor, gate: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """L_AWAG = − Σ g w log π(aᵛ | s) / max(1, Σ g)  (METHOD §2).

    Args:
        log_prob_advisor: per-sample log π(clip(aᵛ, ±(1−ε)) | s), ``(B,)``, already summed over
            action dimensions once (a ``(B, A)`` input is refused: that is the published bug), or
            another per-sample score to maximise (:func:`mode_imitation_score`).
        gate: g, ``(B,)``.
        weights: w, ``(B,)``.

    Raises:
        ValueError: if ``log_prob_advisor`` is not one value per sample.
    """
    if log_prob_advisor.shape != gate.shape:
        raise ValueError(
            f"awag_loss: log_prob_advisor must be per sample with shape {tuple(gate.shape)}, "
            f"got {tuple(log_prob_advisor.shape)} (sum over action dimensions once, never over the batch)"
        )
    return -masked_mean(weights * log_prob_advisor, gate)


def clip_bonus_rewards(rewards: torch.Tensor, clip_bonus: torch.Tensor, has_clip: torch.Tensor) -> torch.Tensor:
    """r′ = r + has_clip · b: the learner's reward with the CLIP bonus where one is attached (METHOD §3).

    Missing bonuses leave r unchanged (even if the slot holds garbage). The logged episode return
    never goes through this function.
    """
    return rewards + torch.where(has_clip > 0, clip_bonus, torch.zeros_like(clip_bonus))


def normalized_q_term(q1: torch.Tensor, min_q: torch.Tensor, alpha: float = 2.5) -> torch.Tensor:
    """TD3+BC-style actor Q term −(α / mean|Q₁|) · mean min_k Q_k.

    Used by a DrQ-v2-style actor with AWAG (METHOD §2); the scale carries no gradient.
    """
    scale = alpha / q1.abs().mean().detach().clamp(min=1e-6)
    return -scale * min_q.mean()


def advisor_bc_gate(
    has_advisor: torch.Tensor,
    advantages: torch.Tensor,
    executed_differs: torch.Tensor,
    negative_advantage_only: bool = True,
) -> torch.Tensor:
    """g = h · [A(s, a) < 0] · [aᵛ ≠ a]: PPO's stand-in for AWAG's Q-filter (docs/method.md §6).

    Without a Q function the advisor action cannot be scored; what PPO knows is whether the
    action it executed beat its own expectation. Where A(s, a) < 0 the policy-gradient step
    already moves probability away from a, and the advisor term says where to; where
    A(s, a) > 0 (or the advisor chose a itself) imitation would fight or duplicate a signal
    the return already gave, so the sample is left out.

    Args:
        has_advisor: h, ``(B,)``.
        advantages: the executed action's GAE advantage before normalisation, ``(B,)``.
        executed_differs: 1 where aᵛ ≠ a, ``(B,)``.
        negative_advantage_only: False gates on h alone (no filter).

    Returns:
        A float ``(B,)`` gate in {0, 1}, free of gradient.
    """
    with torch.no_grad():
        gate = has_advisor.float()
        if negative_advantage_only:
            gate = gate * (advantages < 0).float() * executed_differs.float()
    return gate


def advisor_bc_loss(log_prob_advisor: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """L_BC = − Σ g log π(aᵛ | s) / max(1, Σ g): advisor log-likelihood on gated samples only.

    Raises:
        ValueError: if ``log_prob_advisor`` is not one value per sample.
    """
    if log_prob_advisor.shape != gate.shape:
        raise ValueError(
            f"advisor_bc_loss: log_prob_advisor must be per sample with shape {tuple(gate.shape)}, "
            f"got {tuple(log_prob_advisor.shape)}"
        )
    return -masked_mean(log_prob_advisor, gate)
