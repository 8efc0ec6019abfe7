"""The acting half of a learner: rebuildable from a ``PolicySpec``, numpy in, numpy out.

``DrivingPolicy`` is what evaluation, checkpoints and the inference benchmark use; it carries
no optimiser, critic or replay state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from found_rl.models.drqv2_nets import DETERMINISTIC, DeterministicActor
from found_rl.models.encoders import NetworkConfig, make_encoder
from found_rl.models.observation import NumpyObs, ObsSpec, obs_to_tensor
from found_rl.models.ppo_nets import ActionKind, ActorCritic
from found_rl.models.sac_nets import SquashedGaussianActor

SQUASHED_GAUSSIAN = "squashed_gaussian"
POLICY_ALGOS = ("sac", "ppo", "drqv2")


@dataclass(frozen=True)
class PolicySpec:
    """Everything needed to rebuild a policy network without the env or the learner."""

    algo: str
    """learner that produced it: 'sac', 'ppo' or 'drqv2'"""
    obs: ObsSpec
    """observation layout"""
    action_dim: int
    """action dimensions (continuous) or number of actions (categorical)"""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    """encoder and head widths"""
    action_kind: str = SQUASHED_GAUSSIAN
    """distribution: 'squashed_gaussian' (SAC), 'deterministic' (DrQ-v2) or a PPO ActionKind value"""

    def __post_init__(self) -> None:
        if self.algo not in POLICY_ALGOS:
            raise ValueError(f"PolicySpec.algo: unknown algorithm {self.algo!r}; allowed: {', '.join(POLICY_ALGOS)}")
        if self.action_dim < 1:
            raise ValueError(f"PolicySpec.action_dim: expected an int >= 1, got {self.action_dim}")
        if self.algo == "sac" and self.action_kind != SQUASHED_GAUSSIAN:
            raise ValueError(f"PolicySpec.action_kind: SAC uses {SQUASHED_GAUSSIAN!r}, got {self.action_kind!r}")
        if self.algo == "drqv2" and self.action_kind != DETERMINISTIC:
            raise ValueError(f"PolicySpec.action_kind: DrQ-v2 uses {DETERMINISTIC!r}, got {self.action_kind!r}")
        if self.algo == "ppo":
            ActionKind.parse(self.action_kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algo": self.algo,
            "obs": self.obs.to_dict(),
            "action_dim": self.action_dim,
            "network": self.network.to_dict(),
            "action_kind": self.action_kind,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicySpec:
        return cls(
            algo=data["algo"],
            obs=ObsSpec.from_dict(data["obs"]),
            action_dim=int(data["action_dim"]),
            network=NetworkConfig.from_dict(data["network"]),
            action_kind=data["action_kind"],
        )


def build_actor(spec: PolicySpec) -> nn.Module:
    """A fresh actor network (with its own encoder) for ``spec``."""
    encoder = make_encoder(spec.obs, spec.network.encoder)
    if spec.algo == "sac":
        return SquashedGaussianActor(encoder, spec.action_dim, spec.network.actor_hidden)
    if spec.algo == "drqv2":
        return DeterministicActor(encoder, spec.action_dim, spec.network.actor_hidden)
    return ActorCritic(
        encoder,
        ActionKind(spec.action_kind),
        spec.action_dim,
        spec.network.actor_hidden,
        spec.network.critic_hidden,
    )


class DrivingPolicy:
    """A trained policy: ``act(obs)`` maps numpy observations to numpy actions.

    Args:
        spec: how the network was built.
        actor: the network (``SquashedGaussianActor``, ``DeterministicActor`` or ``ActorCritic``),
            weights loaded.
        device: where inference runs.
    """

    def __init__(self, spec: PolicySpec, actor: nn.Module, device: torch.device | str = "cpu"):
        self.spec = spec
        self.device = torch.device(device)
        self.actor = actor.to(self.device).eval()

    def act(self, obs: NumpyObs, deterministic: bool = True) -> np.ndarray:
        """Actions for one observation (``(A,)``) or a batch (``(B, A)``; categorical: ``()``/``(B,)``).

        Raises:
            ValueError: if ``obs`` does not match the policy's observation layout.
        """
        tensor_obs, is_single = obs_to_tensor(obs, self.spec.obs, self.device)
        with torch.inference_mode():
            actions = self.actor.act(tensor_obs, deterministic=deterministic)
        array = actions.cpu().numpy()
        return array[0] if is_single else array
