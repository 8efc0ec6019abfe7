"""Connecting to a CARLA server: endpoint, bounded retries, version check and loading the town."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import ModuleType
from typing import Any

from found_rl.scenario import MapConfig
from found_rl.sim.carla.errors import CarlaSetupError

SUPPORTED_SERVER_VERSIONS = ("0.9.15", "0.9.16")
ENDPOINT_ENV = "FOUND_RL_CARLA"
"""``host:rpc_port[:traffic_manager_port]`` of the server a backend connects to by default."""


@dataclass(frozen=True)
class CarlaEndpoint:
    """Where a server listens.

    Attributes:
        host: server host name or address.
        port: RPC port (``-carla-rpc-port``).
        traffic_manager_port: port of this client's Traffic Manager.
        timeout_s: longest wait for one answer (connect, tick).
        load_timeout_s: longest wait for the server to load a town or build a world from an
            OpenDRIVE file (minutes on a real town, on a busy GPU).
        retries: connection attempts before giving up.
        probe_tcp: try a plain TCP connection first, so a port nobody listens on fails in
            seconds (the client itself waits ``timeout_s`` per try even when refused).
    """

    host: str = "localhost"
    port: int = 2000
    traffic_manager_port: int = 8000
    timeout_s: float = 20.0
    load_timeout_s: float = 300.0
    retries: int = 3
    probe_tcp: bool = True

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def endpoint_from_env(environ: dict[str, str] | None = None) -> CarlaEndpoint:
    """The endpoint named by ``$FOUND_RL_CARLA`` (default ``localhost:2000``, TM on 8000)."""
    raw = (environ if environ is not None else os.environ).get(ENDPOINT_ENV, "")
    if not raw:
        return CarlaEndpoint()
    parts = raw.split(":")
    try:
        if len(parts) not in (2, 3) or not parts[0]:
            raise ValueError
        ports = [int(p) for p in parts[1:]]
        if not all(0 < p < 65536 for p in ports):
            raise ValueError
    except ValueError:
        raise CarlaSetupError(
            f"${ENDPOINT_ENV}: expected host:rpc_port[:traffic_manager_port], got {raw!r}"
        ) from None
    tm_port = ports[1] if len(ports) == 2 else ports[0] + 6000
    return CarlaEndpoint(host=parts[0], port=ports[0], traffic_manager_port=tm_port)


def import_carla() -> ModuleType:
    """The ``carla`` client module, or a clear error saying how to install it."""
    try:
        import carla
    except ModuleNotFoundError:
        raise CarlaSetupError(
            "backend: carla needs the CARLA Python client: pip install 'found-rl[carla]' "
            f"(carla=={SUPPORTED_SERVER_VERSIONS[-1]}, or the version of your server)"
        ) from None
    return carla


def start_command_hint(port: int) -> str:
    return (
        f"start one with `found-rl carla up --port {port}` (CARLA_ROOT set) or "
        f"`$CARLA_ROOT/CarlaUE4.sh -RenderOffScreen -carla-rpc-port={port}`"
    )


def connect(carla: ModuleType, endpoint: CarlaEndpoint, *, retry_wait_s: float = 1.0):
    """A client whose server answered and runs a supported, matching version.

    Raises:
        CarlaSetupError: no answer after ``endpoint.retries`` tries of ``endpoint.timeout_s``
            (naming the command that starts a server), an unsupported server version, or a
            client whose version differs from the server's (both named).
    """
    client = carla.Client(endpoint.host, endpoint.port)
    client.set_timeout(endpoint.timeout_s)
    server_version = None
    for attempt in range(max(1, endpoint.retries)):
        try:
            if endpoint.probe_tcp and not _accepts_tcp(endpoint):
                raise RuntimeError("connection refused")
            server_version = client.get_server_version()
            break
        except RuntimeError:
            if attempt + 1 < endpoint.retries:
                time.sleep(retry_wait_s)
    if server_version is None:
        raise CarlaSetupError(
            f"no CARLA server answered at {endpoint.address} ({endpoint.retries} tries of "
            f"{endpoint.timeout_s:g} s); {start_command_hint(endpoint.port)}"
        )
    check_versions(client.get_client_version(), server_version, endpoint)
    return client


def _accepts_tcp(endpoint: CarlaEndpoint) -> bool:
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=min(endpoint.timeout_s, 5.0)):
            return True
    except OSError:
        return False


def _release(version: str) -> str:
    """``0.9.15-dirty`` and ``0.9.15.2`` are 0.9.15 servers; compare releases."""
    return ".".join(version.split("-")[0].split(".")[:3])


def check_versions(client_version: str, server_version: str, endpoint: CarlaEndpoint) -> None:
    server, client = _release(server_version), _release(client_version)
    if server not in SUPPORTED_SERVER_VERSIONS:
        raise CarlaSetupError(
            f"CARLA server at {endpoint.address} runs {server_version}; found-rl supports servers "
            f"{', '.join(SUPPORTED_SERVER_VERSIONS)}"
        )
    if client != server:
        raise CarlaSetupError(
            f"CARLA client {client_version} does not match server {server_version} at {endpoint.address}: "
            f"pip install carla=={server}"
        )


def town_name(path: str) -> str:
    """``/Game/Carla/Maps/Town01`` → ``Town01``."""
    return PurePosixPath(path).name


def load_world(carla: ModuleType, client, map_config: MapConfig, endpoint: CarlaEndpoint):
    """Load the scenario's town (or build a world from its OpenDRIVE file); reuse it if loaded.

    Loading waits up to ``endpoint.load_timeout_s`` (then the client's timeout is ``timeout_s``
    again).

    Raises:
        CarlaSetupError: the town is not on the server (the available towns are listed), or the
            server did not finish loading within ``endpoint.load_timeout_s``.
    """
    if map_config.file is not None:
        if not str(map_config.file).endswith(".xodr"):
            raise CarlaSetupError(
                f"map.file: the carla backend loads OpenDRIVE (.xodr) maps or map.town, got {map_config.file}"
            )
        text = map_config.file.read_text(encoding="utf-8")
        world = client.get_world()
        if _opendrive_id(world.get_map().to_opendrive()) == _opendrive_id(text):
            return world
        parameters = carla.OpendriveGenerationParameters(
            vertex_distance=2.0, max_road_length=50.0, wall_height=0.0, additional_width=0.6,
            smooth_junctions=True, enable_mesh_visibility=True,
        )  # fmt: skip
        return _loading(client, endpoint, f"building a world from {map_config.file}",
                        lambda: client.generate_opendrive_world(text, parameters))  # fmt: skip
    wanted = map_config.town
    available = {town_name(path): path for path in client.get_available_maps()}
    if wanted not in available:
        listed = ", ".join(sorted(available)) or "none"
        raise CarlaSetupError(
            f"map.town: unknown town {wanted!r}; the server at {endpoint.address} has: {listed}"
        )
    world = client.get_world()
    if town_name(world.get_map().name) == wanted:
        return world
    return _loading(client, endpoint, f"loading {wanted}", lambda: client.load_world(wanted))


def _loading(client, endpoint: CarlaEndpoint, doing: str, load: Callable[[], Any]) -> Any:
    """``load()`` under the longer map-load timeout; a timeout becomes a :class:`CarlaSetupError`."""
    client.set_timeout(endpoint.load_timeout_s)
    try:
        return load()
    except RuntimeError as exc:
        raise CarlaSetupError(
            f"the CARLA server at {endpoint.address} did not finish {doing} within "
            f"{endpoint.load_timeout_s:g} s ({exc}); a slow machine needs a longer load_timeout_s"
        ) from None
    finally:
        client.set_timeout(endpoint.timeout_s)


def _opendrive_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
