"""Soft Actor-Critic with VMR, AWAG and the CLIP reward bonus.

SAC: Haarnoja et al. 2018 (automatic entropy tuning: "SAC Algorithms and Applications").
Guidance: METHOD §1 (VMR on both critics), §2 (AWAG on the actor), §3 (CLIP bonus on the TD
reward only). The update follows CleanRL's ``sac_continuous_action.py`` step for step; the
differences are the per-sample label masks and the guidance terms. The learner never touches
an env: it maps a ``ReplaySamples`` batch to new weights and a ``dict`` of logged floats.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from found_rl.algos.augment import shift_observation
from found_rl.algos.config_checks import check_finite_floats, check_rules, check_settings
from found_rl.algos.guidance import awag_loss, awag_weights, clip_bonus_rewards, mode_imitation_score, twin_vmr_loss
from found_rl.algos.numerics import ensure_finite
from found_rl.algos.optim import adam, polyak_update
from found_rl.algos.schedules import drqv2_cosine, vmr_coefficient
from found_rl.guidance_settings import Awag, ClipBonus, Vmr
from found_rl.models.encoders import NetworkConfig, make_encoder
from found_rl.models.observation import NumpyObs, ObsSpec, obs_to_tensor
from found_rl.models.policy import DrivingPolicy, PolicySpec
from found_rl.models.sac_nets import SquashedGaussianActor, TwinQCritic
from found_rl.storage.replay import ReplaySamples

TARGET_FEATURES = ("target_encoder", "online_encoder")

# Logged tags (renaming one is a breaking change; tests check the set).
CRITIC_TAGS = (
    "losses/qf1_values",
    "losses/qf2_values",
    "losses/qf1_loss",
    "losses/qf2_loss",
    "losses/qf_loss",
)
ACTOR_TAGS = (
    "losses/actor_loss",
    "losses/alpha",
    "losses/alpha_loss",
    "losses/entropy",
)
LABEL_TAGS = ("guidance/label_coverage", "guidance/clip_coverage")
VMR_TAGS = ("guidance/vmr_loss", "guidance/vmr_coef")
AWAG_TAGS = (
    "guidance/awag_loss",
    "guidance/awag_coef",
    "guidance/awag_gate_fraction",
    "guidance/awag_mean_weight",
)
CLIP_TAGS = ("guidance/clip_bonus_mean",)


@dataclass(frozen=True)
class SacConfig:
    """SAC hyper-parameters (CleanRL defaults) and guidance settings (METHOD defaults)."""

    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 0.005
    """Polyak coefficient of the target critics"""
    batch_size: int = 256
    """transitions per gradient step"""
    policy_lr: float = 3e-4
    """actor (and temperature) learning rate"""
    q_lr: float = 1e-3
    """critic learning rate"""
    policy_frequency: int = 2
    """actor updates are delayed: this many, every this many critic updates (TD3-style, as CleanRL)"""
    target_network_frequency: int = 1
    """Polyak update every this many critic updates"""
    alpha: float = 0.2
    """entropy coefficient when not autotuned (initial value otherwise)"""
    autotune: bool = True
    """learn the entropy coefficient towards target entropy −A·target_entropy_scale"""
    target_entropy_scale: float = 1.0
    """target entropy is −(action dims) × this"""
    max_grad_norm: float = 0.0
    """clip gradient norms of every network to this (0 = no clipping)"""
    drq_pad_px: int = 0
    """DrQ random-shift augmentation of the BEV by up to this many px (0 = off)"""
    target_features: str = "target_encoder"
    """what the target critics read of o_{t+1}: 'target_encoder' (SAC-AE/DrQ: the Polyak-averaged
    encoder, a third encoder pass per update) or 'online_encoder' (DrQ-v2: the online encoder's
    no-grad features, shared with the next action's sample; one pass fewer; docs/method.md)"""
    vmr: Vmr = field(default_factory=Vmr)
    """VMR on both critics (METHOD §1); off unless ``vmr.enabled``"""
    awag: Awag = field(default_factory=Awag)
    """AWAG on the actor (METHOD §2); off unless ``awag.enabled``"""
    clip_bonus: ClipBonus = field(default_factory=ClipBonus)
    """the CLIP bonus on the TD reward (METHOD §3); off unless ``clip_bonus.enabled``"""
    advisor_action_eps: float = 1e-3
    """advisor actions are clipped to ±(1 − ε) before log π (the tanh-squashed Gaussian's atanh
    must stay finite)"""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    """encoder and head widths"""

    def __post_init__(self) -> None:
        rules = (
            ("gamma", 0.0 <= self.gamma <= 1.0, "in [0, 1]"),
            ("tau", 0.0 < self.tau <= 1.0, "in (0, 1]"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("policy_lr", self.policy_lr > 0, "> 0"),
            ("q_lr", self.q_lr > 0, "> 0"),
            ("policy_frequency", self.policy_frequency >= 1, ">= 1"),
            ("target_network_frequency", self.target_network_frequency >= 1, ">= 1"),
            ("alpha", self.alpha > 0, "> 0"),
            ("target_entropy_scale", math.isfinite(self.target_entropy_scale), "a finite float"),
            ("max_grad_norm", self.max_grad_norm >= 0, ">= 0"),
            ("drq_pad_px", self.drq_pad_px >= 0, ">= 0"),
            ("advisor_action_eps", 0 < self.advisor_action_eps < 1, "in (0, 1)"),
            ("target_features", self.target_features in TARGET_FEATURES, f"one of {TARGET_FEATURES}"),
        )
        check_finite_floats(self)
        check_rules(self, rules)
        check_settings(self, vmr=Vmr, awag=Awag, clip_bonus=ClipBonus)


class SAC:
    """SAC learner: networks, optimisers and ``update``.

    Args:
        obs_spec: observation layout.
        action_dim: A; actions live in [-1, 1]^A.
        config: hyper-parameters.
        device: where the networks live.
        seed: seeds the augmentation generator (torch's global RNG drives action noise; seed it
            once at the entry point).
    """

    def __init__(
        self,
        obs_spec: ObsSpec,
        action_dim: int,
        config: SacConfig = SacConfig(),
        device: torch.device | str = "cpu",
        seed: int = 0,
    ):
        self.config, self.obs_spec, self.action_dim = config, obs_spec, action_dim
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        encoder = make_encoder(obs_spec, config.network.encoder)
        # The critic owns the encoder; the actor reads it with detached features (SAC-AE/DrQ).
        self.qf = TwinQCritic(encoder, action_dim, config.network.critic_hidden).to(self.device)
        self.actor = SquashedGaussianActor(encoder, action_dim, config.network.actor_hidden).to(self.device)
        self.qf_target = copy.deepcopy(self.qf).requires_grad_(False)
        self.actor_params = [p for name, p in self.actor.named_parameters() if not name.startswith("encoder.")]
        self.q_optimizer = adam(self.qf.parameters(), lr=config.q_lr)
        self.actor_optimizer = adam(self.actor_params, lr=config.policy_lr)
        self.target_entropy = -config.target_entropy_scale * action_dim
        self.log_alpha = torch.tensor(math.log(config.alpha), device=self.device, requires_grad=True)
        self.a_optimizer = adam([self.log_alpha], lr=config.policy_lr)
        self.alpha = config.alpha
        self.num_updates = 0

    # ------------------------------------------------------------------ acting
    @property
    def policy_spec(self) -> PolicySpec:
        return PolicySpec("sac", self.obs_spec, self.action_dim, self.config.network)

    def policy(self) -> DrivingPolicy:
        """The current actor as a stand-alone policy (a copy: later updates do not change it)."""
        return DrivingPolicy(self.policy_spec, copy.deepcopy(self.actor), self.device)

    def act(self, obs: NumpyObs, deterministic: bool = False, global_step: int | None = None) -> np.ndarray:
        """Actions ``(B, A)`` for a batch of numpy observations (stochastic while collecting).

        Args:
            global_step: unused (SAC's exploration has no schedule); taken so that every
                off-policy learner explores with ``act(obs, global_step=...)``.
        """
        tensor_obs, _ = obs_to_tensor(obs, self.obs_spec, self.device)
        with torch.no_grad():
            return self.actor.act(tensor_obs, deterministic).cpu().numpy()

    def awag_coefficient(self, global_step: int) -> float:
        """c(t) of METHOD §2."""
        awag = self.config.awag
        if awag.schedule == "constant":
            return awag.coef
        return drqv2_cosine(global_step, peak=awag.coef, horizon_steps=awag.horizon_steps)

    # ------------------------------------------------------------------ learning
    def _step(
        self,
        optimizer: torch.optim.Optimizer,
        loss: torch.Tensor,
        params: list[nn.Parameter] | None,
    ) -> None:
        optimizer.zero_grad()
        loss.backward()
        if self.config.max_grad_norm > 0 and params is not None:
            nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        optimizer.step()

    def update(self, batch: ReplaySamples, global_step: int) -> dict[str, float]:
        """One critic step, a delayed actor + temperature step, a target update.

        Args:
            batch: sampled transitions with label masks.
            global_step: env steps so far (all clips); drives the schedules and the delays.

        Returns:
            Logged floats keyed by TensorBoard tag (actor tags only on actor steps).

        Raises:
            FloatingPointError: naming the first non-finite loss term.
        """
        cfg = self.config
        # Pool and convert each batch once: the critic, the actor and the target critic read it.
        prepare = self.qf.encoder.prepare
        obs = prepare(shift_observation(batch.observations, cfg.drq_pad_px, self.generator))
        next_obs = prepare(shift_observation(batch.next_observations, cfg.drq_pad_px, self.generator))
        has_advisor = batch.has_advisor
        logs: dict[str, float] = {
            "guidance/label_coverage": has_advisor.mean().item(),
            "guidance/clip_coverage": batch.has_clip.mean().item(),
        }
        rewards = batch.rewards
        if cfg.clip_bonus.enabled:  # the learner's reward only (METHOD §3)
            rewards = clip_bonus_rewards(rewards, batch.clip_bonus, batch.has_clip)
            logs["guidance/clip_bonus_mean"] = (rewards - batch.rewards).mean().item()

        # ---- critic: TD target, TD losses, VMR (METHOD §1)
        with torch.no_grad():
            next_features = self.qf.encoder(next_obs)  # the actor reads the critic's encoder
            next_state_actions, next_state_log_pi, _ = self.actor.sample_from_features(next_features)
            if cfg.target_features == "online_encoder":  # DrQ-v2: target heads on the online features
                qf1_next_target, qf2_next_target = self.qf_target.q_values(next_features, next_state_actions)
            else:
                qf1_next_target, qf2_next_target = self.qf_target(next_obs, next_state_actions)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * next_state_log_pi
            next_q_value = rewards + (1.0 - batch.dones) * cfg.gamma * min_qf_next_target

        features = self.qf.encoder(obs)
        if cfg.vmr.enabled:  # the taken and the advisor's actions through the heads in one pass
            both = torch.cat([batch.actions, batch.advisor_actions])
            qf1_both, qf2_both = self.qf.q_values(features.repeat(2, 1), both)
            (qf1_a_values, qf1_advisor), (qf2_a_values, qf2_advisor) = qf1_both.chunk(2), qf2_both.chunk(2)
        else:
            qf1_a_values, qf2_a_values = self.qf.q_values(features, batch.actions)
        qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
        qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
        qf_loss = qf1_loss + qf2_loss
        checked = {"losses/qf1_loss": qf1_loss, "losses/qf2_loss": qf2_loss}
        if cfg.vmr.enabled:
            vmr_coef = vmr_coefficient(global_step, cfg.vmr.decay_start_steps, cfg.vmr.decay_end_steps)
            vmr = twin_vmr_loss(
                cfg.vmr, (qf1_advisor, qf2_advisor), (qf1_a_values, qf2_a_values),
                batch.actions, batch.advisor_actions, has_advisor,
            )
            qf_loss = qf_loss + vmr_coef * vmr
            checked["guidance/vmr_loss"] = vmr
            logs.update({"guidance/vmr_loss": vmr.item(), "guidance/vmr_coef": vmr_coef})
        ensure_finite(checked, global_step)
        self._step(self.q_optimizer, qf_loss, list(self.qf.parameters()))
        logs.update(
            {
                "losses/qf1_values": qf1_a_values.mean().item(),
                "losses/qf2_values": qf2_a_values.mean().item(),
                "losses/qf1_loss": qf1_loss.item(),
                "losses/qf2_loss": qf2_loss.item(),
                "losses/qf_loss": qf_loss.item() / 2.0,
            }
        )

        # ---- actor and temperature, delayed (CleanRL: policy_frequency steps at once)
        self.num_updates += 1  # delays count updates, not env steps (N clips add N steps per update)
        if self.num_updates % cfg.policy_frequency == 0:
            actor_features = features.detach()
            for _ in range(cfg.policy_frequency):
                logs.update(self._actor_step(actor_features, batch, global_step))

        # ---- target critics
        if self.num_updates % cfg.target_network_frequency == 0:
            polyak_update(self.qf, self.qf_target, cfg.tau)
        return logs

    def _actor_step(self, features: torch.Tensor, batch: ReplaySamples, global_step: int) -> dict[str, float]:
        """Actor loss (+ AWAG, METHOD §2), then the temperature loss."""
        cfg = self.config
        self.qf.requires_grad_(False)  # the actor loss needs dQ/da only, not critic weight gradients
        mean, log_std = self.actor.params_from_features(features)  # one head pass for every term below
        pi, log_pi, mu = self.actor.sample_from_params(mean, log_std)
        qf1_pi, qf2_pi = self.qf.q_values(features, pi)
        actor_loss = (self.alpha * log_pi - torch.min(qf1_pi, qf2_pi)).mean()
        checked = {"losses/actor_loss": actor_loss}
        logs: dict[str, float] = {}
        if cfg.awag.enabled:
            bound = 1.0 - cfg.advisor_action_eps
            advisor_actions = batch.advisor_actions.clamp(-bound, bound)
            with torch.no_grad():  # Q of the advisor's action and of the policy's mode, in one pass
                q1, q2 = self.qf.q_values(features.repeat(2, 1), torch.cat([advisor_actions, mu]))
                q_advisor_min, q_policy_min = torch.min(q1, q2).chunk(2)
                awag = awag_weights(
                    q_advisor_min,
                    q_policy_min,
                    batch.has_advisor,
                    cfg.awag.beta,
                    cfg.awag.max_weight,
                    q_filter=cfg.awag.filter == "q",
                )
            if cfg.awag.loss == "mode_mse":
                imitation = mode_imitation_score(mu, batch.advisor_actions)
            else:
                imitated_log_std = log_std.detach() if cfg.awag.detach_std else log_std
                imitation = self.actor.log_prob_from_params(mean, imitated_log_std, advisor_actions)
            awag_term = awag_loss(imitation, awag.gate, awag.weights)
            awag_coef = self.awag_coefficient(global_step)
            actor_loss = actor_loss + awag_coef * awag_term
            checked["guidance/awag_loss"] = awag_term
            gated = awag.gate.sum().clamp(min=1.0)
            logs.update(
                {
                    "guidance/awag_loss": awag_term.item(),
                    "guidance/awag_coef": awag_coef,
                    "guidance/awag_gate_fraction": awag.gate.mean().item(),
                    "guidance/awag_mean_weight": ((awag.gate * awag.weights).sum() / gated).item(),
                }
            )
        self.qf.requires_grad_(True)  # the graph is built; the critic trains again next update
        ensure_finite(checked, global_step)
        self._step(self.actor_optimizer, actor_loss, self.actor_params)
        logs["losses/actor_loss"] = actor_loss.item()

        alpha_loss = torch.zeros(())
        if cfg.autotune:
            alpha_loss = (-self.log_alpha.exp() * (log_pi.detach() + self.target_entropy)).mean()
            self._step(self.a_optimizer, alpha_loss, None)
            self.alpha = self.log_alpha.exp().item()
        logs.update(
            {
                "losses/alpha": self.alpha,
                "losses/alpha_loss": alpha_loss.item(),
                "losses/entropy": -log_pi.mean().item(),
            }
        )
        return logs

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume training (not the replay buffer)."""
        return {
            "qf": self.qf.state_dict(),
            "qf_target": self.qf_target.state_dict(),
            "actor": self.actor.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "a_optimizer": self.a_optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "num_updates": self.num_updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.qf.load_state_dict(state["qf"])
        self.qf_target.load_state_dict(state["qf_target"])
        self.actor.load_state_dict(state["actor"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha = self.log_alpha.exp().item()
        self.q_optimizer.load_state_dict(state["q_optimizer"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.a_optimizer.load_state_dict(state["a_optimizer"])
        self.generator.set_state(state["generator"])
        self.num_updates = int(state["num_updates"])


# ---------------------------------------------------------------------- the registry's view
# found_rl.algos.registry reads these names: the learner is this module plus one registry line.
CONFIG = SacConfig
TAGS = (*CRITIC_TAGS, *ACTOR_TAGS, *LABEL_TAGS, *VMR_TAGS, *AWAG_TAGS, *CLIP_TAGS)
ACTOR_STEP_TAGS = (*ACTOR_TAGS, *AWAG_TAGS)
"""returned only on the delayed actor steps (``policy_frequency``)"""


def make(obs_spec: ObsSpec, action_dim: int, config: SacConfig, device: torch.device | str, seed: int) -> SAC:
    return SAC(obs_spec, action_dim, config, device=device, seed=seed)


def config_from_run(learner: Any, guidance: Any, network: NetworkConfig, env_steps: int | None) -> SacConfig:
    """SAC's config from a run config's ``learner`` section, read by field name, and its
    ``guidance`` settings, handed on as they are."""
    return SacConfig(
        gamma=learner.gamma, tau=learner.tau, batch_size=learner.batch_size, policy_lr=learner.policy_lr,
        q_lr=learner.q_lr, alpha=learner.alpha, autotune=learner.autotune, drq_pad_px=learner.drq_pad_px,
        target_features=learner.target_features, vmr=guidance.vmr, awag=guidance.awag,
        clip_bonus=guidance.clip_bonus, network=network,
    )
