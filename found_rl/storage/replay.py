"""Replay storage that keeps every observation once and attaches late advisor labels by step id.

Layout: a ring of ``capacity`` observation slots. A slot holds o_t and, when it starts a
transition, a_t, r_t, terminated_t and the index of the slot holding o_{t+1}. While an episode
runs, o_{t+1} is the next transition's o_t, so it is stored once and shared. Only where an
episode ends (terminated or truncated) is the final observation stored in a slot of its own
that starts no transition. Overwriting a slot clears its labels and forgets its step id, so a
late answer for it is dropped (ARCHITECTURE §6; the public code's labels went stale).

Ring order guarantees consistency: a transition's next slot is always written after it, so it is
overwritten after it too.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from found_rl.errors import UserError
from found_rl.models.observation import NumpyObs, ObsSpec, TensorObs

StepId = tuple[int, int, int]
"""(clip slot, episode index, step index), as carried in the env's ``info``."""


class ReplaySamples(NamedTuple):
    """A sampled batch; B = batch size, A = action dimensions. All tensors on the buffer's device."""

    observations: TensorObs
    """o_t: ``{"bev": (B, C, H, W) uint8, "state": (B, S) float32}`` or ``(B, D) float32``"""
    actions: torch.Tensor
    """a_t, ``(B, A)`` float32"""
    rewards: torch.Tensor
    """env reward r_t, ``(B,)`` float32 (no CLIP bonus)"""
    next_observations: TensorObs
    """o_{t+1}, same layout as ``observations`` (the final observation where an episode ended)"""
    dones: torch.Tensor
    """1.0 where the episode terminated at t (never for truncation), ``(B,)`` float32"""
    has_advisor: torch.Tensor
    """h_t ∈ {0, 1}: an advisor action is attached, ``(B,)`` float32"""
    advisor_actions: torch.Tensor
    """aᵛ_t, ``(B, A)`` float32; zeros where ``has_advisor`` is 0"""
    has_clip: torch.Tensor
    """1.0 where a CLIP bonus is attached, ``(B,)`` float32"""
    clip_bonus: torch.Tensor
    """CLIP bonus b_t, ``(B,)`` float32; zeros where ``has_clip`` is 0"""
    discounts: torch.Tensor | None = None
    """n-step batches only: γᵏ for the k ≤ n steps summed into ``rewards``, ``(B,)`` float32.
    The TD target is rewards + (1 − dones)·discounts·Q(next_observations). None for 1-step batches."""


CHANNELS_LAST = frozenset({"bev"})
"""Keys stored ``(H, W, C)``: a sampled batch is then a channels-last ``(B, C, H, W)`` view, whose
float conversion is a plain element-wise pass and which oneDNN's convolutions read without a
reorder (an NCHW batch cost two layout-changing copies per update, about a quarter of a CPU SAC
update, issue 26). Values, shapes and sampling are unchanged."""


def _storage_shape(key: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape[1:], shape[0]) if key in CHANNELS_LAST else shape


def _stored(key: str, obs: np.ndarray) -> np.ndarray:
    """One observation as its storage holds it."""
    return obs.transpose(1, 2, 0) if key in CHANNELS_LAST else obs


def _obs_layout(spec: ObsSpec) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    if spec.is_dict:
        return {
            "bev": (tuple(spec.bev_shape), np.dtype(np.uint8)),
            "state": ((int(spec.state_dim),), np.dtype(np.float32)),
        }  # type: ignore[arg-type]
    return {"obs": ((int(spec.vector_dim),), np.dtype(np.float32))}  # type: ignore[arg-type]


class ReplayBuffer:
    """Off-policy replay for N lock-stepped clips, with label slots keyed by step id.

    Args:
        capacity: observation slots (transitions ≈ capacity × (1 − 1 / mean episode length)).
        obs_spec: observation layout.
        action_dim: A.
        num_envs: N, the clips adding in lock-step.
        device: where sampled tensors go.
        memmap_dir: if given, observations live in ``.npy`` memory maps in this folder (a run
            folder), so a large buffer need not fit in RAM.
    """

    def __init__(
        self,
        capacity: int,
        obs_spec: ObsSpec,
        action_dim: int,
        num_envs: int = 1,
        device: torch.device | str = "cpu",
        memmap_dir: str | Path | None = None,
    ):
        if num_envs < 1:
            raise ValueError(f"ReplayBuffer.num_envs: expected an int >= 1, got {num_envs}")
        if capacity < 4 * num_envs:
            raise ValueError(f"ReplayBuffer.capacity: expected at least 4 × num_envs = {4 * num_envs}, got {capacity}")
        if action_dim < 1:
            raise ValueError(f"ReplayBuffer.action_dim: expected an int >= 1, got {action_dim}")
        self.capacity, self.obs_spec, self.action_dim, self.num_envs = (
            capacity,
            obs_spec,
            action_dim,
            num_envs,
        )
        self.device = torch.device(device)
        self._obs: dict[str, np.ndarray] = {}
        for key, (obs_shape, dtype) in _obs_layout(obs_spec).items():
            shape = _storage_shape(key, obs_shape)
            if memmap_dir is None:
                self._obs[key] = np.zeros((capacity, *shape), dtype=dtype)
            else:
                folder = Path(memmap_dir)
                folder.mkdir(parents=True, exist_ok=True)
                self._obs[key] = np.lib.format.open_memmap(
                    folder / f"replay_{key}.npy",
                    mode="w+",
                    dtype=dtype,
                    shape=(capacity, *shape),
                )
        self.actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.next_slot = np.full(capacity, -1, dtype=np.int64)
        self.is_transition = np.zeros(capacity, dtype=bool)
        self.step_ids = np.full((capacity, 3), -1, dtype=np.int64)
        self.advisor_actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.has_advisor = np.zeros(capacity, dtype=bool)
        self.clip_bonus = np.zeros(capacity, dtype=np.float32)
        self.has_clip = np.zeros(capacity, dtype=bool)
        self._slot_of_id: dict[StepId, int] = {}
        self._pending = [-1] * num_envs  # slot holding env e's o_{t+1}, awaiting its transition
        self._cursor = 0
        self._filled = 0
        self._counts = {"transitions": 0, "advisor": 0, "clip": 0}

    # ------------------------------------------------------------------ writing
    def _allocate(self) -> int:
        """Take the next ring slot, clearing whatever it held (labels, id, transition)."""
        slot = self._cursor
        self._cursor = (self._cursor + 1) % self.capacity
        self._filled = min(self._filled + 1, self.capacity)
        if self.is_transition[slot]:
            self._counts["transitions"] -= 1
            self._counts["advisor"] -= int(self.has_advisor[slot])
            self._counts["clip"] -= int(self.has_clip[slot])
            self._slot_of_id.pop(tuple(int(v) for v in self.step_ids[slot]), None)  # type: ignore[arg-type]
        self.is_transition[slot] = False
        self.has_advisor[slot] = False
        self.has_clip[slot] = False
        self.advisor_actions[slot] = 0.0  # ReplaySamples promises zeros where there is no label
        self.clip_bonus[slot] = 0.0
        self.next_slot[slot] = -1
        self.step_ids[slot] = -1
        self._pending = [-1 if pending == slot else pending for pending in self._pending]
        return slot

    def _write_obs(self, slot: int, obs: dict[str, np.ndarray], env: int) -> None:
        for key, array in self._obs.items():
            array[slot] = _stored(key, obs[key][env])

    def _as_dict(self, obs: NumpyObs, name: str) -> dict[str, np.ndarray]:
        layout = _obs_layout(self.obs_spec)
        data = dict(obs) if isinstance(obs, dict) else {"obs": obs}
        if set(data) != set(layout):
            raise ValueError(f"ReplayBuffer.add: {name} must have keys {sorted(layout)}, got {sorted(data)}")
        out = {}
        for key, (shape, dtype) in layout.items():
            array = np.asarray(data[key])
            if array.shape != (self.num_envs, *shape):
                raise ValueError(
                    f"ReplayBuffer.add: {name}[{key!r}] must have shape {(self.num_envs, *shape)}, got {array.shape}"
                )
            out[key] = array.astype(dtype, copy=False)
        return out

    def add(
        self,
        obs: NumpyObs,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: NumpyObs,
        terminated: np.ndarray,
        truncated: np.ndarray,
        step_ids: Sequence[StepId] | np.ndarray | None = None,
        valid: np.ndarray | None = None,
    ) -> None:
        """Store one lock-step of N transitions (leading dimension N everywhere).

        ``next_obs`` is the observation the step returned (the final one where the episode ended,
        never the reset observation). Invalid rows (FAST padding, ``valid == 0``) are skipped.

        Raises:
            ValueError: on shapes that do not match, or when a clip's ``obs`` is not the
                ``next_obs`` it returned last step although that step did not end the episode.
        """
        obs_d, next_d = self._as_dict(obs, "obs"), self._as_dict(next_obs, "next_obs")
        actions = np.asarray(actions, dtype=np.float32).reshape(self.num_envs, self.action_dim)
        rewards = np.asarray(rewards, dtype=np.float32).reshape(self.num_envs)
        terminated = np.asarray(terminated, dtype=bool).reshape(self.num_envs)
        ended = terminated | np.asarray(truncated, dtype=bool).reshape(self.num_envs)
        ids = (
            np.full((self.num_envs, 3), -1, dtype=np.int64)
            if step_ids is None
            else np.asarray(step_ids, dtype=np.int64)
        )
        if ids.shape != (self.num_envs, 3):
            raise ValueError(f"ReplayBuffer.add: step_ids must have shape {(self.num_envs, 3)}, got {ids.shape}")
        is_valid = (
            np.ones(self.num_envs, dtype=bool)
            if valid is None
            else np.asarray(valid, dtype=bool).reshape(self.num_envs)
        )
        for env in np.flatnonzero(~is_valid):
            # No transition continues through an invalid row: FAST padding follows an ended
            # episode, and a dead worker's lost step is followed by its clip's reset.
            self._pending[env] = -1
        for env in np.flatnonzero(is_valid):
            slot = self._pending[env]
            if slot >= 0 and not all(np.array_equal(self._obs[k][slot], _stored(k, obs_d[k][env])) for k in self._obs):
                raise ValueError(
                    f"ReplayBuffer.add: clip {env}'s obs differs from the next_obs it returned last step; "
                    "mark that step terminated or truncated before resetting the clip"
                )
            if slot < 0:
                slot = self._allocate()
                self._write_obs(slot, obs_d, env)
            next_slot = self._allocate()
            self._write_obs(next_slot, next_d, env)
            self.actions[slot] = actions[env]
            self.rewards[slot] = rewards[env]
            self.terminated[slot] = terminated[env]
            self.next_slot[slot] = next_slot
            self.is_transition[slot] = True
            self._counts["transitions"] += 1
            self._pending[env] = -1 if ended[env] else next_slot
            if ids[env, 0] >= 0:
                self.step_ids[slot] = ids[env]
                self._slot_of_id[tuple(int(v) for v in ids[env])] = slot  # type: ignore[index]

    def attach_labels(
        self,
        step_id: StepId,
        action: np.ndarray | None = None,
        clip_bonus: float | None = None,
    ) -> bool:
        """Attach an advisor action and/or CLIP bonus to the transition of ``step_id``'s observation.

        Returns:
            False when the answer came too late (its slot was overwritten) or the id is unknown.
        """
        slot = self._slot_of_id.get(tuple(int(v) for v in step_id))  # type: ignore[arg-type]
        if slot is None:
            return False
        if action is not None:
            advisor_action = np.asarray(action, dtype=np.float32).reshape(-1)
            if advisor_action.shape != (self.action_dim,) or not np.all(np.isfinite(advisor_action)):
                raise ValueError(f"attach_labels: action must be {self.action_dim} finite floats, got {action!r}")
            self.advisor_actions[slot] = advisor_action
            self._counts["advisor"] += int(not self.has_advisor[slot])
            self.has_advisor[slot] = True
        if clip_bonus is not None:
            if not np.isfinite(clip_bonus):
                raise ValueError(f"attach_labels: clip_bonus must be finite, got {clip_bonus!r}")
            self.clip_bonus[slot] = float(clip_bonus)
            self._counts["clip"] += int(not self.has_clip[slot])
            self.has_clip[slot] = True
        return True

    # ------------------------------------------------------------------ checkpointing
    _ARRAYS = (
        "actions", "rewards", "terminated", "next_slot", "is_transition", "step_ids",
        "advisor_actions", "has_advisor", "clip_bonus", "has_clip",
    )

    def save(self, path: str | Path) -> None:
        """Write the filled part of the buffer to one ``.npz`` file (uncompressed: BEV batches
        are written in seconds, where compression would cost minutes). Write it atomically
        (``found_rl.atomic``); labels of stored entries survive, answers in flight do not."""
        filled = self._filled
        arrays = {f"obs_{key}": array[:filled] for key, array in self._obs.items()}
        arrays.update({f"channels_last_{key}": np.ones(1, bool) for key in self._obs if key in CHANNELS_LAST})
        arrays.update({name: getattr(self, name)[:filled] for name in self._ARRAYS})
        meta = [self.capacity, self.num_envs, self.action_dim, self._cursor, filled]
        with open(path, "wb") as file:
            np.savez(file, meta=np.asarray(meta, np.int64), **arrays)

    def load(self, path: str | Path) -> None:
        """Restore :meth:`save` output into this (empty, equally shaped) buffer.

        Clips start new episodes after a restore: no transition continues across it.

        Raises:
            ValueError: the file is unreadable or was written by a buffer of another shape.
        """
        try:
            with np.load(path) as data:
                arrays: dict[str, Any] = {name: data[name] for name in data.files}
            arrays = {name: value for name, value in arrays.items() if not name.startswith("channels_last_")} | {
                name: True for name in arrays if name.startswith("channels_last_")}
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as exc:  # np.load on a truncated or foreign file
            raise UserError(f"replay buffer {path}: cannot be read ({exc}); is it truncated?") from None
        capacity, num_envs, action_dim, cursor, filled = (int(v) for v in arrays.pop("meta"))
        if (capacity, num_envs, action_dim) != (self.capacity, self.num_envs, self.action_dim):
            raise UserError(
                f"replay buffer {path}: saved with capacity {capacity}, {num_envs} clips and {action_dim} action "
                f"dims; this run has {self.capacity}, {self.num_envs} and {self.action_dim}"
            )
        for key, array in self._obs.items():
            stored = arrays[f"obs_{key}"]
            if key in CHANNELS_LAST and f"channels_last_{key}" not in arrays:  # saved before issue 26: NCHW
                stored = stored.transpose(0, 2, 3, 1)
            if stored.shape != (filled, *array.shape[1:]):
                raise UserError(f"replay buffer {path}: observation {key!r} has shape {stored.shape}")
            array[:filled] = stored
        for name in self._ARRAYS:
            getattr(self, name)[:filled] = arrays[name]
        self._cursor, self._filled = cursor, filled
        self._pending = [-1] * self.num_envs
        live = np.flatnonzero(self.is_transition[:filled])
        self._slot_of_id = {
            tuple(int(v) for v in self.step_ids[slot]): int(slot) for slot in live if self.step_ids[slot, 0] >= 0
        }  # type: ignore[misc]
        self._counts = {
            "transitions": len(live),
            "advisor": int(self.has_advisor[live].sum()),
            "clip": int(self.has_clip[live].sum()),
        }

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        """Number of stored transitions (sampleable)."""
        return self._counts["transitions"]

    def label_coverage(self) -> dict[str, float]:
        """Fraction of stored transitions with an advisor action / a CLIP bonus."""
        total = max(1, self._counts["transitions"])
        return {
            "advisor": self._counts["advisor"] / total,
            "clip": self._counts["clip"] / total,
        }

    @property
    def obs_nbytes(self) -> int:
        """Bytes of the stored observations (one copy)."""
        return sum(array.nbytes for array in self._obs.values())

    @property
    def nbytes(self) -> int:
        """Bytes of every array the buffer holds, observations included.

        The step-id index (a dict of at most ``capacity`` entries) is not counted.
        """
        others = (
            self.actions,
            self.rewards,
            self.terminated,
            self.next_slot,
            self.is_transition,
            self.step_ids,
            self.advisor_actions,
            self.has_advisor,
            self.clip_bonus,
            self.has_clip,
        )
        return self.obs_nbytes + sum(array.nbytes for array in others)

    def _gather_obs(self, slots: np.ndarray) -> TensorObs:
        tensors = {}
        for key, array in self._obs.items():
            tensor = torch.as_tensor(array[slots], device=self.device)
            tensors[key] = tensor.permute(0, 3, 1, 2) if key in CHANNELS_LAST else tensor
        return tensors.get("obs", tensors)

    def sample(
        self,
        batch_size: int,
        rng: np.random.Generator,
        n_step: int = 1,
        gamma: float | None = None,
    ) -> ReplaySamples:
        """Uniform batch over stored transitions, optionally with n-step returns.

        With ``n_step > 1`` each sampled transition t is followed along its episode for up to n
        steps: ``rewards`` = Σ_{i<k} γⁱ r_{t+i}, ``next_observations`` = o_{t+k}, ``dones`` = 1
        if the episode terminated within those k steps, and ``discounts`` = γᵏ. The window is
        shorter (k < n) where the episode was truncated (bootstrapped from the final
        observation) or its next transition is not stored yet. Advisor labels are those of
        transition t (they score o_t); CLIP bonuses are summed like rewards, Σ γⁱ h_{t+i} b_{t+i},
        and ``has_clip`` is 1 where any step of the window has one.

        Raises:
            ValueError: if the buffer is empty, ``batch_size`` or ``n_step`` < 1, or ``n_step``
                > 1 without a ``gamma`` in [0, 1].
        """
        if batch_size < 1:
            raise ValueError(f"ReplayBuffer.sample: batch_size must be >= 1, got {batch_size}")
        if n_step < 1:
            raise ValueError(f"ReplayBuffer.sample: n_step must be >= 1, got {n_step}")
        if n_step > 1 and (gamma is None or not 0.0 <= gamma <= 1.0):
            raise ValueError(f"ReplayBuffer.sample: n_step > 1 needs gamma in [0, 1], got {gamma!r}")
        if len(self) == 0:
            raise ValueError("ReplayBuffer.sample: the buffer holds no transitions yet")
        chosen: list[np.ndarray] = []
        missing = batch_size
        while missing > 0:  # rejection sampling: final-observation slots are rare
            draws = rng.integers(0, self._filled, size=2 * missing)
            hits = draws[self.is_transition[draws]][:missing]
            chosen.append(hits)
            missing -= len(hits)
        slots = np.sort(np.concatenate(chosen))  # sorted reads are kinder to memory maps

        def tensor(array: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(array, dtype=torch.float32, device=self.device)

        if n_step == 1:
            rewards, dones = self.rewards[slots], self.terminated[slots]
            has_clip, clip_bonus = self.has_clip[slots], self.clip_bonus[slots]
            next_slots, discounts = self.next_slot[slots], None
        else:
            rewards, dones, has_clip, clip_bonus, next_slots, discounts = self._n_step(slots, n_step, float(gamma))
        return ReplaySamples(
            observations=self._gather_obs(slots),
            actions=tensor(self.actions[slots]),
            rewards=tensor(rewards),
            next_observations=self._gather_obs(next_slots),
            dones=tensor(dones),
            has_advisor=tensor(self.has_advisor[slots]),
            advisor_actions=tensor(self.advisor_actions[slots]),
            has_clip=tensor(has_clip),
            clip_bonus=tensor(clip_bonus),
            discounts=None if discounts is None else tensor(discounts),
        )

    def _n_step(self, slots: np.ndarray, n_step: int, gamma: float) -> tuple[np.ndarray, ...]:
        """Follow each transition along its episode for up to ``n_step`` stored transitions.

        A transition's next slot is written after it, so while the first transition is stored
        every later one in its window is too (ring order); a next slot that starts no
        transition is an episode's final observation or the newest, still pending one.
        """
        rewards = self.rewards[slots].astype(np.float64)
        dones = self.terminated[slots].copy()
        has_clip = self.has_clip[slots].copy()
        clip_bonus = np.where(has_clip, self.clip_bonus[slots], 0.0).astype(np.float64)
        next_slots = self.next_slot[slots].copy()
        discounts = np.full(len(slots), gamma, dtype=np.float64)
        for _ in range(1, n_step):
            going_on = ~dones & self.is_transition[next_slots]
            if not going_on.any():
                break
            current = next_slots[going_on]
            step_discount = discounts[going_on]
            rewards[going_on] += step_discount * self.rewards[current]
            clip_bonus[going_on] += step_discount * np.where(self.has_clip[current], self.clip_bonus[current], 0.0)
            has_clip[going_on] |= self.has_clip[current]
            dones[going_on] = self.terminated[current]
            next_slots[going_on] = self.next_slot[current]
            discounts[going_on] = step_discount * gamma
        return rewards, dones, has_clip, clip_bonus, next_slots, discounts
