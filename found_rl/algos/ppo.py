"""PPO with SMPO: clipped surrogate, value and entropy losses averaged over valid transitions only.

PPO: Schulman et al. 2017. SMPO (FAST, METHOD §4): a FAST rollout keeps its (T, N) shape with
padding rows (valid = 0); every loss is Σ v·ℓ / max(1, Σ v), GAE stops at done flags and never
reads padding, and advantages are normalised over valid entries, so the loss and its gradient
equal those of the unpadded batch. The update follows CleanRL's ``ppo_continuous_action.py``;
rollout collection lives in the driver (the learner never touches an env).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from fast_sampler.smpo import masked_mean, masked_normalize
from found_rl.algos.guidance import GuidanceTerm
from found_rl.algos.numerics import ensure_finite
from found_rl.models.encoders import EncoderConfig, NetworkConfig, make_encoder
from found_rl.models.observation import NumpyObs, ObsSpec, TensorObs, obs_to_tensor
from found_rl.models.policy import DrivingPolicy, PolicySpec
from found_rl.models.ppo_nets import ActionKind, ActorCritic
from found_rl.storage.rollout import RolloutSamples

LOSS_TAGS = (
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "charts/learning_rate",
    "perf/valid_fraction",
)
PPO_GUIDANCE = (GuidanceTerm.CLIP_BONUS,)


@dataclass(frozen=True)
class PpoConfig:
    """PPO hyper-parameters (CleanRL defaults)."""

    learning_rate: float = 3e-4
    """Adam learning rate (initial value when annealed)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 at total_timesteps"""
    total_timesteps: int = 1_000_000
    """env steps of the whole run (for annealing)"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """GAE λ"""
    update_epochs: int = 10
    """passes over each rollout"""
    num_minibatches: int = 32
    """minibatches per pass"""
    norm_adv: bool = True
    """normalise advantages per minibatch (valid entries only)"""
    clip_coef: float = 0.2
    """surrogate clipping ε"""
    clip_vloss: bool = True
    """clip the value loss around the old values"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip (0 = off)"""
    target_kl: float = 0.0
    """stop the epochs early when approx KL exceeds this (0 = never)"""
    action_kind: str = "beta"
    """continuous policy: 'beta' or 'gaussian' (Discrete spaces always use 'categorical')"""
    guidance: tuple[str, ...] = ()
    """guidance terms: only 'clip_bonus' applies to PPO (added in RolloutStorage.compute_returns)"""
    network: NetworkConfig = field(
        default_factory=lambda: NetworkConfig(EncoderConfig(), actor_hidden=(64, 64), critic_hidden=(64, 64))
    )
    """encoder and head widths"""

    def __post_init__(self) -> None:
        rules = (
            ("learning_rate", self.learning_rate > 0, "> 0"),
            ("total_timesteps", self.total_timesteps >= 1, ">= 1"),
            ("gamma", 0.0 <= self.gamma <= 1.0, "in [0, 1]"),
            ("gae_lambda", 0.0 <= self.gae_lambda <= 1.0, "in [0, 1]"),
            ("update_epochs", self.update_epochs >= 1, ">= 1"),
            ("num_minibatches", self.num_minibatches >= 1, ">= 1"),
            ("clip_coef", self.clip_coef > 0, "> 0"),
            ("ent_coef", self.ent_coef >= 0, ">= 0"),
            ("vf_coef", self.vf_coef >= 0, ">= 0"),
            ("max_grad_norm", self.max_grad_norm >= 0, ">= 0"),
            ("target_kl", self.target_kl >= 0, ">= 0"),
        )
        for name, ok, allowed in rules:
            if not ok:
                raise ValueError(f"PpoConfig.{name}: expected {allowed}, got {getattr(self, name)!r}")
        kind = ActionKind.parse(self.action_kind)
        if kind is ActionKind.CATEGORICAL:
            raise ValueError(
                "PpoConfig.action_kind: expected 'beta' or 'gaussian' (categorical follows a Discrete space)"
            )
        for name in self.guidance:
            if GuidanceTerm.parse(name) not in PPO_GUIDANCE:
                raise ValueError(
                    f"PpoConfig.guidance: {name!r} needs a Q-learning learner (SAC); PPO supports only 'clip_bonus'"
                )


class PpoLosses(NamedTuple):
    """Scalar loss terms of one minibatch."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    old_approx_kl: torch.Tensor
    approx_kl: torch.Tensor
    clipfrac: torch.Tensor


def ppo_losses(
    new_log_probs: torch.Tensor,
    entropy: torch.Tensor,
    new_values: torch.Tensor,
    mb: RolloutSamples,
    config: PpoConfig,
) -> PpoLosses:
    """Clipped-surrogate, value and entropy terms, each a masked mean over ``mb.valid`` (SMPO).

    Args:
        new_log_probs, entropy, new_values: current policy on ``mb``, each ``(M,)``.
        mb: the minibatch (old log-probs, values, advantages, returns, validity).
        config: coefficients.
    """
    valid = mb.valid
    logratio = new_log_probs - mb.log_probs
    ratio = logratio.exp()
    with torch.no_grad():  # http://joschu.net/blog/kl-approx.html
        old_approx_kl = masked_mean(-logratio, valid)
        approx_kl = masked_mean((ratio - 1) - logratio, valid)
        clipfrac = masked_mean(((ratio - 1.0).abs() > config.clip_coef).float(), valid)
    advantages = masked_normalize(mb.advantages, valid) if config.norm_adv else mb.advantages
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - config.clip_coef, 1 + config.clip_coef)
    policy_loss = masked_mean(torch.max(pg_loss1, pg_loss2), valid)
    if config.clip_vloss:
        v_loss_unclipped = (new_values - mb.returns) ** 2
        v_clipped = mb.values + torch.clamp(new_values - mb.values, -config.clip_coef, config.clip_coef)
        v_loss_clipped = (v_clipped - mb.returns) ** 2
        value_loss = 0.5 * masked_mean(torch.max(v_loss_unclipped, v_loss_clipped), valid)
    else:
        value_loss = 0.5 * masked_mean((new_values - mb.returns) ** 2, valid)
    entropy_loss = masked_mean(entropy, valid)
    loss = policy_loss - config.ent_coef * entropy_loss + value_loss * config.vf_coef
    return PpoLosses(loss, policy_loss, value_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac)


class PPO:
    """PPO learner over ``RolloutSamples``.

    Args:
        obs_spec: observation layout.
        action_kind: 'categorical' (Discrete), or 'beta' / 'gaussian' (actions in [-1, 1]).
        action_dim: number of actions (categorical) or action dimensions.
        config: hyper-parameters.
        device: where the network lives.
        seed: seeds the minibatch shuffling.
    """

    def __init__(
        self,
        obs_spec: ObsSpec,
        action_kind: ActionKind | str,
        action_dim: int,
        config: PpoConfig = PpoConfig(),
        device: torch.device | str = "cpu",
        seed: int = 0,
    ):
        self.config, self.obs_spec, self.action_dim = config, obs_spec, action_dim
        self.action_kind = ActionKind.parse(action_kind) if isinstance(action_kind, str) else action_kind
        self.device = torch.device(device)
        self.rng = np.random.default_rng(seed)
        encoder = make_encoder(obs_spec, config.network.encoder)
        self.agent = ActorCritic(
            encoder,
            self.action_kind,
            action_dim,
            config.network.actor_hidden,
            config.network.critic_hidden,
        ).to(self.device)
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=config.learning_rate, eps=1e-5)

    @property
    def policy_spec(self) -> PolicySpec:
        return PolicySpec(
            "ppo",
            self.obs_spec,
            self.action_dim,
            self.config.network,
            self.action_kind.value,
        )

    def policy(self) -> DrivingPolicy:
        """The current actor-critic as a stand-alone policy (a copy)."""
        return DrivingPolicy(self.policy_spec, copy.deepcopy(self.agent), self.device)

    def step(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions while collecting: ``(actions, log_probs, values)``, no gradient."""
        with torch.no_grad():
            actions, log_probs, _, values = self.agent.get_action_and_value(obs)
        return actions, log_probs, values

    def value(self, obs: TensorObs) -> torch.Tensor:
        """V(obs), ``(B,)``, no gradient (bootstrap values)."""
        with torch.no_grad():
            return self.agent.get_value(obs)

    def act(self, obs: NumpyObs, deterministic: bool = True) -> np.ndarray:
        tensor_obs, _ = obs_to_tensor(obs, self.obs_spec, self.device)
        with torch.no_grad():
            return self.agent.act(tensor_obs, deterministic).cpu().numpy()

    def update(self, rollout: RolloutSamples, global_step: int) -> dict[str, float]:
        """Epochs × minibatches of SMPO-masked PPO on one rollout.

        Args:
            rollout: the flattened rollout from ``RolloutStorage.compute_returns``.
            global_step: env steps so far; anneals the learning rate.

        Raises:
            FloatingPointError: naming the first non-finite loss term.
        """
        cfg = self.config
        if cfg.anneal_lr:
            frac = max(0.0, 1.0 - global_step / cfg.total_timesteps)
            self.optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
        batch_size = int(rollout.valid.shape[0])
        minibatch_size = max(1, batch_size // cfg.num_minibatches)
        stats: list[PpoLosses] = []
        for _ in range(cfg.update_epochs):
            order = torch.as_tensor(self.rng.permutation(batch_size), device=self.device)
            for start in range(0, batch_size - minibatch_size + 1, minibatch_size):
                mb = rollout.index(order[start : start + minibatch_size])
                _, new_log_probs, entropy, new_values = self.agent.get_action_and_value(mb.observations, mb.actions)
                losses = ppo_losses(new_log_probs, entropy, new_values, mb, cfg)
                ensure_finite(
                    {
                        "losses/policy_loss": losses.policy_loss,
                        "losses/value_loss": losses.value_loss,
                        "losses/entropy": losses.entropy,
                    },
                    global_step,
                )
                self.optimizer.zero_grad()
                losses.loss.backward()
                if cfg.max_grad_norm > 0:
                    nn.utils.clip_grad_norm_(self.agent.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                stats.append(losses)
            if cfg.target_kl > 0 and stats and stats[-1].approx_kl.item() > cfg.target_kl:
                break
        last = stats[-1]
        valid = rollout.valid
        returns_var = torch.var(rollout.returns[valid > 0]) if valid.sum() > 1 else torch.tensor(float("nan"))
        residual_var = (
            torch.var((rollout.returns - rollout.values)[valid > 0]) if valid.sum() > 1 else torch.tensor(float("nan"))
        )
        explained_var = float("nan") if returns_var == 0 else (1 - residual_var / returns_var).item()
        return {
            "losses/value_loss": last.value_loss.item(),
            "losses/policy_loss": last.policy_loss.item(),
            "losses/entropy": last.entropy.item(),
            "losses/old_approx_kl": last.old_approx_kl.item(),
            "losses/approx_kl": last.approx_kl.item(),
            "losses/clipfrac": float(np.mean([s.clipfrac.item() for s in stats])),
            "losses/explained_variance": explained_var,
            "charts/learning_rate": self.optimizer.param_groups[0]["lr"],
            "perf/valid_fraction": valid.mean().item(),
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume training."""
        return {
            "agent": self.agent.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = state["rng"]
