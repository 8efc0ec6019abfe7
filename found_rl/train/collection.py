"""The two ways a run turns FAST lock-steps into updates, one class each, chosen once at start-up.

- :class:`OffPolicyCollector` (SAC, DrQ-v2): valid transitions into the replay buffer, random
  actions until ``learning_starts``, then ``updates_per_step`` updates per valid env step;
- :class:`OnPolicyCollector` (PPO): lock-steps into the rollout with log π and V, one PPO update
  per full rollout.

Both attach the advisor's labels to their storage by step id, and say when a checkpoint may be
taken and how much of their storage is labelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fast_sampler import StepBatch
from found_rl.models.observation import obs_to_tensor
from found_rl.train.config import RunConfig
from found_rl.train.learners import ACTION_DIM, BuiltLearner
from found_rl.train.telemetry import Telemetry


@dataclass
class Counters:
    """Where the run stands; all of it goes into every checkpoint."""

    env_steps: int = 0
    lock_steps: int = 0
    """sampler steps (every clip at once): the clock of the repeatable label schedule"""
    updates: int = 0
    episodes: int = 0
    update_credit: float = 0.0
    next_evaluation: int = 0
    next_checkpoint: int = 0
    wall_s: float = 0.0
    """wall time of earlier sessions of this run (resumed runs add theirs)"""


class Collector:
    """What both storage kinds share: the learner, its storage, the counters and telemetry."""

    def __init__(self, config: RunConfig, built: BuiltLearner, counters: Counters, telemetry: Telemetry,
                 device: torch.device) -> None:
        self.config, self.learner, self.storage = config, built.learner, built.storage
        self.counters, self.telemetry, self.device = counters, telemetry, device
        self.credited_steps = config.learner.learning_starts
        """env steps already turned into update credit (saved in checkpoints)"""

    @property
    def replay(self) -> Any:
        """The replay buffer, or None (PPO's rollout is never saved)."""
        return None

    def attach(self, step_id: Any, action: np.ndarray | None, bonus: float | None) -> bool:
        """Attach an advisor's answer to the stored transition ``step_id``, if it is still there."""
        return self.storage.attach_labels(tuple(step_id), action=action, clip_bonus=bonus)


class OffPolicyCollector(Collector):
    """SAC and DrQ-v2: a replay buffer, and updates paid for by update credit."""

    def __init__(self, config: RunConfig, built: BuiltLearner, counters: Counters, telemetry: Telemetry,
                 device: torch.device, *, warmup_rng: np.random.Generator, sample_rng: np.random.Generator) -> None:
        super().__init__(config, built, counters, telemetry, device)
        self.warmup_rng, self.sample_rng = warmup_rng, sample_rng
        self.actor_step_tags = built.entry.actor_step_tags
        # a learner whose config has n_step learns from n-step returns (DrQ-v2)
        self.n_step = getattr(built.learner.config, "n_step", 1)

    @property
    def replay(self) -> Any:
        return self.storage

    @property
    def policy_network(self) -> torch.nn.Module:
        return self.learner.actor

    def act(self, obs: Any) -> Any:
        """Uniform random actions until ``learning_starts``, then the learner's exploring ones."""
        if self.counters.env_steps < self.config.learner.learning_starts:
            return self.warmup_rng.uniform(-1.0, 1.0, (self.config.sampler.clips, ACTION_DIM)).astype(np.float32)
        # the step drives a learner's exploration schedule (DrQ-v2's σ(t)); SAC has none
        return self.learner.act(obs, deterministic=False, global_step=self.counters.env_steps)

    def store(self, batch: StepBatch, step_ids: np.ndarray) -> None:
        """Valid transitions only (FAST padding is never stored)."""
        self.storage.add(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated,
                         batch.truncated, step_ids=step_ids, valid=batch.valid)

    def update(self, link: Any) -> None:
        """As many updates as the credit of the new valid env steps pays for, once past ``learning_starts``."""
        counters = self.counters
        if counters.env_steps < self.config.learner.learning_starts:
            return
        counters.update_credit += self._new_steps_since_update()
        logs: dict[str, float] = {}
        with self.telemetry.timers.measure("updates"):
            while counters.update_credit >= 1.0:
                logs = self.learner.update(self._sample_batch(), counters.env_steps)
                counters.updates += 1
                counters.update_credit -= 1.0
                self.telemetry.note_off_policy_update(logs, self.actor_step_tags)
        self.telemetry.log_off_policy_updates(logs, counters.updates, counters.env_steps)

    def _sample_batch(self) -> Any:
        cfg = self.learner.config
        if self.n_step > 1:  # n-step returns, windows cut at episode ends
            return self.storage.sample(cfg.batch_size, self.sample_rng, n_step=self.n_step, gamma=cfg.gamma)
        return self.storage.sample(cfg.batch_size, self.sample_rng)

    def _new_steps_since_update(self) -> float:
        """Update credit earned since the last call: valid env steps × updates_per_step."""
        steps = self.counters.env_steps - self.credited_steps
        self.credited_steps = self.counters.env_steps
        return max(0, steps) * self.config.learner.updates_per_step

    def can_checkpoint(self, sampler: Any) -> bool:
        """At a FAST round boundary: no episode in flight, so the resume is exact."""
        return sampler.at_round_boundary

    def label_coverage(self, link: Any) -> float:
        """Fraction of stored transitions with their advisor label (the CLIP bonus without actions)."""
        return self.storage.label_coverage()["advisor" if link is None or link.want_actions else "clip"]


class OnPolicyCollector(Collector):
    """PPO: FAST rollouts with log π and V, a masked-GAE PPO update per full rollout."""

    @property
    def policy_network(self) -> torch.nn.Module:
        return self.learner.agent

    def act(self, obs: Any) -> Any:
        """Sampled actions, with log π and V kept for the rollout."""
        tensors, _ = obs_to_tensor(obs, self.learner.obs_spec, self.device)
        actions, log_probs, values = self.learner.step(tensors)
        return actions.cpu().numpy(), {"log_probs": log_probs, "values": values}

    def store(self, batch: StepBatch, step_ids: np.ndarray) -> None:
        """One lock-step into the rollout; V(o_{t+1}) bootstraps rows cut by truncation."""
        def tensor(array: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.as_tensor(np.asarray(array), dtype=dtype, device=self.device)

        obs, _ = obs_to_tensor(batch.obs, self.learner.obs_spec, self.device)
        next_obs, _ = obs_to_tensor(batch.next_obs, self.learner.obs_spec, self.device)
        final_values = self.learner.value(next_obs) if (batch.truncated & batch.valid).any() else None
        self.storage.add(
            obs, tensor(batch.actions), tensor(batch.extras["log_probs"]), tensor(batch.extras["values"]),
            tensor(batch.rewards), tensor(batch.terminated, torch.bool), tensor(batch.truncated, torch.bool),
            tensor(batch.valid), final_values=final_values, step_ids=[tuple(row) for row in step_ids],
        )
        self._last_next_obs = next_obs

    def update(self, link: Any) -> None:
        """A full rollout: masked GAE (padding never read), then SMPO-masked PPO epochs."""
        rollout, timers = self.storage, self.telemetry.timers
        if rollout.step < rollout.num_steps:
            return
        if link is not None:  # the rollout's last bonuses, before its returns are computed
            with timers.measure("advisor"):
                link.flush(self.attach, self.counters.env_steps)
        with timers.measure("updates"):
            samples = self.learner.compute_returns(rollout, self.learner.value(self._last_next_obs))
            logs = self.learner.update(samples, self.counters.env_steps)
            rollout.reset()
        self.counters.updates += 1
        self.telemetry.log_learner(logs, self.counters.env_steps)

    def can_checkpoint(self, sampler: Any) -> bool:
        """Right after an update (no half rollout to save); episodes in flight restart on resume."""
        return self.storage.step == 0

    def label_coverage(self, link: Any) -> float:
        """Fraction of the rollout's valid rows with their label: the advisor action when a term
        reads it (``advisor_bc``), else the CLIP bonus."""
        rollout = self.storage
        valid = rollout.valid[: rollout.step]
        labelled = rollout.has_advisor if link is not None and link.want_actions else rollout.has_clip
        return float((labelled[: rollout.step] * valid).sum() / valid.sum().clamp(min=1))


def make_collector(config: RunConfig, built: BuiltLearner, counters: Counters, telemetry: Telemetry,
                   device: torch.device, *, warmup_rng: np.random.Generator,
                   sample_rng: np.random.Generator) -> OffPolicyCollector | OnPolicyCollector:
    """The collector of the learner's storage kind."""
    if built.off_policy:
        return OffPolicyCollector(config, built, counters, telemetry, device,
                                  warmup_rng=warmup_rng, sample_rng=sample_rng)
    return OnPolicyCollector(config, built, counters, telemetry, device)
