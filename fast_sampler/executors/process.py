"""Subprocess executor: one env per worker process, observations through shared memory.

Commands go out to every addressed worker before any answer is awaited, so env latencies
overlap; :meth:`ProcessExecutor.step_async` returns right after sending, so the caller's own
work overlaps them too, and :meth:`ProcessExecutor.step_wait` gathers the answers. A worker
that dies (segfault, OOM kill, ``os.kill``) is detected through its process sentinel, replaced
by a fresh worker, and reported to the sampler as a lost, truncated step. A worker that does
not answer within ``timeout_s`` of the command's sending is killed and raises
:class:`WorkerTimeoutError` naming its clip.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import cloudpickle

from fast_sampler.errors import ClipError, EnvFactoryError, WorkerCrashedError, WorkerTimeoutError
from fast_sampler.executors.base import (
    EnvFactory,
    Executor,
    ResetResult,
    StepResult,
    check_factories,
    check_same_spaces,
    died_result,
)
from fast_sampler.executors.process_worker import worker_main
from fast_sampler.spaces import ObsLayout

_CLOSE_TIMEOUT_S = 5.0


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection


@dataclass
class _Sent:
    """Commands sent to workers whose answers are still to be gathered."""

    command: str
    awaited: set[int]  # clips whose answer is in the pipe or on its way
    answers: dict[int, tuple[str, Any]]  # known at sending: ("died", reason) for a closed pipe
    deadline: float  # time.monotonic() by which every awaited answer must have come


def default_context() -> BaseContext:
    """fork where available (POSIX): workers start in well under a second and factories need not
    be importable; spawn elsewhere. Pass ``start_method="forkserver"`` or ``"spawn"`` when the
    parent holds state that must not be forked (e.g. a CUDA context)."""
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class ProcessExecutor(Executor):
    """One worker process per clip.

    Args:
        env_fns: one factory per clip; pickled with cloudpickle, so lambdas and closures work.
        timeout_s: longest wait for any command (env construction, reset, step), per call,
            counted from the sending (so from :meth:`step_async` for a split step).
        start_method: a ``multiprocessing`` start method; default fork (spawn where there is no fork).
        max_restarts: dead workers replaced over the executor's life before giving up.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFactory],
        *,
        timeout_s: float = 120.0,
        start_method: str | None = None,
        max_restarts: int = 32,
    ) -> None:
        check_factories(env_fns)
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s}")
        self.num_clips = len(env_fns)
        self.timeout_s = float(timeout_s)
        self.max_restarts = max_restarts
        self.worker_restarts = 0
        self._context = multiprocessing.get_context(start_method) if start_method else default_context()
        self._env_fn_bytes = [cloudpickle.dumps(env_fn) for env_fn in env_fns]
        # Workers must share this process's resource tracker; one they started themselves would
        # unlink the shared memory when they exit (CPython < 3.13 registers on attach).
        resource_tracker.ensure_running()
        self._workers: list[_Worker | None] = [None] * self.num_clips
        self._shm: SharedMemory | None = None
        try:
            for clip in range(self.num_clips):
                self._workers[clip] = self._start_worker(clip)
            spaces = [self._await_ready(clip) for clip in range(self.num_clips)]
            self.observation_space, self.action_space = check_same_spaces(spaces)
            self._layout = ObsLayout(self.observation_space)
            self._shm = SharedMemory(create=True, size=self._layout.nbytes * self.num_clips)
            self._attach(range(self.num_clips))
        except BaseException:
            self.close()
            raise

    # -- public interface -------------------------------------------------------------------

    def worker_pid(self, clip: int) -> int:
        """PID of the process currently running ``clip`` (changes when it is restarted)."""
        worker = self._workers[clip]
        if worker is None or worker.process.pid is None:
            raise ClipError(clip, "has no running worker")
        return worker.process.pid

    @property
    def shared_memory_name(self) -> str | None:
        """Name of the shared-memory block holding the clips' observations (None once closed)."""
        return self._shm.name if self._shm is not None else None

    def _reset(self, seeds: Mapping[int, int | None]) -> dict[int, ResetResult]:
        results: dict[int, ResetResult] = {}
        pending = dict(seeds)
        while pending:
            answers = self._call({clip: ("reset", seed) for clip, seed in pending.items()})
            for clip, (status, payload) in answers.items():
                if status == "ok":
                    results[clip] = ResetResult(self._read_obs(clip), payload)
                    del pending[clip]
                else:  # died: the replacement is reset on the next pass
                    self._restart(clip)
        return results

    def _start_step(self, actions: dict[int, Any]) -> _Sent:
        return self._send({clip: ("step", action) for clip, action in actions.items()})

    def _finish_step(self, sent: _Sent) -> dict[int, StepResult]:
        results: dict[int, StepResult] = {}
        for clip, (status, payload) in self._gather(sent).items():
            if status == "ok":
                reward, terminated, truncated, info = payload
                results[clip] = StepResult(self._read_obs(clip), reward, terminated, truncated, info)
            elif status == "lost":  # the env replaced its simulator; the worker lives on
                results[clip] = died_result(f"env of clip {clip} lost its simulator during step ({payload})")
            else:
                message = f"worker of clip {clip} died during step ({payload}); restarted"
                self._restart(clip)
                results[clip] = died_result(message)
        return results

    def _close(self) -> None:
        # A worker still stepping answers that step first, then the close; neither is awaited.
        workers, self._workers = self._workers, [None] * self.num_clips
        for worker in workers:
            if worker is not None and worker.process.is_alive():
                with contextlib.suppress(OSError):  # already gone: nothing to tell it
                    worker.conn.send(("close", None))
        deadline = time.monotonic() + _CLOSE_TIMEOUT_S
        for worker in workers:
            if worker is not None:
                self._stop(worker, max(0.0, deadline - time.monotonic()))
        if self._shm is not None:
            self._shm.close()
            self._shm.unlink()
            self._shm = None

    # -- worker life cycle ------------------------------------------------------------------

    def _start_worker(self, clip: int) -> _Worker:
        parent_conn, child_conn = self._context.Pipe()
        process = self._context.Process(
            target=worker_main,
            args=(child_conn, self._env_fn_bytes[clip]),
            name=f"fast-sampler-clip-{clip}",
            daemon=True,
        )
        process.start()
        child_conn.close()
        return _Worker(process, parent_conn)

    def _await_ready(self, clip: int) -> Any:
        status, payload = self._receive({clip}, "start-up", time.monotonic() + self.timeout_s)[clip]
        if status == "ready":
            return payload
        if status == "error":
            raise EnvFactoryError(clip, f"env factory raised {payload}")
        raise EnvFactoryError(clip, f"worker died while building its env ({payload})")

    def _attach(self, clips: Sequence[int] | range) -> None:
        nbytes = self._layout.nbytes
        self._call({clip: ("attach", (self._shm.name, clip * nbytes, nbytes)) for clip in clips}, allow_death=False)

    def _restart(self, clip: int) -> None:
        self.worker_restarts += 1
        if self.worker_restarts > self.max_restarts:
            raise WorkerCrashedError(clip, f"worker died again after {self.max_restarts} restarts in total; giving up")
        old = self._workers[clip]
        if old is not None:
            self._stop(old, 0.0)
        self._workers[clip] = self._start_worker(clip)
        self._await_ready(clip)
        self._attach([clip])

    @staticmethod
    def _stop(worker: _Worker, grace_s: float) -> None:
        worker.process.join(grace_s)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()

    # -- messaging --------------------------------------------------------------------------

    def _read_obs(self, clip: int) -> Any:
        nbytes = self._layout.nbytes
        return self._layout.read(self._shm.buf[clip * nbytes : (clip + 1) * nbytes])

    def _call(
        self, commands: Mapping[int, tuple[str, Any]], allow_death: bool = True
    ) -> dict[int, tuple[str, Any]]:
        """Send every command, then gather every answer: ("ok", payload) or ("died", reason)."""
        return self._gather(self._send(commands), allow_death)

    def _send(self, commands: Mapping[int, tuple[str, Any]]) -> _Sent:
        """Send every command without awaiting any answer; the timeout counts from here."""
        deadline = time.monotonic() + self.timeout_s
        answers: dict[int, tuple[str, Any]] = {}
        for clip, message in commands.items():
            try:
                self._workers[clip].conn.send(message)
            except OSError as exc:
                answers[clip] = ("died", f"pipe closed: {exc}")
        name = next(iter(commands.values()))[0] if commands else ""
        return _Sent(name, set(commands) - set(answers), answers, deadline)

    def _gather(self, sent: _Sent, allow_death: bool = True) -> dict[int, tuple[str, Any]]:
        """Await the answers to commands sent by :meth:`_send`; raise for errors (and deaths, if not allowed)."""
        answers = {**sent.answers, **self._receive(sent.awaited, sent.command, sent.deadline)}
        for clip, (status, payload) in answers.items():
            if status == "error" or (status == "lost" and sent.command != "step"):
                raise ClipError(clip, f"{sent.command} raised {payload}")
            if status == "died" and not allow_death:
                raise WorkerCrashedError(clip, f"worker died during {sent.command} ({payload})")
        return answers

    def _receive(self, clips: set[int], command: str, deadline: float) -> dict[int, tuple[str, Any]]:
        answers: dict[int, tuple[str, Any]] = {}
        pending = set(clips)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill_hung(pending, command)
            owners: dict[Any, int] = {}
            for clip in pending:
                worker = self._workers[clip]
                owners[worker.conn] = clip
                owners[worker.process.sentinel] = clip
            for ready in wait(list(owners), timeout=remaining):
                clip = owners[ready]
                if clip not in pending:
                    continue
                worker = self._workers[clip]
                if worker.conn.poll():
                    try:
                        answers[clip] = worker.conn.recv()
                    except (EOFError, OSError):
                        answers[clip] = ("died", self._exit_reason(worker))
                else:
                    answers[clip] = ("died", self._exit_reason(worker))
                pending.discard(clip)
        return answers

    def _kill_hung(self, pending: set[int], command: str) -> None:
        hung = sorted(pending)
        pids = {clip: self._workers[clip].process.pid for clip in hung}
        for clip in hung:
            self._stop(self._workers[clip], 0.0)
            self._workers[clip] = None
        raise WorkerTimeoutError(
            hung[0],
            f"worker (pid {pids[hung[0]]}) did not answer {command!r} within {self.timeout_s:g} s "
            f"(hung clips: {hung}); the worker was killed",
        )

    @staticmethod
    def _exit_reason(worker: _Worker) -> str:
        worker.process.join(1.0)
        return f"pid {worker.process.pid}, exit code {worker.process.exitcode}"
