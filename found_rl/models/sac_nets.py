"""SAC networks: a tanh-squashed Gaussian actor and twin Q critics sharing one encoder.

Actions live in [-1, 1]^A (the driving action (acc, steer); gymnasium classics are rescaled by
the env wrapper). The critic owns the encoder and trains it; the actor reads the same encoder
with the features detached (SAC-AE / DrQ practice), so only the TD loss shapes the features.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from found_rl.models.encoders import mlp
from found_rl.models.observation import TensorObs

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0  # CleanRL's bounds for the squashed Gaussian


def squashed_gaussian_log_prob(mean: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
    """log π(tanh(u)) for u ~ N(mean, exp(log_std)²), summed over action dimensions once.

    Uses the stable form log(1 − tanh(u)²) = 2·(log 2 − u − softplus(−2u)).

    Args:
        mean, log_std, pre_tanh: ``(B, A)`` tensors; ``pre_tanh`` is u = atanh(action).

    Returns:
        ``(B,)`` per-sample log-probabilities.
    """
    std = log_std.exp()
    gaussian = -0.5 * ((pre_tanh - mean) / std).pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)
    tanh_correction = 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
    return (gaussian - tanh_correction).sum(dim=-1)


class SquashedGaussianActor(nn.Module):
    """π(a | s) = tanh(N(μ(s), σ(s)²)); ``encoder`` maps observations to features."""

    def __init__(self, encoder: nn.Module, action_dim: int, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        self.encoder = encoder
        self.trunk = mlp(encoder.features_dim, hidden)
        width = hidden[-1] if hidden else encoder.features_dim
        self.fc_mean = nn.Linear(width, action_dim)
        self.fc_logstd = nn.Linear(width, action_dim)

    def forward(self, obs: TensorObs, detach_encoder: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the Gaussian's ``(mean, log_std)``, each ``(B, A)``, before squashing."""
        features = self.encoder(obs)
        return self.params_from_features(features.detach() if detach_encoder else features)

    def params_from_features(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, log_std)`` from encoder features (lets a learner reuse one encoder pass)."""
        hidden = self.trunk(features)
        mean = self.fc_mean(hidden)
        log_std = torch.tanh(self.fc_logstd(hidden))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        return mean, log_std

    def sample_from_features(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised sample.

        Returns:
            ``(action (B, A), log_prob (B,), deterministic_action (B, A))``.
        """
        return self.sample_from_params(*self.params_from_features(features))

    @staticmethod
    def sample_from_params(
        mean: torch.Tensor, log_std: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`sample_from_features` on the Gaussian's parameters (lets one head pass serve
        the sample, the mode and the log-probability of other actions)."""
        pre_tanh = mean + log_std.exp() * torch.randn_like(mean)
        log_prob = squashed_gaussian_log_prob(mean, log_std, pre_tanh)
        return torch.tanh(pre_tanh), log_prob, torch.tanh(mean)

    def log_prob_from_features(self, features: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Per-sample log π(actions | s), ``(B,)``; actions must lie strictly inside (−1, 1)."""
        return self.log_prob_from_params(*self.params_from_features(features), actions)

    @staticmethod
    def log_prob_from_params(mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """:meth:`log_prob_from_features` on the Gaussian's parameters."""
        return squashed_gaussian_log_prob(mean, log_std, torch.atanh(actions))

    def sample(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``sample_from_features`` on ``obs``."""
        return self.sample_from_features(self.encoder(obs))

    def log_prob(self, obs: TensorObs, actions: torch.Tensor) -> torch.Tensor:
        """``log_prob_from_features`` on ``obs``."""
        return self.log_prob_from_features(self.encoder(obs), actions)

    def act(self, obs: TensorObs, deterministic: bool = True) -> torch.Tensor:
        """Actions ``(B, A)`` in [-1, 1] for rollouts and evaluation."""
        if deterministic:
            mean, _ = self(obs)
            return torch.tanh(mean)
        return self.sample(obs)[0]


class TwinQCritic(nn.Module):
    """Q₁(s, a), Q₂(s, a) on shared encoder features."""

    def __init__(self, encoder: nn.Module, action_dim: int, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        self.encoder = encoder
        width = encoder.features_dim + action_dim
        self.qf1 = nn.Sequential(mlp(width, hidden), nn.Linear(hidden[-1] if hidden else width, 1))
        self.qf2 = nn.Sequential(mlp(width, hidden), nn.Linear(hidden[-1] if hidden else width, 1))

    def q_values(self, features: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics on precomputed features, each ``(B,)`` (lets VMR reuse one encoder pass)."""
        joint = torch.cat([features, actions], dim=1)
        return self.qf1(joint).squeeze(-1), self.qf2(joint).squeeze(-1)

    def forward(self, obs: TensorObs, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q_values(self.encoder(obs), actions)
