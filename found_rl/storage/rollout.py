"""On-policy rollout storage for PPO over a FAST ``(T, N)`` rollout with validity masks.

Rows where a clip is virtually continued (``valid == 0``) keep the batch rectangular; SMPO
(METHOD §4) makes every statistic computed from this storage ignore them: GAE with
``fast_sampler.smpo.masked_gae``, and PPO forms its minibatches from valid entries only.

Late labels (an advisor action for guided PPO, a CLIP bonus) are attached by the step id of the
observation they were computed on (ARCHITECTURE §6), like the replay buffer's; an id the storage
no longer holds (the rollout was consumed) is dropped, never written into a later rollout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from fast_sampler.smpo import masked_gae
from found_rl.models.observation import ObsSpec, TensorObs


class RolloutSamples(NamedTuple):
    """A flattened rollout or a minibatch of it; M = T·N entries (or the minibatch size)."""

    observations: TensorObs
    """o_t, ``(M, ...)`` in the observation layout"""
    actions: torch.Tensor
    """a_t, ``(M, A)`` float32 or ``(M,)`` int64 for discrete actions"""
    log_probs: torch.Tensor
    """log π_old(a_t | o_t), ``(M,)``"""
    values: torch.Tensor
    """V_old(o_t), ``(M,)``"""
    advantages: torch.Tensor
    """GAE advantages, ``(M,)``; 0 on padding"""
    returns: torch.Tensor
    """advantages + values, ``(M,)``; 0 on padding"""
    valid: torch.Tensor
    """1.0 for real transitions, 0.0 for FAST padding, ``(M,)``"""
    has_advisor: torch.Tensor | None = None
    """h ∈ {0, 1}: an advisor action is attached, ``(M,)`` (None: no labels were collected)"""
    advisor_actions: torch.Tensor | None = None
    """aᵛ, shaped like ``actions`` (float32, int64 for discrete); zeros where ``has_advisor`` is 0"""

    def index(self, idx: torch.Tensor) -> RolloutSamples:
        """The entries ``idx`` (a minibatch)."""
        obs = (
            {k: v[idx] for k, v in self.observations.items()}
            if isinstance(self.observations, dict)
            else self.observations[idx]
        )
        return RolloutSamples(obs, *(None if field is None else field[idx] for field in self[1:]))


class RolloutStorage:
    """Fixed ``(T, N)`` buffers filled one lock-step at a time.

    Args:
        num_steps: T, rollout horizon.
        num_envs: N, clips.
        obs_spec: observation layout.
        action_shape: ``()`` for discrete actions, ``(A,)`` for continuous ones.
        discrete: store actions as int64.
        device: where the tensors live.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_spec: ObsSpec,
        action_shape: tuple[int, ...],
        discrete: bool = False,
        device: torch.device | str = "cpu",
    ):
        if num_steps < 1 or num_envs < 1:
            raise ValueError(f"RolloutStorage: num_steps and num_envs must be >= 1, got {num_steps} and {num_envs}")
        self.num_steps, self.num_envs, self.obs_spec = num_steps, num_envs, obs_spec
        self.device = torch.device(device)
        shape = (num_steps, num_envs)
        if obs_spec.is_dict:
            self.obs: TensorObs = {
                "bev": torch.zeros(
                    shape + tuple(obs_spec.bev_shape),
                    dtype=torch.uint8,
                    device=self.device,
                ),  # type: ignore[arg-type]
                "state": torch.zeros(shape + (int(obs_spec.state_dim),), device=self.device),  # type: ignore[arg-type]
            }
        else:
            self.obs = torch.zeros(shape + (int(obs_spec.vector_dim),), device=self.device)  # type: ignore[arg-type]
        self.actions = torch.zeros(
            shape + action_shape,
            dtype=torch.int64 if discrete else torch.float32,
            device=self.device,
        )
        names = (
            "log_probs",
            "values",
            "rewards",
            "terminated",
            "truncated",
            "valid",
            "final_values",
            "clip_bonus",
            "has_clip",
        )
        for name in names:
            setattr(self, name, torch.zeros(shape, device=self.device))
        self.has_advisor = torch.zeros(shape, device=self.device)
        self.advisor_actions = torch.zeros_like(self.actions)
        self._discrete = discrete
        self._slot_of_id: dict[tuple[int, int, int], tuple[int, int]] = {}
        self.step = 0

    def add(
        self,
        obs: TensorObs,
        actions: torch.Tensor,
        log_probs: torch.Tensor,
        values: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        valid: torch.Tensor,
        final_values: torch.Tensor | None = None,
        step_ids: Sequence[tuple[int, int, int]] | np.ndarray | None = None,
    ) -> None:
        """Record lock-step ``self.step`` (all tensors have leading dimension N).

        Args:
            final_values: V of the final observation for clips that ended at this step (used
                where ``truncated``, to bootstrap); ignored elsewhere.
            step_ids: ``(N, 3)`` (clip, episode, step) ids of the observations, −1 for padding;
                labels attached later by id land on these entries.

        Raises:
            ValueError: when the storage is already full.
        """
        if self.step >= self.num_steps:
            raise ValueError(f"RolloutStorage.add: already holds num_steps={self.num_steps} steps; call reset()")
        t = self.step
        if isinstance(self.obs, dict):
            for key in self.obs:
                self.obs[key][t] = obs[key]  # type: ignore[index]
        else:
            self.obs[t] = obs  # type: ignore[assignment]
        self.actions[t] = actions
        self.log_probs[t], self.values[t], self.rewards[t] = log_probs, values, rewards
        self.terminated[t], self.truncated[t], self.valid[t] = (
            terminated.float(),
            truncated.float(),
            valid.float(),
        )
        self.final_values[t] = 0.0 if final_values is None else final_values
        self.has_clip[t] = 0.0
        self.clip_bonus[t] = 0.0
        self.has_advisor[t] = 0.0
        self.advisor_actions[t] = 0
        if step_ids is not None:
            ids = np.asarray(step_ids, dtype=np.int64)
            if ids.shape != (self.num_envs, 3):
                raise ValueError(f"RolloutStorage.add: step_ids must have shape {(self.num_envs, 3)}, got {ids.shape}")
            for env in np.flatnonzero((ids[:, 0] >= 0) & (torch.as_tensor(valid).cpu().numpy() != 0)):
                self._slot_of_id[tuple(int(v) for v in ids[env])] = (t, int(env))  # type: ignore[index]
        self.step += 1

    def attach_clip_bonus(self, step: int, env: int, clip_bonus: float) -> None:
        """Add a late CLIP bonus to entry ``(step, env)``; entries without one are masked."""
        self.clip_bonus[step, env] = clip_bonus
        self.has_clip[step, env] = 1.0

    def attach_labels(
        self,
        step_id: tuple[int, int, int],
        action: np.ndarray | float | int | None = None,
        clip_bonus: float | None = None,
    ) -> bool:
        """Attach an advisor action and/or a CLIP bonus to the entry of ``step_id``'s observation.

        Returns:
            False when the id is not in this rollout (it came too late, or never was).

        Raises:
            ValueError: for a non-finite or wrongly shaped action or bonus (names which).
        """
        entry = self._slot_of_id.get(tuple(int(v) for v in step_id))  # type: ignore[arg-type]
        if entry is None:
            return False
        t, env = entry
        if action is not None:
            self.advisor_actions[t, env] = self._advisor_action(action)
            self.has_advisor[t, env] = 1.0
        if clip_bonus is not None:
            if not np.isfinite(clip_bonus):
                raise ValueError(f"attach_labels: clip_bonus must be finite, got {clip_bonus!r}")
            self.attach_clip_bonus(t, env, float(clip_bonus))
        return True

    def _advisor_action(self, action: np.ndarray | float | int) -> torch.Tensor:
        """``action`` checked against the action layout (finite; an integer index if discrete)."""
        expected = tuple(self.actions.shape[2:])
        array = np.asarray(action, dtype=np.float64)
        what = "one integer action index" if self._discrete else f"{expected[0]} finite floats"
        if array.size != int(np.prod(expected)) or not np.all(np.isfinite(array)):
            raise ValueError(f"attach_labels: action must be {what}, got {action!r}")
        if self._discrete and not float(array.reshape(-1)[0]).is_integer():
            raise ValueError(f"attach_labels: action must be {what}, got {action!r}")
        return torch.as_tensor(array.reshape(expected), dtype=self.actions.dtype, device=self.device)

    def reset(self) -> None:
        """Start a new rollout; ids of the old one are forgotten, so their late labels are dropped."""
        self.step = 0
        self._slot_of_id.clear()

    def compute_returns(
        self,
        last_values: torch.Tensor,
        gamma: float,
        gae_lambda: float,
        clip_bonus: bool = True,
    ) -> RolloutSamples:
        """Masked GAE over the full rollout, flattened to ``T·N`` entries.

        Args:
            last_values: V(o_T) of each clip's current observation, ``(N,)`` (bootstrap after
                the last row).
            clip_bonus: add attached CLIP bonuses to the learner's reward. ``PPO.compute_returns``
                passes whether its config switches the bonus on; call that one.

        Raises:
            ValueError: if the rollout is not full.
        """
        if self.step != self.num_steps:
            raise ValueError(f"RolloutStorage.compute_returns: holds {self.step} of num_steps={self.num_steps} steps")
        ended = (self.terminated + self.truncated) > 0
        next_values = torch.cat([self.values[1:], last_values.reshape(1, -1)], dim=0)
        next_values = torch.where(ended, self.final_values, next_values)
        rewards = self.rewards
        if clip_bonus:  # the learner's reward only (METHOD §3); missing bonuses are masked
            rewards = rewards + torch.where(self.has_clip > 0, self.clip_bonus, torch.zeros_like(self.clip_bonus))
        advantages, returns = masked_gae(
            rewards,
            self.values,
            next_values,
            self.terminated,
            self.truncated,
            self.valid,
            gamma,
            gae_lambda,
        )
        flat = self.num_steps * self.num_envs
        if isinstance(self.obs, dict):
            obs: TensorObs = {key: value.reshape(flat, *value.shape[2:]) for key, value in self.obs.items()}
        else:
            obs = self.obs.reshape(flat, -1)
        return RolloutSamples(
            observations=obs,
            actions=self.actions.reshape(flat, *self.actions.shape[2:]),
            log_probs=self.log_probs.reshape(flat),
            values=self.values.reshape(flat),
            advantages=advantages.reshape(flat),
            returns=returns.reshape(flat),
            valid=self.valid.reshape(flat),
            has_advisor=self.has_advisor.reshape(flat),
            advisor_actions=self.advisor_actions.reshape(flat, *self.actions.shape[2:]),
        )
