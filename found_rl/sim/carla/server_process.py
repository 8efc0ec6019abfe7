"""One CARLA server process: where its script is, which ports it takes, how it is started.

Nothing here imports ``carla``: a server is a process found by PID and process group, and
readiness is a TCP connection to its RPC port (the backend's client then checks versions).
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from found_rl.sim.carla.errors import CarlaSetupError

SCRIPT_NAME = "CarlaUE4.sh"
PORTS_PER_SERVER = 3
"""RPC port P, streaming port P + 1 and the multi-GPU primary port P + 2."""


def find_carla_script(carla_root: str | Path | None) -> Path:
    """``CarlaUE4.sh`` of the CARLA release at ``carla_root`` (else ``$CARLA_ROOT``).

    Raises:
        CarlaSetupError: no root given or set, no such folder, or no ``CarlaUE4.sh`` in it.
    """
    source = "--carla-root"
    if carla_root is None:
        carla_root, source = os.environ.get("CARLA_ROOT"), "CARLA_ROOT"
    if not carla_root:
        raise CarlaSetupError(
            "CARLA_ROOT is not set: pass --carla-root or export CARLA_ROOT=/path/to/CARLA_0.9.16 "
            "(the unpacked CARLA release holding CarlaUE4.sh)"
        )
    root = Path(carla_root).expanduser()
    if not root.is_dir():
        raise CarlaSetupError(f"{source}={root}: no such folder")
    script = root / SCRIPT_NAME
    if not script.is_file():
        raise CarlaSetupError(f"{source}={root}: has no {SCRIPT_NAME} (is it an unpacked CARLA release?)")
    return script


@dataclass(frozen=True)
class ServerPorts:
    """The ports one server and its client's Traffic Manager take."""

    rpc: int
    traffic_manager: int

    @property
    def server_ports(self) -> tuple[int, ...]:
        return tuple(range(self.rpc, self.rpc + PORTS_PER_SERVER))

    @property
    def all(self) -> tuple[int, ...]:
        return (*self.server_ports, self.traffic_manager)


def port_is_free(port: int, host: str = "") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def check_ports_free(ports: ServerPorts) -> None:
    """Raises CarlaSetupError naming the taken port and its range."""
    for port in ports.all:
        if not port_is_free(port):
            first, last = ports.server_ports[0], ports.server_ports[-1]
            raise CarlaSetupError(
                f"port {port} is in use (a server takes RPC/streaming/primary ports {first}-{last} "
                f"and Traffic Manager port {ports.traffic_manager}); pick other ports with --port/--tm-port "
                "or stop whatever holds it"
            )


def allocate_ports(
    count: int, *, rpc_base: int, tm_base: int, stride: int = 10, exact: bool = False, taken: set[int] = frozenset()
) -> list[ServerPorts]:
    """Port sets for ``count`` servers, ``stride`` apart from the bases.

    With ``exact``, the first ``count`` sets must be free (a user-chosen port range); otherwise
    taken sets are skipped (up to 100 strides).

    Raises:
        CarlaSetupError: a port of an exact range is in use, or no free sets were found.
    """
    chosen: list[ServerPorts] = []
    for k in range(count if exact else 100 * count):
        if len(chosen) == count:
            break
        ports = ServerPorts(rpc_base + k * stride, tm_base + k * stride)
        if max(ports.all) > 65535:
            break
        if exact:
            check_ports_free(ports)
            chosen.append(ports)
        elif not set(ports.all) & taken and all(port_is_free(p) for p in ports.all):
            chosen.append(ports)
    if len(chosen) < count:
        raise CarlaSetupError(f"found only {len(chosen)} free port sets of {count} from port {rpc_base} upward")
    return chosen


def server_command(script: Path, ports: ServerPorts, gpu: int, extra_args: tuple[str, ...] = ()) -> list[str]:
    """The command line of one off-screen server on ``gpu`` (UE4's graphics adapter index)."""
    return [
        "bash", str(script), "-RenderOffScreen", "-nosound",
        f"-carla-rpc-port={ports.rpc}", f"-carla-streaming-port={ports.rpc + 1}",
        f"-carla-primary-port={ports.rpc + 2}",
        f"-ini:[/Script/Engine.RendererSettings]:r.GraphicsAdapter={gpu}",
        *extra_args,
    ]  # fmt: skip


def answers(port: int, host: str = "127.0.0.1", timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections on the server's RPC port."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout_s):
        return True
    return False


def _stat(pid: int | str) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat`` (state, ppid, pgrp, ...), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat.rsplit(")", 1)[1].split()


def process_start_ticks(pid: int) -> int | None:
    """Start time of a live process in clock ticks since boot, or None if it is gone (or a zombie).

    Recorded with each server so that a later ``down`` never signals a recycled PID.
    """
    fields = _stat(pid)
    return None if fields is None or fields[0] == "Z" else int(fields[19])


def group_members(pgid: int) -> list[tuple[int, int]]:
    """``(pid, start ticks)`` of the live processes in process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(entry.name)
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append((int(entry.name), int(fields[19])))
    return members
