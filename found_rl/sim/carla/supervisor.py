"""Supervised CARLA servers: start, wait until they answer, restart, and stop only our own.

Each server runs in its own session (process group), started from ``CarlaUE4.sh``. Stopping
signals that group (SIGTERM, then SIGKILL after a grace period), so the shell script and the
UE4 binary it starts go together, and nothing else on a shared machine is touched: servers are
found by the PID and start time recorded when they were started, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from found_rl.sim.carla.connection import CarlaEndpoint
from found_rl.sim.carla.errors import CarlaSetupError
from found_rl.sim.carla.server_process import (
    ServerPorts,
    answers,
    group_members,
    process_start_ticks,
    server_command,
)

READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0


@dataclass
class ServerRecord:
    """What identifies a started server (kept in the registry file between commands)."""

    pid: int
    start_ticks: int | None
    gpu: int
    rpc_port: int
    traffic_manager_port: int
    command: list[str]
    log: str
    started_at: float = field(default_factory=time.time)

    @property
    def ports(self) -> ServerPorts:
        return ServerPorts(self.rpc_port, self.traffic_manager_port)

    def is_alive(self) -> bool:
        """Some process of the server's group still runs, and the group is the one we started.

        The group outlives its leader when ``CarlaUE4.sh`` dies before the engine it started.
        A group is ours while its leader is our recorded process (same start time), or, the
        leader gone, while members started after it remain (Linux does not reuse a PID that
        still names a live group, so a foreign group with this id would have its own leader).
        """
        leader_ticks = process_start_ticks(self.pid)
        if leader_ticks is not None:
            return self.start_ticks is None or leader_ticks == self.start_ticks
        members = group_members(self.pid)
        return any(self.start_ticks is None or ticks >= self.start_ticks for _, ticks in members)

    def to_json(self) -> dict:
        return asdict(self)


def stop_record(record: ServerRecord, grace_s: float = STOP_GRACE_S) -> bool:
    """Stop a server's process group: SIGTERM, then SIGKILL after ``grace_s``.

    Returns:
        True if it was running (and is now gone).
    """
    if not record.is_alive():
        return False
    pgid = record.pid  # started with start_new_session: it leads its own group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.05)
    if _group_alive(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.05)
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg(0); reap our own children so they disappear.
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-pgid, os.WNOHANG)[0]:
            pass
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


class ManagedServer:
    """One CARLA server this process started and supervises.

    Args:
        script: ``CarlaUE4.sh`` (see :func:`~found_rl.sim.carla.server_process.find_carla_script`).
        ports: its ports (see :func:`~found_rl.sim.carla.server_process.allocate_ports`).
        gpu: graphics adapter index.
        log_dir: where its output goes (``carla-<rpc port>.log``).
        ready_timeout_s: longest wait for a start.
        timeout_s: the backend's per-call timeout (a tick longer than this is a hang).
        extra_args: more server flags (e.g. ``-quality-level=Low``).
        stop_grace_s: wait after SIGTERM before SIGKILL.
    """

    def __init__(
        self,
        script: Path,
        ports: ServerPorts,
        *,
        gpu: int = 0,
        log_dir: Path,
        ready_timeout_s: float = READY_TIMEOUT_S,
        timeout_s: float = 20.0,
        extra_args: tuple[str, ...] = (),
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.script, self.ports, self.gpu = script, ports, gpu
        self.stop_grace_s = stop_grace_s
        self.log_path = Path(log_dir) / f"carla-{ports.rpc}.log"
        self.ready_timeout_s, self.timeout_s = ready_timeout_s, timeout_s
        self.command = server_command(script, ports, gpu, extra_args)
        self.record: ServerRecord | None = None
        self._process: subprocess.Popen | None = None
        self.restarts = 0

    @property
    def endpoint(self) -> CarlaEndpoint:
        return CarlaEndpoint("127.0.0.1", self.ports.rpc, self.ports.traffic_manager, self.timeout_s)

    def start(self) -> ServerRecord:
        """Start the server and wait until its RPC port answers.

        Raises:
            CarlaSetupError: it exited or did not answer within ``ready_timeout_s`` (with the
                end of its log).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        pid = self._process.pid
        self.record = ServerRecord(
            pid, process_start_ticks(pid), self.gpu, self.ports.rpc, self.ports.traffic_manager,
            self.command, str(self.log_path),
        )  # fmt: skip
        self.wait_ready()
        return self.record

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise CarlaSetupError(
                    f"CARLA server on port {self.ports.rpc} exited with code {self._process.returncode} "
                    f"while starting; its log ({self.log_path}) ends with: {self.log_tail()}"
                )
            if answers(self.ports.rpc):
                return
            time.sleep(0.2)
        self.stop()
        raise CarlaSetupError(
            f"CARLA server on port {self.ports.rpc} did not answer within {self.ready_timeout_s:g} s (stopped it); "
            f"its log ({self.log_path}) ends with: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 3) -> str:
        """The log's last lines on one line (errors stay one line)."""
        with contextlib.suppress(OSError):
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
        return "(no log)"

    def is_alive(self) -> bool:
        return self.record is not None and self.record.is_alive()

    def stop(self) -> None:
        """Stop this server's process group (SIGTERM, then SIGKILL)."""
        if self.record is not None:
            stop_record(self.record, self.stop_grace_s)
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=1.0)
        self._process = None

    def restart(self) -> None:
        """Replace a dead or hung server by a fresh one on the same ports and GPU."""
        self.stop()
        self.restarts += 1
        self.start()

    def __enter__(self) -> ManagedServer:
        if self.record is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
