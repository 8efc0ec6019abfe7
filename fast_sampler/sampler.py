"""Lock-step sampling of N clips: FAST's DPSA and the three baselines behind one interface.

Each call to :meth:`LockstepSampler.step` is one lock-step: reset the clips that need it (in
parallel), run the policy on all N current observations, step the running clips (in parallel)
and decide, by the :class:`ClipEndRule`, what happens to clips whose episode ended. See
METHOD.md §4 for FAST's semantics:

* an ended clip is continued virtually: not stepped, not reset, its rows are padding;
* when the ended fraction reaches ρ, or an episode reaches the horizon T_max, the still-running
  clips are truncated (bootstrapped, not terminal) and all clips reset together.

A lock-step can also be split so that the caller works while the envs step (a learner update
between acting on o_t and receiving o_{t+1}, as EnvPool's send/recv allows)::

    sampler.step_async()         # resets, the policy on the current obs, the actions sent
    learner.update(...)          # runs while the clips step (in their process or Ray workers)
    batch = sampler.step_wait()  # the results, the end rule, the lock-step's rows

``step()`` is exactly ``step_async()`` then ``step_wait()``, so both forms give the same
batches. Between the two, the sampler answers only :attr:`LockstepSampler.pending` and
:meth:`LockstepSampler.close`: its state is defined between lock-steps.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fast_sampler.executors.base import EnvFactory, Executor, StepResult
from fast_sampler.executors.inprocess import InProcessExecutor
from fast_sampler.rollout import Rollout, StepBatch, Transition
from fast_sampler.rules import AdaptiveRho, ClipEndRule, check_horizon, check_rho
from fast_sampler.spaces import Obs, ObsLayout

# policy(obs_batch) -> actions, or (actions, extras) with extras a dict of per-clip arrays such
# as {"values": (N,), "log_probs": (N,)}. Arrays may be numpy or torch; the leading dim is N.
Policy = Callable[[Obs], Any]


@dataclass
class SamplerStats:
    """Running counters of one sampler (for benchmarks and logging).

    Seconds count only the time spent inside the sampler's calls (``step``, ``step_async``,
    ``step_wait``): ``env_seconds`` is the part spent in the executor (resets, sending the
    actions and waiting for the results), ``total_seconds`` the whole. With the split form the
    caller's work between ``step_async`` and ``step_wait`` is in neither, so ``env_seconds``
    then measures how long the caller was still blocked on the envs: what overlapping did not hide.
    """

    lock_steps: int = 0
    rows: int = 0
    valid_transitions: int = 0
    episodes_started: int = 0
    global_resets: int = 0
    env_seconds: float = 0.0
    total_seconds: float = 0.0

    @property
    def valid_fraction(self) -> float:
        return self.valid_transitions / self.rows if self.rows else 0.0

    @property
    def env_time_share(self) -> float:
        return self.env_seconds / self.total_seconds if self.total_seconds else 0.0


@dataclass(frozen=True)
class _InFlightStep:
    """What :meth:`LockstepSampler.step_async` hands to :meth:`LockstepSampler.step_wait`."""

    obs: Obs
    obs_infos: tuple[dict[str, Any], ...]
    actions: np.ndarray
    extras: dict[str, np.ndarray]
    stepping: np.ndarray  # the clips whose actions went to the executor
    seconds: float  # spent inside step_async


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class LockstepSampler:
    """N clips stepped in lock-step under a :class:`ClipEndRule`.

    Args:
        env: an :class:`Executor`, or env factories (one per clip) to run in-process. The sampler
            owns it and closes it in :meth:`close`.
        policy: maps a batch of N observations to N actions (and optional extras).
        end_rule: what happens when a clip's episode ends.
        rho: ended fraction that triggers FAST's global truncation, in (0, 1].
        horizon: T_max, the most lock-steps an episode may last before it is truncated.
        adaptive_rho: FAST only; choose ρ per round by measured throughput (:class:`AdaptiveRho`).
        seed: seeds each clip's first reset with ``seed + clip``; later resets are unseeded so
            the env's own generator continues (gymnasium's convention).
        seed_every_episode: seed every reset from ``(seed, clip, episode index)`` instead, so a
            run restored with :meth:`load_state_dict` at a round boundary replays the same
            episodes as one that never stopped (needs ``seed``).
        rng: randomness for the adaptive ρ's exploration; defaults to one seeded by ``seed``.

    Raises:
        ValueError: for a ρ outside (0, 1] or a horizon that is not an int >= 1.
    """

    def __init__(
        self,
        env: Executor | Sequence[EnvFactory],
        policy: Policy,
        *,
        end_rule: ClipEndRule,
        rho: float = 0.5,
        horizon: int = 1000,
        adaptive_rho: bool = False,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        seed_every_episode: bool = False,
    ) -> None:
        self.rho = check_rho(rho)
        if seed_every_episode and seed is None:
            raise ValueError("seed_every_episode: needs a seed")
        self.seed_every_episode = seed_every_episode
        self.horizon = check_horizon(horizon)
        self.end_rule = ClipEndRule(end_rule)
        if adaptive_rho and self.end_rule is not ClipEndRule.CONTINUE_VIRTUALLY:
            raise ValueError(
                f"adaptive_rho: only FAST (end_rule=CONTINUE_VIRTUALLY) has a ρ, got end_rule={self.end_rule}"
            )
        self.executor = env if isinstance(env, Executor) else InProcessExecutor(env)
        self.policy = policy
        self.seed = seed
        self.num_clips = self.executor.num_clips
        self.observation_space = self.executor.observation_space
        self.action_space = self.executor.action_space
        self.stats = SamplerStats()
        self._adaptive = AdaptiveRho(self.num_clips, rng or np.random.default_rng(seed)) if adaptive_rho else None
        if self._adaptive is not None:
            self.rho = self._adaptive.choose()
        self._layout = ObsLayout(self.observation_space)
        self._obs = self._layout.allocate((self.num_clips,))
        self._running = np.zeros(self.num_clips, bool)
        self._needs_reset = np.ones(self.num_clips, bool)
        self._episode_index = np.full(self.num_clips, -1, np.int64)
        self._step_index = np.zeros(self.num_clips, np.int64)
        self._obs_infos: list[dict[str, Any]] = [{} for _ in range(self.num_clips)]
        self._round_started_at = 0.0
        self._round_valid = 0
        self._unyielded: collections.deque[Transition] = collections.deque()
        self._in_flight: _InFlightStep | None = None

    # -- the lock-step ----------------------------------------------------------------------

    def step(self) -> StepBatch:
        """Advance every clip by one lock-step and return the N rows it produced.

        The same as :meth:`step_async` followed at once by :meth:`step_wait`.

        Raises:
            RuntimeError: while a split step is pending.
        """
        self._check_no_step_pending("step")
        self.step_async()
        return self.step_wait()

    def step_async(self) -> None:
        """Start a lock-step: reset the clips that need it, act on the current observations and
        send the actions; :meth:`step_wait` collects the lock-step.

        Resets run to completion here (the policy needs their observations); the steps run in
        the background with the process and Ray executors, so the caller can work (e.g. update
        the learner) until it calls :meth:`step_wait`. The policy sees the observations now.

        Raises:
            RuntimeError: while another step is pending.
        """
        self._check_no_step_pending("step_async")
        started_at = time.perf_counter()
        if self._needs_reset.any():
            self._reset(np.flatnonzero(self._needs_reset), started_at)
        obs = self._layout.copy(self._obs)
        obs_infos = tuple(self._obs_infos)
        actions, extras = self._act(obs)
        stepping = np.flatnonzero(self._running)
        env_started_at = time.perf_counter()
        self.executor.step_async({int(clip): actions[clip] for clip in stepping})
        self.stats.env_seconds += time.perf_counter() - env_started_at
        seconds = time.perf_counter() - started_at
        self._in_flight = _InFlightStep(obs, obs_infos, actions, extras, stepping, seconds)

    def step_wait(self) -> StepBatch:
        """Finish the lock-step started by :meth:`step_async` and return the N rows it produced.

        Waits for the clips' results, then applies the end rule. The lock-step is no longer
        pending afterwards, even when this raises.

        Raises:
            RuntimeError: when no step is pending.
        """
        if self._in_flight is None:
            raise RuntimeError("step_wait: no step is pending; call step_async() first")
        sent, self._in_flight = self._in_flight, None
        started_at = time.perf_counter()
        results = self.executor.step_wait()
        self.stats.env_seconds += time.perf_counter() - started_at
        batch = self._record(sent, results)
        self.stats.total_seconds += sent.seconds + time.perf_counter() - started_at
        return batch

    @property
    def pending(self) -> bool:
        """True between :meth:`step_async` and :meth:`step_wait`: a lock-step is in flight."""
        return self._in_flight is not None

    def collect(self, num_steps: int) -> Rollout:
        """``num_steps`` lock-steps stacked into a ``(num_steps, N)`` :class:`Rollout`.

        Episodes carry over between calls; an episode still running in the last row has no
        done flag there, and GAE bootstraps it from ``next_obs`` (see ``smpo.masked_gae``).
        """
        if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
            raise ValueError(f"num_steps: expected an int >= 1, got {num_steps!r}")
        return Rollout.from_steps([self.step() for _ in range(num_steps)])

    def transitions(self, max_transitions: int | None = None) -> Iterator[Transition]:
        """Stream valid transitions for off-policy learners; padding is never yielded.

        The policy is called once per lock-step, so a learner that updates between items
        samples with its latest weights. Transitions of a lock-step that a bounded call did not
        hand out are kept and come first on the next call: nothing sampled is dropped.
        """
        yielded = 0
        while max_transitions is None or yielded < max_transitions:
            if not self._unyielded:
                self._unyielded.extend(self.step().transitions())
                continue
            yield self._unyielded.popleft()
            yielded += 1

    @property
    def at_round_boundary(self) -> bool:
        """True when every clip resets before the next lock-step: no episode is in flight, so
        the sampler's whole state is its counters (a safe point for an exact checkpoint).

        Raises:
            RuntimeError: while a lock-step is pending (it is decided by that step's results).
        """
        self._check_no_step_pending("at_round_boundary")
        return bool(self._needs_reset.all())

    def state_dict(self) -> dict[str, Any]:
        """The per-clip episode counters (plain data), so step ids stay unique across a resume.

        Raises:
            RuntimeError: while a lock-step is pending (the counters are defined between lock-steps).
        """
        self._check_no_step_pending("state_dict")
        return {"episode_index": self._episode_index.tolist(), "rho": self.rho}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the counters of :meth:`state_dict`; every clip resets before its next step.

        Raises:
            ValueError: when the state was saved with another number of clips.
            RuntimeError: while a lock-step is pending (its results would land on the new counters).
        """
        self._check_no_step_pending("load_state_dict")
        counters = np.asarray(state["episode_index"], np.int64)
        if counters.shape != (self.num_clips,):
            raise ValueError(
                f"sampler state: saved with {counters.size} clips, this sampler has {self.num_clips}"
            )
        self._episode_index[:] = counters
        self.rho = float(state.get("rho", self.rho))
        self._running[:] = False
        self._needs_reset[:] = True

    def close(self) -> None:
        """Close the executor, dropping a pending lock-step.

        Workers still stepping get a few seconds to finish, then are killed; shared memory is freed.
        """
        self._in_flight = None
        self.executor.close()

    def __enter__(self) -> LockstepSampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _act(self, obs: Obs) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        output = self.policy(obs)
        actions, extras = output if isinstance(output, tuple) else (output, {})
        actions = _to_numpy(actions)
        if actions.ndim == 0 or actions.shape[0] != self.num_clips:
            raise ValueError(
                f"policy: returned actions of shape {actions.shape}, expected a leading dimension of N={self.num_clips}"
            )
        converted = {}
        for key, value in dict(extras).items():
            array = _to_numpy(value)
            if array.ndim == 0 or array.shape[0] != self.num_clips:
                raise ValueError(
                    f"policy: extra {key!r} has shape {array.shape}, expected a leading dimension of N={self.num_clips}"
                )
            converted[key] = array
        return actions, converted

    def _record(self, sent: _InFlightStep, results: Mapping[int, StepResult]) -> StepBatch:
        """Turn the stepped clips' results into the lock-step's rows and apply the end rule."""
        num_clips = self.num_clips
        rewards = np.zeros(num_clips, np.float32)
        terminated, truncated, valid, worker_died = (np.zeros(num_clips, bool) for _ in range(4))
        ids = np.full((3, num_clips), -1, np.int64)
        step_actions = np.zeros_like(sent.actions)
        infos: list[dict[str, Any]] = [{} for _ in range(num_clips)]
        for clip in sent.stepping:
            result = results[int(clip)]
            self._running[clip] = False  # until shown otherwise below
            if result.worker_died:
                worker_died[clip] = True  # the step is lost; the clip ended (truncated) at o_t
                continue
            valid[clip] = True
            ids[:, clip] = (clip, self._episode_index[clip], self._step_index[clip])
            self._step_index[clip] += 1
            step_actions[clip] = sent.actions[clip]
            rewards[clip] = result.reward
            terminated[clip] = result.terminated
            truncated[clip] = result.truncated or (not result.terminated and self._step_index[clip] >= self.horizon)
            infos[clip] = result.info  # untouched: the sampler's ids live in the id arrays
            self._obs_infos[clip] = result.info
            self._layout.set_row(self._obs, clip, result.obs)
            self._running[clip] = not (terminated[clip] or truncated[clip])
        self._apply_end_rule(truncated, valid)

        self.stats.lock_steps += 1
        self.stats.rows += num_clips
        self.stats.valid_transitions += int(valid.sum())
        self._round_valid += int(valid.sum())
        return StepBatch(
            obs=sent.obs,
            actions=step_actions,
            rewards=rewards,
            next_obs=self._layout.copy(self._obs),
            terminated=terminated,
            truncated=truncated,
            valid=valid,
            worker_died=worker_died,
            clip_index=ids[0],
            episode_index=ids[1],
            step_index=ids[2],
            extras=dict(sent.extras),
            infos=tuple(infos),
            obs_infos=sent.obs_infos,
        )

    def _check_no_step_pending(self, call: str) -> None:
        if self._in_flight is not None:
            raise RuntimeError(f"{call}: a lock-step is pending; call step_wait() to finish it first")

    def _reset(self, clips: np.ndarray, now: float) -> None:
        if self.end_rule is not ClipEndRule.RESET_CLIP and len(clips) == self.num_clips:
            self._round_started_at, self._round_valid = now, 0
        seeds = {int(clip): self._reset_seed(int(clip)) for clip in clips}
        env_started_at = time.perf_counter()
        results = self.executor.reset(seeds)
        self.stats.env_seconds += time.perf_counter() - env_started_at
        for clip in clips:
            self._layout.set_row(self._obs, clip, results[int(clip)].obs)
            self._obs_infos[clip] = results[int(clip)].info
        self._running[clips] = True
        self._needs_reset[clips] = False
        self._episode_index[clips] += 1
        self._step_index[clips] = 0
        self.stats.episodes_started += len(clips)

    def _reset_seed(self, clip: int) -> int | None:
        if self.seed is None:
            return None
        next_episode = int(self._episode_index[clip]) + 1
        if self.seed_every_episode:
            return int(np.random.SeedSequence([self.seed, clip, next_episode]).generate_state(1)[0])
        return self.seed + clip if next_episode == 0 else None

    def _apply_end_rule(self, truncated: np.ndarray, valid: np.ndarray) -> None:
        ended = ~self._running
        if not ended.any():
            return
        if self.end_rule is ClipEndRule.RESET_CLIP:
            self._needs_reset |= ended
            return
        if self.end_rule is ClipEndRule.CONTINUE_VIRTUALLY:
            needed = math.ceil(self.rho * self.num_clips - 1e-9)
            if ended.sum() < needed:
                return  # ended clips are continued virtually (padding) until the threshold
        # Global truncation: cut the still-running clips (bootstrapped), reset everyone.
        truncated[valid & self._running] = True
        self._running[:] = False
        self._needs_reset[:] = True
        self.stats.global_resets += 1
        if self._adaptive is not None:
            self._adaptive.update(self.rho, self._round_valid, time.perf_counter() - self._round_started_at)
            self.rho = self._adaptive.choose()


class FastSampler(LockstepSampler):
    """FAST's DPSA: virtual continuation and global truncation at ended fraction ρ (METHOD.md §4)."""

    def __init__(
        self,
        env: Executor | Sequence[EnvFactory],
        policy: Policy,
        *,
        rho: float = 0.5,
        horizon: int = 1000,
        adaptive_rho: bool = False,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        seed_every_episode: bool = False,
    ) -> None:
        super().__init__(
            env, policy, end_rule=ClipEndRule.CONTINUE_VIRTUALLY, rho=rho, horizon=horizon,
            adaptive_rho=adaptive_rho, seed=seed, rng=rng, seed_every_episode=seed_every_episode,
        )


class PerClipResetSampler(LockstepSampler):
    """Baseline: lock-step, an ended clip is reset before the next lock-step (the batch waits)."""

    def __init__(
        self, env: Executor | Sequence[EnvFactory], policy: Policy, *, horizon: int = 1000, seed: int | None = None
    ) -> None:
        super().__init__(env, policy, end_rule=ClipEndRule.RESET_CLIP, horizon=horizon, seed=seed)


class GlobalResetSampler(LockstepSampler):
    """Baseline: lock-step, when any clip ends the others are truncated and all reset."""

    def __init__(
        self, env: Executor | Sequence[EnvFactory], policy: Policy, *, horizon: int = 1000, seed: int | None = None
    ) -> None:
        super().__init__(env, policy, end_rule=ClipEndRule.RESET_ALL, horizon=horizon, seed=seed)


class SingleClipSampler(LockstepSampler):
    """Baseline: one env, reset on done. ``env`` is one factory or a one-clip executor."""

    def __init__(
        self, env: Executor | EnvFactory, policy: Policy, *, horizon: int = 1000, seed: int | None = None
    ) -> None:
        check_horizon(horizon)
        executor = env if isinstance(env, Executor) else InProcessExecutor([env])
        if executor.num_clips != 1:
            executor.close()
            raise ValueError(f"env: SingleClipSampler runs exactly one clip, got an executor with {executor.num_clips}")
        super().__init__(executor, policy, end_rule=ClipEndRule.RESET_CLIP, horizon=horizon, seed=seed)
