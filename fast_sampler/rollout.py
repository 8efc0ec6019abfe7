"""What samplers hand to learners: one lock-step (:class:`StepBatch`), a stacked on-policy
:class:`Rollout`, and the valid :class:`Transition` stream for off-policy learners.

Layout: N clip slots; a rollout stacks T lock-steps into ``(T, N)`` arrays. Row ``[t, n]`` is
the transition clip n made at lock-step t: the policy saw ``obs[t, n]``, took ``actions[t, n]``,
got ``rewards[t, n]`` and ``next_obs[t, n]``. Rows with ``valid == False`` are FAST padding
(observation held, reward 0, action 0, ids −1) and must be masked out of every loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from fast_sampler.spaces import Obs


class StepId(NamedTuple):
    """Identity of one transition, for attaching labels that arrive later (ARCHITECTURE §6).

    ``clip`` is the slot, ``episode`` counts the episodes that slot has started (from 0) and
    ``step`` is the index of o_t within its episode (from 0).
    """

    clip: int
    episode: int
    step: int


class Transition(NamedTuple):
    """One valid transition (o_t, a_t, r_t, o_{t+1}) for off-policy storage.

    ``next_obs`` is the observation the step returned, also at episode ends, so a learner
    bootstraps from it when ``truncated`` and ignores it when ``terminated``. ``info`` came
    with ``next_obs``; ``obs_info`` came with ``obs`` (the reset's info at step 0): a request
    about o_t (an advisor label) reads ``obs_info``, never ``info`` (ARCHITECTURE §6).
    """

    obs: Any
    action: Any
    reward: float
    next_obs: Any
    terminated: bool
    truncated: bool
    step_id: StepId
    info: dict[str, Any]
    obs_info: dict[str, Any] = {}  # noqa: RUF012 (a NamedTuple default, never mutated)


def _index_obs(obs: Obs, index: Any) -> Any:
    if isinstance(obs, dict):
        return {key: np.array(array[index]) for key, array in obs.items()}
    return np.array(obs[index])


@dataclass(frozen=True)
class StepBatch:
    """One lock-step of N clips. Arrays are shaped ``(N, ...)``.

    Attributes:
        obs: o_t per clip (held observation for padding).
        actions: a_t per clip, zeros for padding.
        rewards: float32 r_t, 0 for padding.
        next_obs: o_{t+1} as returned by the step (held observation for padding).
        terminated: bool, the episode really ended at this step.
        truncated: bool, the episode was cut here (env time limit, horizon, FAST global
            truncation, or a lost worker): bootstrap from ``next_obs``.
        valid: bool, False for padding rows.
        worker_died: bool, the clip's worker died during this step (the row is padding).
        clip_index, episode_index, step_index: int64 step ids, −1 for padding.
        extras: per-clip outputs of the policy (e.g. ``values``, ``log_probs``), ``(N, ...)``.
        infos: per-clip info dicts returned with ``next_obs``, empty for padding.
        obs_infos: per-clip info dicts that came with ``obs`` (from the reset at step 0, else
            from the previous step): what is known about o_t, e.g. its command and speed.
    """

    obs: Obs
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: Obs
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    worker_died: np.ndarray
    clip_index: np.ndarray
    episode_index: np.ndarray
    step_index: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    infos: tuple[dict[str, Any], ...] = ()
    obs_infos: tuple[dict[str, Any], ...] = ()

    def step_id(self, clip: int) -> StepId:
        return StepId(int(self.clip_index[clip]), int(self.episode_index[clip]), int(self.step_index[clip]))

    def transitions(self) -> list[Transition]:
        """The valid rows as :class:`Transition` s, in clip order."""
        return [
            Transition(
                obs=_index_obs(self.obs, clip),
                action=np.array(self.actions[clip]),
                reward=float(self.rewards[clip]),
                next_obs=_index_obs(self.next_obs, clip),
                terminated=bool(self.terminated[clip]),
                truncated=bool(self.truncated[clip]),
                step_id=self.step_id(clip),
                info=self.infos[clip] if self.infos else {},
                obs_info=self.obs_infos[clip] if self.obs_infos else {},
            )
            for clip in np.flatnonzero(self.valid)
        ]


def _stack_obs(batches: list[Obs]) -> Obs:
    if isinstance(batches[0], dict):
        return {key: np.stack([b[key] for b in batches]) for key in batches[0]}
    return np.stack(batches)


@dataclass(frozen=True)
class Rollout:
    """T lock-steps of N clips, for on-policy learners. Fields as in :class:`StepBatch`, shaped
    ``(T, N, ...)``; ``infos[t][n]`` is the info returned with ``next_obs[t, n]`` and
    ``obs_infos[t][n]`` the one that came with ``obs[t, n]``.

    When a worker died at row ``[t, n]``, row ``[t − 1, n]`` (if valid and in this rollout) is
    marked truncated, so GAE bootstraps from V(o_t) there.
    """

    obs: Obs
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: Obs
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    worker_died: np.ndarray
    clip_index: np.ndarray
    episode_index: np.ndarray
    step_index: np.ndarray
    extras: dict[str, np.ndarray]
    infos: tuple[tuple[dict[str, Any], ...], ...]
    obs_infos: tuple[tuple[dict[str, Any], ...], ...] = ()

    @classmethod
    def from_steps(cls, steps: list[StepBatch]) -> Rollout:
        if not steps:
            raise ValueError("steps: expected at least one StepBatch, got none")
        truncated = np.stack([s.truncated for s in steps])
        valid = np.stack([s.valid for s in steps])
        worker_died = np.stack([s.worker_died for s in steps])
        died_after = np.zeros_like(worker_died)
        died_after[:-1] = worker_died[1:]
        truncated = truncated | (died_after & valid)
        return cls(
            obs=_stack_obs([s.obs for s in steps]),
            actions=np.stack([s.actions for s in steps]),
            rewards=np.stack([s.rewards for s in steps]),
            next_obs=_stack_obs([s.next_obs for s in steps]),
            terminated=np.stack([s.terminated for s in steps]),
            truncated=truncated,
            valid=valid,
            worker_died=worker_died,
            clip_index=np.stack([s.clip_index for s in steps]),
            episode_index=np.stack([s.episode_index for s in steps]),
            step_index=np.stack([s.step_index for s in steps]),
            extras={key: np.stack([s.extras[key] for s in steps]) for key in steps[0].extras},
            infos=tuple(s.infos for s in steps),
            obs_infos=tuple(s.obs_infos for s in steps),
        )

    @property
    def num_valid(self) -> int:
        return int(self.valid.sum())

    def tensors(self, device: Any = None) -> dict[str, Any]:
        """The arrays as torch tensors on ``device`` (infos left out; dict observations stay dicts)."""
        import torch

        def convert(array: np.ndarray) -> Any:
            return torch.as_tensor(array, device=device)

        out: dict[str, Any] = {}
        for name in ("actions", "rewards", "terminated", "truncated", "valid", "worker_died",
                     "clip_index", "episode_index", "step_index"):
            out[name] = convert(getattr(self, name))
        for name in ("obs", "next_obs"):
            value = getattr(self, name)
            out[name] = {k: convert(v) for k, v in value.items()} if isinstance(value, dict) else convert(value)
        out.update({key: convert(value) for key, value in self.extras.items()})
        return out
