"""PPO actor-critic: categorical, Gaussian or Beta policy and a state-value head.

Vector observations use CleanRL's layout (separate 64-64 tanh MLPs for actor and critic,
orthogonal init); driving observations share one BEV + state encoder between both heads, as in
Roach. The Beta policy keeps continuous actions inside [-1, 1] without clipping.
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Beta, Categorical, Distribution, Independent, Normal

from found_rl.argtypes import enum_member
from found_rl.models.observation import TensorObs

BETA_EPS = 1e-6


class ActionKind(str, Enum):
    """Distribution family of the PPO policy."""

    CATEGORICAL = "categorical"
    GAUSSIAN = "gaussian"
    BETA = "beta"

    @classmethod
    def parse(cls, name: str) -> ActionKind:
        return enum_member(cls, name, "action_kind", "distribution")


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    """Orthogonal weights and constant bias (CleanRL's PPO initialisation)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def _head(input_dim: int, hidden: tuple[int, ...], output_dim: int, output_std: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = input_dim
    for size in hidden:
        layers += [layer_init(nn.Linear(width, size)), nn.Tanh()]
        width = size
    layers.append(layer_init(nn.Linear(width, output_dim), std=output_std))
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """π(a | s) and V(s) for PPO.

    Args:
        encoder: maps observations to ``(B, features_dim)``; shared by both heads.
        action_kind: distribution family.
        action_dim: number of discrete actions (categorical) or action dimensions.
        actor_hidden, critic_hidden: hidden widths of the heads (tanh activations).
    """

    def __init__(
        self,
        encoder: nn.Module,
        action_kind: ActionKind,
        action_dim: int,
        actor_hidden: tuple[int, ...] = (64, 64),
        critic_hidden: tuple[int, ...] = (64, 64),
    ):
        super().__init__()
        self.encoder = encoder
        self.action_kind = ActionKind(action_kind)
        self.action_dim = action_dim
        features = encoder.features_dim
        self.critic = _head(features, critic_hidden, 1, output_std=1.0)
        outputs = 2 * action_dim if self.action_kind is ActionKind.BETA else action_dim
        self.actor = _head(features, actor_hidden, outputs, output_std=0.01)
        if self.action_kind is ActionKind.GAUSSIAN:
            self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, obs: TensorObs) -> torch.Tensor:
        """V(s), ``(B,)``."""
        return self.critic(self.encoder(obs)).squeeze(-1)

    def distribution(self, features: torch.Tensor) -> Distribution:
        """The policy distribution over actions in env units (Beta is mapped from [0, 1] to [-1, 1])."""
        out = self.actor(features)
        if self.action_kind is ActionKind.CATEGORICAL:
            return Categorical(logits=out, validate_args=False)
        if self.action_kind is ActionKind.GAUSSIAN:
            return Independent(
                Normal(out, self.actor_logstd.expand_as(out).exp(), validate_args=False),
                1,
                validate_args=False,
            )
        concentration1, concentration0 = (F.softplus(part) + 1.0 for part in out.chunk(2, dim=-1))
        return Independent(
            Beta(concentration1, concentration0, validate_args=False),
            1,
            validate_args=False,
        )

    def get_action_and_value(
        self, obs: TensorObs, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (or score a given) action.

        Returns:
            ``(action, log_prob (B,), entropy (B,), value (B,))``; continuous actions are in env
            units ([-1, 1] for Beta).
        """
        features = self.encoder(obs)
        dist = self.distribution(features)
        value = self.critic(features).squeeze(-1)
        if self.action_kind is ActionKind.BETA:
            unit = (action + 1.0) / 2.0 if action is not None else dist.sample()
            unit = unit.clamp(BETA_EPS, 1.0 - BETA_EPS)
            log_prob, entropy = self._score(dist, 2.0 * unit - 1.0, unit)
            return 2.0 * unit - 1.0, log_prob, entropy, value
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), value

    def evaluate_actions(
        self, obs: TensorObs, actions: torch.Tensor, advisor_actions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One encoder pass for a PPO minibatch: ``(log π(a), entropy, V, log π(aᵛ) or None)``, each ``(B,)``."""
        features = self.encoder(obs)
        dist = self.distribution(features)
        value = self.critic(features).squeeze(-1)
        log_prob, entropy = self._score(dist, actions)
        advisor_log_prob = None if advisor_actions is None else self._score(dist, advisor_actions)[0]
        return log_prob, entropy, value, advisor_log_prob

    def _score(
        self, dist: Distribution, action: torch.Tensor, unit: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log p(action), entropy)`` with actions in env units (``unit``: Beta's u, if known)."""
        if self.action_kind is ActionKind.BETA:
            # Beta lives on [0, 1]: a = 2u − 1, so log p(a) = log p(u) − A·log 2.
            if unit is None:
                unit = ((action + 1.0) / 2.0).clamp(BETA_EPS, 1.0 - BETA_EPS)
            log_two = self.action_dim * math.log(2.0)
            return dist.log_prob(unit) - log_two, dist.entropy() + log_two
        return dist.log_prob(action), dist.entropy()

    def act(self, obs: TensorObs, deterministic: bool = True) -> torch.Tensor:
        """Actions for rollouts and evaluation: the mode (categorical), mean (Gaussian, Beta) or a sample."""
        features = self.encoder(obs)
        if not deterministic:
            return self.get_action_and_value(obs)[0]
        out = self.actor(features)
        if self.action_kind is ActionKind.CATEGORICAL:
            return out.argmax(dim=-1)
        if self.action_kind is ActionKind.GAUSSIAN:
            return out.clamp(-1.0, 1.0)
        concentration1, concentration0 = (F.softplus(part) + 1.0 for part in out.chunk(2, dim=-1))
        return 2.0 * concentration1 / (concentration1 + concentration0) - 1.0


def action_kind_for_space(space: object, requested: str = "beta") -> tuple[ActionKind, int]:
    """Pick the distribution for a gymnasium action space (Discrete → categorical).

    Raises:
        ValueError: for spaces other than Discrete and 1-D Box, or a Box outside [-1, 1].
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return ActionKind.CATEGORICAL, int(space.n)
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        if not (np.all(space.low >= -1.0) and np.all(space.high <= 1.0)):
            raise ValueError(f"action space: continuous actions must lie in [-1, 1] (rescale the env), got {space}")
        kind = ActionKind.parse(requested)
        if kind is ActionKind.CATEGORICAL:
            raise ValueError(f"action_kind: 'categorical' needs a Discrete action space, got {space}")
        return kind, int(space.shape[0])
    raise ValueError(f"action space: expected Discrete or a 1-D Box, got {space}")
