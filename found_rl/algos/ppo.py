"""PPO with SMPO and advisor guidance: exactly the unpadded update on a padded FAST rollout.

PPO: Schulman et al. 2017. SMPO (FAST, METHOD §4): a FAST rollout keeps its (T, N) shape with
padding rows (valid = 0); GAE stops at done flags and never reads padding. ``update`` then forms
its minibatches from the valid entries only, all of them every epoch, so a padded rollout
produces the same parameters as the same valid transitions without padding (same seed), and no
padding value, NaN included, can reach a gradient or Adam's moments. The update follows
CleanRL's ``ppo_continuous_action.py``; rollout collection lives in the driver.

Guidance (docs/method.md §6): the CLIP bonus is added to the GAE reward when
``clip_bonus.enabled`` (``PPO.compute_returns``), and ``advisor_bc.enabled`` adds an
advantage-gated log-likelihood of the advisor action with a linearly decaying coefficient.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from fast_sampler.smpo import masked_mean, masked_normalize
from found_rl.algos.config_checks import check_finite_floats, check_rules, check_settings
from found_rl.algos.guidance import advisor_bc_gate, advisor_bc_loss
from found_rl.algos.numerics import ensure_finite
from found_rl.algos.optim import adam
from found_rl.algos.schedules import linear_decay
from found_rl.guidance_settings import AdvisorBc, ClipBonus
from found_rl.models.encoders import EncoderConfig, NetworkConfig, make_encoder
from found_rl.models.observation import NumpyObs, ObsSpec, TensorObs, obs_to_tensor
from found_rl.models.policy import DrivingPolicy, PolicySpec
from found_rl.models.ppo_nets import ActionKind, ActorCritic
from found_rl.storage.rollout import RolloutSamples, RolloutStorage

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
ADVISOR_BC_TAGS = (
    "guidance/advisor_bc_loss",
    "guidance/advisor_bc_coef",
    "guidance/advisor_bc_gate_fraction",
)
LABEL_TAGS = ("guidance/label_coverage",)


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
    clip_bonus: ClipBonus = field(default_factory=ClipBonus)
    """the CLIP bonus on the GAE reward (METHOD §3; ``PPO.compute_returns``); off unless enabled"""
    advisor_bc: AdvisorBc = field(default_factory=AdvisorBc)
    """advantage-gated advisor log-likelihood (docs/method.md §6); off unless enabled"""
    advisor_action_eps: float = 1e-3
    """continuous advisor actions are clipped to ±(1 − ε) before log π (Beta's density is 0 on the bound)"""
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
            ("advisor_action_eps", 0 < self.advisor_action_eps < 1, "in (0, 1)"),
        )
        check_finite_floats(self)
        check_rules(self, rules)
        check_settings(self, clip_bonus=ClipBonus, advisor_bc=AdvisorBc)
        kind = ActionKind.parse(self.action_kind)
        if kind is ActionKind.CATEGORICAL:
            raise ValueError(
                "PpoConfig.action_kind: expected 'beta' or 'gaussian' (categorical follows a Discrete space)"
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
        self.optimizer = adam(self.agent.parameters(), lr=config.learning_rate, eps=1e-5)

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

    def compute_returns(self, storage: RolloutStorage, last_values: torch.Tensor) -> RolloutSamples:
        """Masked GAE of a full ``storage`` with this config's γ, λ and CLIP-bonus switch.

        The bonus attached to entries is added to the learner's reward only when
        ``clip_bonus.enabled`` (METHOD §3); otherwise attached bonuses are ignored.
        """
        cfg = self.config
        return storage.compute_returns(
            last_values, cfg.gamma, cfg.gae_lambda, clip_bonus=cfg.clip_bonus.enabled
        )

    def advisor_bc_coefficient(self, global_step: int) -> float:
        """c(t) = c₀ until the decay starts, linear to 0 at its end, 0 after (docs/method.md §6)."""
        bc = self.config.advisor_bc
        return bc.coef * linear_decay(global_step, bc.decay_start_steps, bc.decay_end_steps, 1.0, 0.0)

    def minibatch_indices(self, valid: torch.Tensor) -> list[torch.Tensor]:
        """One epoch's minibatches: a permutation of the valid entries, split into near-equal parts.

        Every valid entry is used exactly once per epoch (sizes differ by at most one; none is
        dropped); padding entries are never drawn. For a rollout without padding of a size
        divisible by ``num_minibatches`` this is CleanRL's split exactly.
        """
        valid_index = torch.nonzero(valid > 0).squeeze(-1).to(self.device)
        count = int(valid_index.numel())
        order = torch.as_tensor(self.rng.permutation(count), device=self.device)
        parts = min(self.config.num_minibatches, count)
        return [valid_index[part] for part in torch.tensor_split(order, parts)]

    def update(self, rollout: RolloutSamples, global_step: int) -> dict[str, float]:
        """Epochs × minibatches of PPO over the valid entries of one rollout.

        Args:
            rollout: the flattened rollout from ``PPO.compute_returns`` (padding included; it
                is skipped here, whatever it holds).
            global_step: env steps so far; anneals the learning rate and the advisor term.

        Raises:
            ValueError: if the rollout holds no valid entry.
            FloatingPointError: naming the first non-finite loss term.
        """
        cfg = self.config
        if not bool((rollout.valid > 0).any()):
            raise ValueError("PPO.update: the rollout holds no valid transition (every entry is padding)")
        if cfg.anneal_lr:
            frac = max(0.0, 1.0 - global_step / cfg.total_timesteps)
            self.optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
        use_advisor = cfg.advisor_bc.enabled and rollout.has_advisor is not None
        bc_coef = self.advisor_bc_coefficient(global_step) if use_advisor else 0.0
        stats: list[PpoLosses] = []
        bc_logs: list[tuple[float, float]] = []
        for _ in range(cfg.update_epochs):
            for index in self.minibatch_indices(rollout.valid):
                mb = rollout.index(index)
                advisor_actions = self._clipped_advisor_actions(mb.advisor_actions) if use_advisor else None
                new_log_probs, entropy, new_values, advisor_log_probs = self.agent.evaluate_actions(
                    mb.observations, mb.actions, advisor_actions
                )
                losses = ppo_losses(new_log_probs, entropy, new_values, mb, cfg)
                checked = {
                    "losses/policy_loss": losses.policy_loss,
                    "losses/value_loss": losses.value_loss,
                    "losses/entropy": losses.entropy,
                }
                loss = losses.loss
                if use_advisor:
                    gate = self._advisor_gate(mb)
                    bc_term = advisor_bc_loss(advisor_log_probs, gate)
                    checked["guidance/advisor_bc_loss"] = bc_term
                    loss = loss + bc_coef * bc_term
                    bc_logs.append((bc_term.item(), gate.mean().item()))
                ensure_finite(checked, global_step)
                self.optimizer.zero_grad()
                loss.backward()
                if cfg.max_grad_norm > 0:
                    nn.utils.clip_grad_norm_(self.agent.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                stats.append(losses)
            if cfg.target_kl > 0 and stats and stats[-1].approx_kl.item() > cfg.target_kl:
                break
        logs = self._logs(rollout, stats)
        if rollout.has_advisor is not None:
            is_valid = rollout.valid > 0
            logs["guidance/label_coverage"] = rollout.has_advisor[is_valid].float().mean().item()
        if use_advisor:
            logs.update(
                {
                    "guidance/advisor_bc_loss": bc_logs[-1][0],
                    "guidance/advisor_bc_coef": bc_coef,
                    "guidance/advisor_bc_gate_fraction": float(np.mean([g for _, g in bc_logs])),
                }
            )
        return logs

    def _clipped_advisor_actions(self, advisor_actions: torch.Tensor | None) -> torch.Tensor | None:
        if advisor_actions is None or self.action_kind is ActionKind.CATEGORICAL:
            return advisor_actions
        bound = 1.0 - self.config.advisor_action_eps
        return advisor_actions.clamp(-bound, bound)

    def _advisor_gate(self, mb: RolloutSamples) -> torch.Tensor:
        assert mb.has_advisor is not None and mb.advisor_actions is not None
        differs = mb.advisor_actions != mb.actions
        if differs.dim() > 1:
            differs = differs.any(dim=-1)
        return advisor_bc_gate(
            mb.has_advisor,
            mb.advantages,
            differs,
            negative_advantage_only=self.config.advisor_bc.filter == "negative_advantage",
        )

    def _logs(self, rollout: RolloutSamples, stats: list[PpoLosses]) -> dict[str, float]:
        last = stats[-1]
        is_valid = rollout.valid > 0
        returns = rollout.returns[is_valid]
        residuals = (rollout.returns - rollout.values)[is_valid]
        if returns.numel() > 1:
            returns_var = torch.var(returns)
            explained_var = float("nan") if returns_var == 0 else (1 - torch.var(residuals) / returns_var).item()
        else:
            explained_var = float("nan")
        return {
            "losses/value_loss": last.value_loss.item(),
            "losses/policy_loss": last.policy_loss.item(),
            "losses/entropy": last.entropy.item(),
            "losses/old_approx_kl": last.old_approx_kl.item(),
            "losses/approx_kl": last.approx_kl.item(),
            "losses/clipfrac": float(np.mean([s.clipfrac.item() for s in stats])),
            "losses/explained_variance": explained_var,
            "charts/learning_rate": self.optimizer.param_groups[0]["lr"],
            "perf/valid_fraction": rollout.valid.mean().item(),
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


# ---------------------------------------------------------------------- the registry's view
# found_rl.algos.registry reads these names: the learner is this module plus one registry line.
CONFIG = PpoConfig
TAGS = (*LOSS_TAGS, *LABEL_TAGS, *ADVISOR_BC_TAGS)
ACTOR_STEP_TAGS: tuple[str, ...] = ()
"""none: one update returns every tag"""


def make(obs_spec: ObsSpec, action_dim: int, config: PpoConfig, device: torch.device | str, seed: int) -> PPO:
    return PPO(obs_spec, config.action_kind, action_dim, config, device, seed)


def config_from_run(learner: Any, guidance: Any, network: NetworkConfig, env_steps: int | None) -> PpoConfig:
    """PPO's config from a run config's ``learner`` section, read by field name, its ``guidance``
    settings, handed on as they are, and the env-step budget (the learning rate anneals over it;
    1M steps when the run is bounded by wall time only)."""
    return PpoConfig(
        learning_rate=learner.policy_lr, total_timesteps=env_steps or 1_000_000, gamma=learner.gamma,
        update_epochs=learner.update_epochs, num_minibatches=learner.num_minibatches,
        clip_bonus=guidance.clip_bonus, advisor_bc=guidance.advisor_bc, network=network,
    )
