"""The learner a run config asks for, with its storage: SAC or DrQ-v2 with a replay buffer, PPO
with a rollout.

Learners know nothing of run configs (STYLE §6); this module turns one into their own configs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

from found_rl.algos.sac import SAC, SacConfig
from found_rl.models.encoders import network_preset
from found_rl.models.observation import ObsSpec
from found_rl.train.config import RunConfig

ACTION_DIM = 2
OFF_POLICY = ("sac", "drqv2")
"""algorithms that learn from a replay buffer (the others learn from PPO rollouts)"""


@dataclass(frozen=True)
class BuiltLearner:
    """A learner and the storage it learns from (a ``ReplayBuffer`` or a ``RolloutStorage``)."""

    learner: Any
    storage: Any
    off_policy: bool


def network_name(config: RunConfig, device: torch.device) -> str:
    """The network preset: the config's, or for ``auto`` the wide ``roach`` one on CUDA."""
    if config.network == "auto":
        return "roach" if device.type == "cuda" else "cpu"
    return config.network


def sac_config(config: RunConfig, device: torch.device) -> SacConfig:
    """SAC's config from the run config's learner and guidance settings."""
    cfg, guidance = config.learner, config.guidance
    switches = (("vmr", guidance.vmr.enabled), ("awag", guidance.awag.enabled),
                ("clip_bonus", guidance.clip_bonus.enabled))
    terms = [term for term, on in switches if on]
    return SacConfig(
        gamma=cfg.gamma, tau=cfg.tau, batch_size=cfg.batch_size, policy_lr=cfg.policy_lr, q_lr=cfg.q_lr,
        alpha=cfg.alpha, autotune=cfg.autotune, drq_pad_px=cfg.drq_pad_px, guidance=tuple(terms),
        target_features=cfg.target_features,
        vmr_margin=guidance.vmr.margin, vmr_form=guidance.vmr.form,
        vmr_decay_start_steps=guidance.vmr.decay_start_steps, vmr_decay_end_steps=guidance.vmr.decay_end_steps,
        awag_beta=guidance.awag.beta, awag_max_weight=guidance.awag.max_weight, awag_coef=guidance.awag.coef,
        awag_schedule=guidance.awag.schedule, awag_horizon_steps=guidance.awag.horizon_steps,
        network=network_preset(network_name(config, device)),
    )


def drqv2_config(config: RunConfig, device: torch.device) -> Any:
    """DrQ-v2's config (docs/method.md §7); guidance fields the run config leaves at their
    defaults keep DrQ-v2's own (AWAG: the cosine schedule with c = 0.03)."""
    from found_rl.algos.drqv2 import DrQV2Config

    sac = sac_config(config, device)
    cfg, guidance = config.learner, config.guidance
    explicit = {f"vmr_{k}" for k in guidance.vmr.model_fields_set} | {
        f"awag_{k}" for k in guidance.awag.model_fields_set}
    own = {"max_grad_norm", "tau", "awag_action_eps"}  # DrQ-v2's values, not SAC's
    shared = {f.name for f in fields(DrQV2Config)} & {f.name for f in fields(SacConfig)} - own
    overrides = {name: getattr(sac, name) for name in shared
                 if not name.startswith(("vmr_", "awag_")) or name in explicit}
    overrides.update(actor_lr=cfg.policy_lr, critic_lr=cfg.q_lr, drq_pad_px=cfg.drq_pad_px or 4)
    return DrQV2Config(**overrides)


def build_learner(config: RunConfig, obs_spec: ObsSpec, device: torch.device) -> BuiltLearner:
    """The learner ``config.algorithm`` names, on ``device``, with its storage for
    ``config.sampler.clips`` clips."""
    if config.algorithm in OFF_POLICY:
        return _off_policy(config, obs_spec, device)
    from found_rl.algos.ppo import PPO, PpoConfig
    from found_rl.storage.rollout import RolloutStorage

    cfg = config.learner
    ppo_config = PpoConfig(
        learning_rate=cfg.policy_lr, total_timesteps=config.budget.env_steps or 1_000_000, gamma=cfg.gamma,
        update_epochs=cfg.update_epochs, num_minibatches=cfg.num_minibatches,
        guidance=("clip_bonus",) if config.guidance.clip_bonus.enabled else (),
        network=network_preset(network_name(config, device)),
    )
    learner = PPO(obs_spec, ppo_config.action_kind, ACTION_DIM, ppo_config, device, config.seed)
    rollout = RolloutStorage(cfg.rollout_steps, config.sampler.clips, obs_spec, (ACTION_DIM,), device=device)
    return BuiltLearner(learner, rollout, off_policy=False)


def _off_policy(config: RunConfig, obs_spec: ObsSpec, device: torch.device) -> BuiltLearner:
    from found_rl.storage.replay import ReplayBuffer

    if config.algorithm == "sac":
        learner: Any = SAC(obs_spec, ACTION_DIM, sac_config(config, device), device=device, seed=config.seed)
    else:
        from found_rl.algos.drqv2 import DrQV2

        learner = DrQV2(obs_spec, ACTION_DIM, drqv2_config(config, device), device=device, seed=config.seed)
    replay = ReplayBuffer(
        config.learner.replay_capacity, obs_spec, ACTION_DIM, num_envs=config.sampler.clips, device=device
    )
    return BuiltLearner(learner, replay, off_policy=True)
