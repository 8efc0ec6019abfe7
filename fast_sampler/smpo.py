"""SMPO: mask-weighted loss helpers that make padded FAST rollouts unbiased (METHOD.md §4).

A FAST rollout keeps its ``(T, N)`` shape by padding ended clips with invalid rows
(``valid == 0``). Every function here treats those rows as absent: a loss, an advantage or a
normalisation statistic computed on a padded batch equals the one computed on the same valid
transitions with the padding removed, and so do their gradients. Padding may hold any value,
even NaN; it is selected away with ``torch.where`` and never multiplied in.

Shapes: time is the leading dimension; ``(T, N)`` is the usual layout (T rollout steps, N clips),
but any ``(T, ...)`` works as long as all inputs share it.
"""

from __future__ import annotations

import torch

__all__ = ["masked_gae", "masked_mean", "masked_normalize"]


def _as_mask(valid: torch.Tensor, like: torch.Tensor, name: str = "valid") -> torch.Tensor:
    """Return ``valid`` as a bool tensor broadcast to ``like``'s shape.

    A mask with fewer dimensions than ``like`` gets trailing singleton dimensions, so a
    ``(T, N)`` mask applies to a ``(T, N, A)`` per-dimension loss.
    """
    mask = valid if valid.dtype == torch.bool else valid != 0
    mask = mask.to(like.device)
    while mask.dim() < like.dim():
        mask = mask.unsqueeze(-1)
    try:
        return mask.expand_as(like)
    except RuntimeError as exc:
        raise ValueError(
            f"{name}: shape {tuple(valid.shape)} cannot broadcast to the values' shape {tuple(like.shape)}"
        ) from exc


def masked_mean(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over valid entries: Σ v·ℓ / max(1, Σ v) (SMPO's adaptive normalisation).

    Args:
        values: per-entry loss terms ℓ, any shape.
        valid: validity v, bool or {0, 1} float, broadcastable to ``values`` (trailing dimensions
            are added when it has fewer). The count Σ v is taken over the broadcast mask, so the
            result equals ``values[valid].mean()`` on the unpadded entries.

    Returns:
        A scalar tensor; 0 when nothing is valid (the ``max(1, ·)`` guard), with zero gradient.
    """
    mask = _as_mask(valid, values)
    total = torch.where(mask, values, torch.zeros_like(values)).sum()
    count = mask.sum().clamp(min=1).to(values.dtype)
    return total / count


def masked_normalize(x: torch.Tensor, valid: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Normalise ``x`` to zero mean and unit std using valid entries only; padding becomes 0.

    Matches CleanRL's ``(adv - adv.mean()) / (adv.std() + eps)`` on the unpadded entries: the
    std is Bessel-corrected (divides by n − 1, guarded to at least 1).

    Args:
        x: values to normalise, e.g. advantages of shape ``(T, N)``.
        valid: validity mask broadcastable to ``x``.
        eps: added to the std to avoid division by zero.

    Returns:
        A tensor shaped like ``x``.
    """
    mask = _as_mask(valid, x)
    zeros = torch.zeros_like(x)
    count = mask.sum().to(x.dtype)
    mean = torch.where(mask, x, zeros).sum() / count.clamp(min=1)
    centred = torch.where(mask, x - mean, zeros)
    std = (centred.pow(2).sum() / (count - 1).clamp(min=1)).sqrt()
    return torch.where(mask, centred / (std + eps), zeros)


def masked_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    valid: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over a padded ``(T, N)`` rollout.

    δ_t = r_t + γ(1 − term_t)·next_values_t − values_t and A_t = δ_t + γλ·c_t·A_{t+1}, where the
    chain flag c_t is 0 when transition t is done (terminated or truncated), when row t + 1 is
    padding, or when t is the last row; bootstrapping at truncation or at the end of the rollout
    comes from ``next_values_t``. Padding rows get A = 0 and never feed a valid row.

    Args:
        rewards: r_t, shape ``(T, ...)``.
        values: V(o_t), same shape.
        next_values: V(o_{t+1}) of the same transition, i.e. the value of the observation the
            step returned (the bootstrap value at truncation), same shape.
        terminated: the episode really ended at t (no bootstrap), bool or {0, 1}.
        truncated: the episode was cut at t (bootstrap from ``next_values``), bool or {0, 1}.
        valid: 1 for real transitions, 0 for padding.
        gamma: discount γ in [0, 1].
        gae_lambda: λ in [0, 1].

    Returns:
        ``(advantages, returns)`` with ``returns = advantages + values``; both are 0 on padding.

    Raises:
        ValueError: if the shapes differ or γ, λ lie outside [0, 1].
    """
    named = {
        "values": values,
        "next_values": next_values,
        "terminated": terminated,
        "truncated": truncated,
        "valid": valid,
    }
    for name, tensor in named.items():
        if tensor.shape != rewards.shape:
            raise ValueError(f"masked_gae: {name} has shape {tuple(tensor.shape)}, rewards have {tuple(rewards.shape)}")
    if rewards.dim() < 1 or rewards.shape[0] == 0:
        raise ValueError(f"masked_gae: expected a non-empty leading time dimension, got shape {tuple(rewards.shape)}")
    for name, value in (("gamma", gamma), ("gae_lambda", gae_lambda)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"masked_gae: {name} must lie in [0, 1], got {value}")

    is_valid = valid if valid.dtype == torch.bool else valid != 0
    is_terminal = terminated if terminated.dtype == torch.bool else terminated != 0
    is_done = is_terminal | (truncated if truncated.dtype == torch.bool else truncated != 0)
    zeros = torch.zeros_like(values[0])

    horizon = rewards.shape[0]
    advantages_reversed: list[torch.Tensor] = []
    next_advantage = zeros
    for t in reversed(range(horizon)):
        bootstrap = torch.where(is_terminal[t], zeros, next_values[t])
        delta = rewards[t] + gamma * bootstrap - values[t]
        if t == horizon - 1:
            advantage = delta
        else:
            chains = ~is_done[t] & is_valid[t + 1]
            carried = torch.where(chains, next_advantage, zeros)
            advantage = delta + gamma * gae_lambda * carried
        advantage = torch.where(is_valid[t], advantage, zeros)
        advantages_reversed.append(advantage)
        next_advantage = advantage
    advantages = torch.stack(advantages_reversed[::-1])
    returns = torch.where(is_valid, advantages + values, torch.zeros_like(values))
    return advantages, returns
