"""DrQ-v2 with VMR, AWAG and the CLIP reward bonus: Found-RL's main learner.

DrQ-v2: Yarats et al. 2021, "Mastering Visual Continuous Control: Improved Data-Augmented
Reinforcement Learning" (facebookresearch/drqv2). A deterministic actor μ(s) explores with a
scheduled std σ(t) (clipped noise inside the losses), the twin critics learn from n-step
returns, and the encoder is shared and trained by the critic only, on randomly shifted (or,
as Found-RL does, ±10° rotated) BEVs. Guidance (METHOD §1–3): VMR on both critics, AWAG with
the DrQ-v2 coefficient schedule and the TD3+BC-normalised Q term, the CLIP bonus on the TD
reward. Interface and contracts are SAC's (``found_rl/algos/sac.py``): the same storage with
per-sample label masks (sampled with ``n_step``), ``update`` returns logged floats keyed by
TensorBoard tag, ``state_dict`` resumes training exactly.
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

from found_rl.algos.augment import augment_observation
from found_rl.algos.config_checks import check_finite_floats, check_rules, check_schedule, check_settings
from found_rl.algos.guidance import (
    awag_loss,
    awag_weights,
    clip_bonus_rewards,
    mode_imitation_score,
    normalized_q_term,
    twin_vmr_loss,
)
from found_rl.algos.numerics import ensure_finite
from found_rl.algos.optim import adam, polyak_update
from found_rl.algos.sac import AWAG_TAGS, CLIP_TAGS, CRITIC_TAGS, LABEL_TAGS, VMR_TAGS
from found_rl.algos.schedules import drqv2_cosine, linear_decay, vmr_coefficient
from found_rl.guidance_settings import Awag, ClipBonus, Vmr
from found_rl.models.drqv2_nets import DETERMINISTIC, DeterministicActor, clipped_noise, straight_through_clamp
from found_rl.models.encoders import NetworkConfig, make_encoder
from found_rl.models.observation import NumpyObs, ObsSpec, obs_to_tensor
from found_rl.models.policy import DrivingPolicy, PolicySpec
from found_rl.models.sac_nets import TwinQCritic
from found_rl.storage.replay import ReplaySamples

DRQV2_AWAG = Awag(coef=0.03, schedule="drqv2_cosine")
"""DrQ-v2's AWAG (docs/method.md §7): the cosine schedule peaking at c = 0.03. A run config's
``guidance.awag`` fields left unset take these values (``found_rl.algos.registry``)."""

# Logged tags (renaming one is a breaking change; tests check the set). Critic, label and
# guidance tags are SAC's; DrQ-v2 updates its actor on every call, so these come every time.
ACTOR_TAGS = ("losses/actor_loss", "losses/actor_q", "losses/std")
__all__ = [
    "ACTOR_TAGS",
    "AWAG_TAGS",
    "CLIP_TAGS",
    "CRITIC_TAGS",
    "DRQV2_AWAG",
    "LABEL_TAGS",
    "VMR_TAGS",
    "DrQV2",
    "DrQV2Config",
    "gaussian_log_prob",
]


@dataclass(frozen=True)
class DrQV2Config:
    """DrQ-v2 hyper-parameters (paper defaults unless noted) and guidance settings (METHOD defaults)."""

    gamma: float = 0.99
    """discount factor γ"""
    n_step: int = 3
    """n of the n-step TD target; sample batches with ``ReplayBuffer.sample(..., n_step, gamma)``"""
    tau: float = 0.01
    """Polyak coefficient of the target critics (every update)"""
    batch_size: int = 256
    """transitions per gradient step"""
    update_every_steps: int = 2
    """the driver calls ``update`` once every this many env steps (the paper: 2); read by the
    driver, not by the learner"""
    actor_lr: float = 1e-4
    """actor learning rate"""
    critic_lr: float = 1e-4
    """critic (and encoder) learning rate"""
    std_init: float = 1.0
    """exploration std σ at env step std_decay_start_steps"""
    std_final: float = 0.1
    """σ from env step std_decay_end_steps on"""
    std_decay_start_steps: int = 0
    """σ(t) = std_init up to this env step"""
    std_decay_end_steps: int = 500_000
    """σ(t) is linear from std_init to std_final between the two steps (the paper's 'linear(1.0, 0.1, 500000)')"""
    std_clip: float = 0.3
    """noise inside the losses is clipped to ±std_clip (target smoothing and the actor's sample)"""
    max_grad_norm: float = 1.0
    """clip gradient norms of actor and critic to this (Found-RL: 1.0; the paper: no clipping = 0)"""
    drq_pad_px: int = 4
    """random shift of the BEV by up to this many px (0 = off; vector observations are never augmented)"""
    drq_rotate_deg: float = 0.0
    """random rotation of the BEV by up to this many degrees (Found-RL: 10); with a shift too, each
    update picks one of the two at random"""
    vmr: Vmr = field(default_factory=Vmr)
    """VMR on both critics (METHOD §1); off unless ``vmr.enabled``"""
    awag: Awag = DRQV2_AWAG
    """AWAG on the actor (METHOD §2) with DrQ-v2's schedule; off unless ``awag.enabled``"""
    clip_bonus: ClipBonus = field(default_factory=ClipBonus)
    """the CLIP bonus on the TD reward (METHOD §3); off unless ``clip_bonus.enabled``"""
    advisor_action_eps: float = 1e-6
    """advisor actions are clipped to ±(1 − ε) (as Found-RL's DrQ-v2)"""
    td3bc_alpha: float = 2.5
    """with AWAG on, the actor's Q term is −(α / mean|Q₁|)·mean min_k Q_k (TD3+BC)"""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    """encoder and head widths"""

    def __post_init__(self) -> None:
        rules = (
            ("gamma", 0.0 <= self.gamma <= 1.0, "in [0, 1]"),
            ("n_step", self.n_step >= 1, ">= 1"),
            ("tau", 0.0 < self.tau <= 1.0, "in (0, 1]"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("update_every_steps", self.update_every_steps >= 1, ">= 1"),
            ("actor_lr", self.actor_lr > 0, "> 0"),
            ("critic_lr", self.critic_lr > 0, "> 0"),
            ("std_init", self.std_init > 0, "> 0"),
            ("std_final", self.std_final > 0, "> 0"),
            ("std_clip", self.std_clip > 0, "> 0"),
            ("max_grad_norm", self.max_grad_norm >= 0, ">= 0"),
            ("drq_pad_px", self.drq_pad_px >= 0, ">= 0"),
            ("drq_rotate_deg", 0 <= self.drq_rotate_deg <= 180, "in [0, 180]"),
            ("advisor_action_eps", 0 < self.advisor_action_eps < 1, "in (0, 1)"),
            ("td3bc_alpha", self.td3bc_alpha > 0, "> 0"),
            # DrQ-v2's std is a schedule, not a learned output: there is nothing to detach
            ("awag", not self.awag.detach_std, "detach_std: false (DrQ-v2's std is a schedule, not learned)"),
        )
        check_finite_floats(self)
        check_rules(self, rules)
        check_schedule(self, "std_decay_start_steps", "std_decay_end_steps")
        check_settings(self, vmr=Vmr, awag=Awag, clip_bonus=ClipBonus)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, std: float) -> torch.Tensor:
    """Σ_d log N(a_d; μ_d, σ²), ``(B,)``: the DrQ-v2 policy's log-density with its scheduled σ.

    As Found-RL's DrQ-v2, the plain normal density (no truncation or tanh correction), so
    −log π(aᵛ|s) = ‖aᵛ − μ‖² / (2σ²) + const: AWAG is a weighted squared error scaled by 1/σ².
    """
    dims = actions.shape[-1]
    return -((actions - mean) ** 2).sum(-1) / (2.0 * std**2) - dims * (math.log(std) + 0.5 * math.log(2.0 * math.pi))


class DrQV2:
    """DrQ-v2 learner: networks, optimisers and ``update`` (same shape as ``SAC``).

    Args:
        obs_spec: observation layout.
        action_dim: A; actions live in [-1, 1]^A.
        config: hyper-parameters.
        device: where the networks live.
        seed: seeds the generator of every random draw the learner makes (exploration noise,
            target smoothing, the actor's sample, augmentation), so a resumed run continues the
            same stream.
    """

    def __init__(
        self,
        obs_spec: ObsSpec,
        action_dim: int,
        config: DrQV2Config = DrQV2Config(),
        device: torch.device | str = "cpu",
        seed: int = 0,
    ):
        self.config, self.obs_spec, self.action_dim = config, obs_spec, action_dim
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        encoder = make_encoder(obs_spec, config.network.encoder)
        # The critic owns and trains the encoder; the actor reads its features detached.
        self.qf = TwinQCritic(encoder, action_dim, config.network.critic_hidden).to(self.device)
        self.actor = DeterministicActor(encoder, action_dim, config.network.actor_hidden).to(self.device)
        # Target heads only: as in DrQ-v2 the target reads the online encoder's features.
        self.qf_target = copy.deepcopy(self.qf).requires_grad_(False)
        self.actor_params = [p for name, p in self.actor.named_parameters() if not name.startswith("encoder.")]
        self.q_optimizer = adam(self.qf.parameters(), lr=config.critic_lr)
        self.actor_optimizer = adam(self.actor_params, lr=config.actor_lr)
        self.num_updates = 0
        self.last_global_step = 0
        self._set_std(self.std(0))

    # ------------------------------------------------------------------ schedules
    def std(self, global_step: int) -> float:
        """σ(t): std_init until the decay starts, linear to std_final at its end, std_final after."""
        cfg = self.config
        return linear_decay(
            global_step, cfg.std_decay_start_steps, cfg.std_decay_end_steps, cfg.std_init, cfg.std_final
        )

    def awag_coefficient(self, global_step: int) -> float:
        """c(t) of METHOD §2 (DrQ-v2 default: the cosine schedule peaking at 0.03)."""
        awag = self.config.awag
        if awag.schedule == "constant":
            return awag.coef
        return drqv2_cosine(global_step, peak=awag.coef, horizon_steps=awag.horizon_steps)

    def _set_std(self, std: float) -> None:
        self.actor.exploration_std.fill_(std)

    def _noise(self, like: torch.Tensor, std: float, clip: float | None) -> torch.Tensor:
        return clipped_noise(like.shape, std, clip, self.generator, like.device)

    # ------------------------------------------------------------------ acting
    @property
    def policy_spec(self) -> PolicySpec:
        return PolicySpec("drqv2", self.obs_spec, self.action_dim, self.config.network, DETERMINISTIC)

    def policy(self) -> DrivingPolicy:
        """The current actor as a stand-alone policy (a copy; explores with the current σ)."""
        return DrivingPolicy(self.policy_spec, copy.deepcopy(self.actor), self.device)

    def act(self, obs: NumpyObs, deterministic: bool = False, global_step: int | None = None) -> np.ndarray:
        """Actions ``(B, A)``: μ(s), or clamp(μ(s) + σ(t)·ε, −1, 1) while collecting.

        Args:
            global_step: env steps so far, for σ(t); defaults to the step of the last update.
        """
        tensor_obs, _ = obs_to_tensor(obs, self.obs_spec, self.device)
        with torch.no_grad():
            mean = self.actor(tensor_obs)
            if deterministic:
                return mean.cpu().numpy()
            std = self.std(self.last_global_step if global_step is None else global_step)
            return (mean + self._noise(mean, std, None)).clamp(-1.0, 1.0).cpu().numpy()

    # ------------------------------------------------------------------ learning
    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, params: list[nn.Parameter]) -> None:
        optimizer.zero_grad()
        loss.backward()
        if self.config.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        optimizer.step()

    def _discounts(self, batch: ReplaySamples) -> torch.Tensor:
        cfg = self.config
        if batch.discounts is not None:
            return batch.discounts
        if cfg.n_step > 1:
            raise ValueError(
                f"DrQV2.update: config.n_step={cfg.n_step} but the batch holds 1-step returns; sample it with "
                f"ReplayBuffer.sample(batch_size, rng, n_step={cfg.n_step}, gamma={cfg.gamma})"
            )
        return torch.full_like(batch.rewards, cfg.gamma)

    def update(self, batch: ReplaySamples, global_step: int) -> dict[str, float]:
        """One critic step, one actor step, a target update.

        Args:
            batch: sampled n-step transitions with label masks.
            global_step: env steps so far (all clips); drives σ(t) and the guidance schedules.

        Returns:
            Logged floats keyed by TensorBoard tag.

        Raises:
            ValueError: if ``n_step > 1`` and the batch holds 1-step returns.
            FloatingPointError: naming the first non-finite loss term.
        """
        cfg = self.config
        std = self.std(global_step)
        self.last_global_step = global_step
        self._set_std(std)
        discounts = self._discounts(batch)
        obs = augment_observation(batch.observations, cfg.drq_pad_px, cfg.drq_rotate_deg, self.generator)
        next_obs = augment_observation(batch.next_observations, cfg.drq_pad_px, cfg.drq_rotate_deg, self.generator)
        logs: dict[str, float] = {
            "guidance/label_coverage": batch.has_advisor.mean().item(),
            "guidance/clip_coverage": batch.has_clip.mean().item(),
        }
        rewards = batch.rewards
        if cfg.clip_bonus.enabled:  # the learner's reward only (METHOD §3)
            rewards = clip_bonus_rewards(rewards, batch.clip_bonus, batch.has_clip)
            logs["guidance/clip_bonus_mean"] = (rewards - batch.rewards).mean().item()

        # ---- critic: n-step TD target with clipped target-policy noise, TD losses, VMR (METHOD §1)
        with torch.no_grad():
            next_features = self.qf.encoder(next_obs)
            next_mean = self.actor.mean_from_features(next_features)
            next_actions = (next_mean + self._noise(next_mean, std, cfg.std_clip)).clamp(-1.0, 1.0)
            target_q1, target_q2 = self.qf_target.q_values(next_features, next_actions)
            target_q = rewards + (1.0 - batch.dones) * discounts * torch.min(target_q1, target_q2)

        features = self.qf.encoder(obs)
        qf1_a_values, qf2_a_values = self.qf.q_values(features, batch.actions)
        qf1_loss = F.mse_loss(qf1_a_values, target_q)
        qf2_loss = F.mse_loss(qf2_a_values, target_q)
        qf_loss = qf1_loss + qf2_loss
        checked = {"losses/qf1_loss": qf1_loss, "losses/qf2_loss": qf2_loss}
        if cfg.vmr.enabled:
            vmr_coef = vmr_coefficient(global_step, cfg.vmr.decay_start_steps, cfg.vmr.decay_end_steps)
            vmr = twin_vmr_loss(
                cfg.vmr, self.qf.q_values(features, batch.advisor_actions), (qf1_a_values, qf2_a_values),
                batch.actions, batch.advisor_actions, batch.has_advisor,
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

        # ---- actor on detached features (+ AWAG, METHOD §2)
        logs.update(self._actor_step(features.detach(), batch, std, global_step))

        # ---- target critics
        polyak_update(self.qf, self.qf_target, cfg.tau)
        self.num_updates += 1
        return logs

    def _actor_step(
        self, features: torch.Tensor, batch: ReplaySamples, std: float, global_step: int
    ) -> dict[str, float]:
        cfg = self.config
        self.qf.requires_grad_(False)  # the actor loss needs dQ/da only
        mean = self.actor.mean_from_features(features)
        actions = straight_through_clamp(mean + self._noise(mean, std, cfg.std_clip))
        qf1_pi, qf2_pi = self.qf.q_values(features, actions)
        min_q_pi = torch.min(qf1_pi, qf2_pi)
        logs: dict[str, float] = {}
        if cfg.awag.enabled:
            actor_loss = normalized_q_term(qf1_pi, min_q_pi, cfg.td3bc_alpha)
            bound = 1.0 - cfg.advisor_action_eps
            advisor_actions = batch.advisor_actions.clamp(-bound, bound)
            with torch.no_grad():
                q_advisor_min = torch.min(*self.qf.q_values(features, advisor_actions))
                q_policy_min = torch.min(*self.qf.q_values(features, mean.detach()))
                awag = awag_weights(
                    q_advisor_min, q_policy_min, batch.has_advisor, cfg.awag.beta, cfg.awag.max_weight,
                    q_filter=cfg.awag.filter == "q",
                )
            if cfg.awag.loss == "mode_mse":
                imitation = mode_imitation_score(mean, batch.advisor_actions)
            else:
                imitation = gaussian_log_prob(advisor_actions, mean, std)
            awag_term = awag_loss(imitation, awag.gate, awag.weights)
            awag_coef = self.awag_coefficient(global_step)
            actor_loss = actor_loss + awag_coef * awag_term
            gated = awag.gate.sum().clamp(min=1.0)
            logs.update(
                {
                    "guidance/awag_loss": awag_term.item(),
                    "guidance/awag_coef": awag_coef,
                    "guidance/awag_gate_fraction": awag.gate.mean().item(),
                    "guidance/awag_mean_weight": ((awag.gate * awag.weights).sum() / gated).item(),
                }
            )
            checked = {"losses/actor_loss": actor_loss, "guidance/awag_loss": awag_term}
        else:
            actor_loss = -min_q_pi.mean()
            checked = {"losses/actor_loss": actor_loss}
        self.qf.requires_grad_(True)
        ensure_finite(checked, global_step)
        self._step(self.actor_optimizer, actor_loss, self.actor_params)
        logs.update(
            {"losses/actor_loss": actor_loss.item(), "losses/actor_q": min_q_pi.mean().item(), "losses/std": std}
        )
        return logs

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume training (not the replay buffer)."""
        return {
            "qf": self.qf.state_dict(),
            "qf_target": self.qf_target.state_dict(),
            "actor": self.actor.state_dict(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "num_updates": self.num_updates,
            "last_global_step": self.last_global_step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.qf.load_state_dict(state["qf"])
        self.qf_target.load_state_dict(state["qf_target"])
        self.actor.load_state_dict(state["actor"])
        self.q_optimizer.load_state_dict(state["q_optimizer"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.generator.set_state(state["generator"])
        self.num_updates = int(state["num_updates"])
        self.last_global_step = int(state["last_global_step"])


# ---------------------------------------------------------------------- the registry's view
# found_rl.algos.registry reads these names: the learner is this module plus one registry line.
CONFIG = DrQV2Config
TAGS = (*CRITIC_TAGS, *ACTOR_TAGS, *LABEL_TAGS, *VMR_TAGS, *AWAG_TAGS, *CLIP_TAGS)
ACTOR_STEP_TAGS = (*ACTOR_TAGS, *AWAG_TAGS)
"""the actor step's tags (DrQ-v2 steps its actor on every update)"""


def make(obs_spec: ObsSpec, action_dim: int, config: DrQV2Config, device: torch.device | str, seed: int) -> DrQV2:
    return DrQV2(obs_spec, action_dim, config, device=device, seed=seed)


def config_from_run(learner: Any, guidance: Any, network: NetworkConfig, env_steps: int | None) -> DrQV2Config:
    """DrQ-v2's config (docs/method.md §7) from a run config's ``learner`` section, read by field
    name, and its ``guidance`` settings, handed on as they are; the rest keeps DrQ-v2's own
    values (τ, gradient clipping, σ schedule, n-step returns), and the shift defaults to 4 px."""
    return DrQV2Config(
        gamma=learner.gamma, batch_size=learner.batch_size, actor_lr=learner.policy_lr, critic_lr=learner.q_lr,
        drq_pad_px=learner.drq_pad_px or 4, vmr=guidance.vmr, awag=guidance.awag,
        clip_bonus=guidance.clip_bonus, network=network,
    )
