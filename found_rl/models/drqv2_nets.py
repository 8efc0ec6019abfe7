"""DrQ-v2's actor: a deterministic tanh policy whose exploration std is a schedule, not an output.

Yarats et al. 2021 ("Mastering Visual Continuous Control: Improved Data-Augmented RL"): the
actor outputs μ(s) = tanh(f(s)); actions are drawn from a normal around μ with a std σ(t)
that the learner anneals, clipped to ±c inside the losses and clamped to [−1, 1]. The critic is
``sac_nets.TwinQCritic`` (it owns and trains the shared encoder). The current σ lives in a
buffer so a stand-alone copy of the actor explores like the learner did when it was taken.
"""

from __future__ import annotations

import torch
from torch import nn

from found_rl.models.encoders import mlp
from found_rl.models.observation import TensorObs

DETERMINISTIC = "deterministic"


def clipped_noise(
    shape: torch.Size,
    std: float,
    clip: float | None,
    generator: torch.Generator | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """σ·ε with ε ~ N(0, 1), clipped to ±``clip`` when given (DrQ-v2's ``TruncatedNormal.sample``)."""
    noise = torch.randn(shape, generator=generator).to(device) * std
    return noise if clip is None else noise.clamp(-clip, clip)


def straight_through_clamp(actions: torch.Tensor, bound: float = 1.0) -> torch.Tensor:
    """Clamp to [−bound, bound] in the forward pass, identity gradient (as DrQ-v2's sampler)."""
    return actions + (actions.clamp(-bound, bound) - actions).detach()


class DeterministicActor(nn.Module):
    """μ(s) = tanh(MLP(features)); ``encoder`` maps observations to features."""

    def __init__(self, encoder: nn.Module, action_dim: int, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        self.encoder = encoder
        self.trunk = mlp(encoder.features_dim, hidden)
        self.fc_mean = nn.Linear(hidden[-1] if hidden else encoder.features_dim, action_dim)
        self.register_buffer("exploration_std", torch.tensor(1.0))

    def mean_from_features(self, features: torch.Tensor) -> torch.Tensor:
        """μ(s), ``(B, A)`` in (−1, 1)."""
        return torch.tanh(self.fc_mean(self.trunk(features)))

    def forward(self, obs: TensorObs) -> torch.Tensor:
        return self.mean_from_features(self.encoder(obs))

    def act(self, obs: TensorObs, deterministic: bool = True) -> torch.Tensor:
        """μ(s), or clamp(μ(s) + σ·ε, −1, 1) with the stored σ (unclipped noise, as DrQ-v2 acts)."""
        mean = self(obs)
        if deterministic:
            return mean
        noise = torch.randn_like(mean) * self.exploration_std
        return (mean + noise).clamp(-1.0, 1.0)
