"""An advisor server that a training run starts for itself (``advisor: {spawn: BACKEND}``).

The child is ``python -m found_rl serve`` on a free loopback port. It is stopped by its PID on
every exit path of the run; on Linux it also receives SIGTERM if the run itself dies (parent
death signal), so even a SIGKILLed trainer leaves no server behind.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from found_rl.train.resources import Placement, process_cpu_seconds

_STOP_GRACE_S = 10.0


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover (runs in the child before exec)
    """Ask Linux to send SIGTERM to this child when its parent dies."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass


def _prepare_child(placement: Placement | None) -> None:  # pragma: no cover (runs in the child before exec)
    """Before exec: die with the trainer (Linux), and yield the CPU to it (its session's group too)."""
    if sys.platform.startswith("linux"):
        _die_with_parent()
    if placement is not None:
        placement.apply(own_session=True)


def thread_environment(threads: int | None) -> dict[str, str]:
    """The environment of a child that should use ``threads`` threads (torch, OpenMP, BLAS)."""
    env = dict(os.environ)
    if threads is not None:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[name] = str(threads)
    return env


def serve_command(port: int, advisor: str | None, advisor_options: dict[str, Any],
                  clip: str | None, clip_options: dict[str, Any]) -> list[str]:
    command = [sys.executable, "-m", "found_rl", "serve", "--host", "127.0.0.1", "--port", str(port)]
    if advisor:
        command += ["--advisor", advisor]
    for key, value in advisor_options.items():
        command += ["--advisor-option", f"{key}={json.dumps(value)}"]
    if clip:
        command += ["--clip", clip]
    for key, value in clip_options.items():
        command += ["--clip-option", f"{key}={json.dumps(value)}"]
    return command


class SpawnedServer:
    """``found-rl serve`` as a child process; use as a context manager.

    Args:
        advisor: ``--advisor`` backend spec (e.g. ``expert``).
        advisor_options: ``--advisor-option`` pairs.
        clip: ``--clip`` backend spec, if any.
        clip_options: ``--clip-option`` pairs.
        log_path: the server's stdout and stderr go here (the run folder's ``advisor_server.log``).
        ready_timeout_s: how long loading may take before the run gives up.
        port: loopback port (default: a free one).
        threads: torch/OpenMP threads of the server (``None``: the library defaults).
        placement: its priority and CPUs beside the trainer (``None``: the trainer's).
    """

    def __init__(
        self,
        advisor: str | None,
        advisor_options: dict[str, Any] | None = None,
        clip: str | None = None,
        clip_options: dict[str, Any] | None = None,
        *,
        log_path: Path,
        ready_timeout_s: float = 120.0,
        port: int | None = None,
        threads: int | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.port = port or free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.command = serve_command(self.port, advisor, advisor_options or {}, clip, clip_options or {})
        self.threads, self.placement = threads, placement
        self.process: subprocess.Popen[bytes] | None = None
        self._deadline = 0.0

    def start(self) -> SpawnedServer:
        """Start the child and wait until ``/readyz`` answers 200.

        Raises:
            RuntimeError: the server exited or did not get ready in time (its log's tail shown).
        """
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the child without waiting for it: the trainer starts its other processes while
        the server loads (:meth:`wait_ready` then waits)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the trainer, which stops the server itself
                preexec_fn=functools.partial(_prepare_child, self.placement),
                env=thread_environment(self.threads),
            )
        self._deadline = time.monotonic() + self.ready_timeout_s

    def wait_ready(self) -> SpawnedServer:
        """Wait until the launched child's ``/readyz`` answers 200 (within ``ready_timeout_s`` of
        :meth:`launch`).

        Raises:
            RuntimeError: the server exited or did not get ready in time (its log's tail shown).
        """
        if self.process is None:
            raise RuntimeError("SpawnedServer.wait_ready: launch() first")
        deadline = self._deadline
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the advisor server exited with code {self.process.returncode} while starting "
                    f"({' '.join(self.command[2:])}); its log {self.log_path} ends:\n{self._log_tail()}"
                )
            if self._ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"the advisor server was not ready after {self.ready_timeout_s:.0f} s "
            f"(advisor.ready_timeout_s); its log {self.log_path} ends:\n{self._log_tail()}"
        )

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1.0) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def cpu_seconds(self) -> float:
        """CPU time (user and system, all threads) the server process has used so far."""
        seconds = process_cpu_seconds(self.process.pid) if self.process is not None else None
        if seconds is None:
            raise RuntimeError("SpawnedServer.cpu_seconds: the server is not running")
        return seconds

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL after a grace period; only this child is touched."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=_STOP_GRACE_S)

    def __enter__(self) -> SpawnedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
