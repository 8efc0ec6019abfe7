"""Ray executor: one Ray actor per clip, so clips can spread over the machines of a cluster.

Needs the optional extra ``ray``. Call ``ray.init(...)`` first to choose the cluster; otherwise
Ray starts a local one on first use. Observations come back through Ray's object store. An actor
that dies is replaced and its step is reported as lost and truncated, as in
:class:`~fast_sampler.executors.process.ProcessExecutor`. :meth:`RayExecutor.step_async`
launches the remote steps and returns; :meth:`RayExecutor.step_wait` gathers them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from fast_sampler.errors import ClipError, EnvFactoryError, EnvLostError, WorkerCrashedError, WorkerTimeoutError
from fast_sampler.executors.base import (
    EnvFactory,
    Executor,
    ResetResult,
    StepResult,
    check_factories,
    check_same_spaces,
    died_result,
)


class _ClipEnv:
    """The body of one clip actor: a thin remote wrapper around one env."""

    def __init__(self, env_fn: EnvFactory) -> None:
        self._env_fn = env_fn
        self._env = None

    def build(self) -> tuple[Any, Any]:
        self._env = self._env_fn()
        return self._env.observation_space, self._env.action_space

    def pid(self) -> int:
        import os

        return os.getpid()

    def reset(self, seed: int | None) -> tuple[Any, dict]:
        obs, info = self._env.reset(seed=seed)
        return obs, dict(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self._env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), dict(info)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()


class RayExecutor(Executor):
    """One Ray actor per clip.

    Args:
        env_fns: one factory per clip (serialised by Ray, so lambdas work).
        timeout_s: longest wait for any command, per call, counted from its launch (so from
            :meth:`step_async` for a split step).
        num_cpus_per_clip: CPUs Ray reserves for each actor (fractions allowed).
        num_gpus_per_clip: GPUs Ray reserves for each actor (fractions allowed); Ray places
            the actor on a node with that much free GPU and sets its ``CUDA_VISIBLE_DEVICES``,
            so an env that starts its own simulator there (one CARLA server per actor) uses
            that node's GPU.
        max_restarts: dead actors replaced over the executor's life before giving up.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFactory],
        *,
        timeout_s: float = 120.0,
        num_cpus_per_clip: float = 1.0,
        num_gpus_per_clip: float = 0.0,
        max_restarts: int = 32,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("RayExecutor needs Ray: pip install 'found-rl[ray]' (or 'ray')") from exc
        check_factories(env_fns)
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s}")
        if not num_gpus_per_clip >= 0:
            raise ValueError(f"num_gpus_per_clip: expected a number >= 0, got {num_gpus_per_clip}")
        self._ray = ray
        self._actor_class = ray.remote(num_cpus=num_cpus_per_clip, num_gpus=num_gpus_per_clip, max_restarts=0)(
            _ClipEnv
        )
        self._env_fns = list(env_fns)
        self.num_clips = len(env_fns)
        self.timeout_s = float(timeout_s)
        self.max_restarts = max_restarts
        self.worker_restarts = 0
        self._actors: list[Any] = [None] * self.num_clips
        try:
            self._actors = [self._actor_class.remote(env_fn) for env_fn in self._env_fns]
            builds = {clip: actor.build.remote() for clip, actor in enumerate(self._actors)}
            answers = self._gather(builds, "start-up", self._deadline())
            for clip, (status, payload) in answers.items():
                if status != "ok":
                    raise EnvFactoryError(clip, f"env factory failed in its Ray actor: {payload}")
            spaces = [answers[clip][1] for clip in range(self.num_clips)]
            self.observation_space, self.action_space = check_same_spaces(spaces)
        except BaseException:
            self.close()
            raise

    def worker_pid(self, clip: int) -> int:
        """PID of the actor process running ``clip`` (on its node)."""
        return self._ray.get(self._actors[clip].pid.remote(), timeout=self.timeout_s)

    def _reset(self, seeds: Mapping[int, int | None]) -> dict[int, ResetResult]:
        results: dict[int, ResetResult] = {}
        pending = dict(seeds)
        while pending:
            refs = {clip: self._actors[clip].reset.remote(seed) for clip, seed in pending.items()}
            for clip, (status, payload) in self._gather(refs, "reset", self._deadline()).items():
                if status == "ok":
                    results[clip] = ResetResult(*payload)
                    del pending[clip]
                elif status == "died":
                    self._restart(clip)
                else:
                    raise ClipError(clip, f"reset raised in its Ray actor: {payload}")
        return results

    def _start_step(self, actions: dict[int, Any]) -> tuple[dict[int, Any], float]:
        """Launch the remote steps (Ray returns their references at once) and note the deadline."""
        deadline = self._deadline()
        return {clip: self._actors[clip].step.remote(action) for clip, action in actions.items()}, deadline

    def _finish_step(self, started: tuple[dict[int, Any], float]) -> dict[int, StepResult]:
        refs, deadline = started
        results: dict[int, StepResult] = {}
        for clip, (status, payload) in self._gather(refs, "step", deadline).items():
            if status == "ok":
                results[clip] = StepResult(*payload)
            elif status == "died":
                self._restart(clip)
                results[clip] = died_result(f"Ray actor of clip {clip} died during step ({payload}); restarted")
            elif status == "lost":  # the env replaced its simulator; the actor lives on
                results[clip] = died_result(f"env of clip {clip} lost its simulator during step ({payload})")
            else:
                raise ClipError(clip, f"step raised in its Ray actor: {payload}")
        return results

    def _close(self) -> None:
        # An actor still stepping finishes that step, then closes (Ray runs its calls in order) or is killed.
        actors, self._actors = self._actors, [None] * self.num_clips
        live = [actor for actor in actors if actor is not None]
        closing = [actor.close.remote() for actor in live]
        if closing:
            self._ray.wait(closing, num_returns=len(closing), timeout=5.0)
        for actor in live:
            self._ray.kill(actor)

    def _deadline(self) -> float:
        """When a command launched now must have answered, on ``time.monotonic()``'s clock."""
        return time.monotonic() + self.timeout_s

    def _gather(self, refs: Mapping[int, Any], command: str, deadline: float) -> dict[int, tuple[str, Any]]:
        """Wait until ``deadline`` for every reference: ("ok", value), ("died", reason) or ("error", reason)."""
        ray = self._ray
        answers: dict[int, tuple[str, Any]] = {}
        for clip, ref in refs.items():
            try:
                answers[clip] = ("ok", ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except ray.exceptions.GetTimeoutError:
                ray.kill(self._actors[clip])
                self._actors[clip] = None
                raise WorkerTimeoutError(
                    clip, f"Ray actor did not answer {command!r} within {self.timeout_s:g} s; the actor was killed"
                ) from None
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if exc.cause is not None else exc
                status = "lost" if isinstance(cause, EnvLostError) else "error"
                remote = getattr(exc, "traceback_str", "")  # the actor's traceback, as the process executor forwards it
                answers[clip] = (status, f"{type(cause).__name__}: {cause}" + (
                    f"\n--- worker traceback ---\n{remote}" if status == "error" and remote else ""))
            except ray.exceptions.RayActorError as exc:
                answers[clip] = ("died", type(exc).__name__)
        return answers

    def _restart(self, clip: int) -> None:
        self.worker_restarts += 1
        if self.worker_restarts > self.max_restarts:
            raise WorkerCrashedError(
                clip, f"Ray actor died again after {self.max_restarts} restarts in total; giving up"
            )
        old = self._actors[clip]
        if old is not None:
            self._ray.kill(old)
        self._actors[clip] = self._actor_class.remote(self._env_fns[clip])
        build = {clip: self._actors[clip].build.remote()}
        status, payload = self._gather(build, "start-up", self._deadline())[clip]
        if status != "ok":
            raise EnvFactoryError(clip, f"env factory failed in its restarted Ray actor: {payload}")
