"""CARLA server supervision against a fake server script that listens, crashes and hangs on cue."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from found_rl.sim.carla.errors import CarlaSetupError
from found_rl.sim.carla.server_process import (
    ServerPorts,
    allocate_ports,
    answers,
    find_carla_script,
    process_start_ticks,
    server_command,
)
from found_rl.sim.carla.supervisor import ManagedServer, ServerRecord, stop_record

FAKE_SERVER = Path(__file__).parent / "fake_carla_server.py"


def make_carla_root(folder: Path) -> Path:
    """A folder that looks like a CARLA release: its CarlaUE4.sh runs the fake server."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CarlaUE4.sh").write_text(f'#!/bin/bash\n"{sys.executable}" "{FAKE_SERVER}" "$@"\n')
    return folder


def free_ports(count: int = 1) -> list[ServerPorts]:
    with socket.socket() as probe:  # a varying base, so parallel test workers rarely meet
        probe.bind(("", 0))
        base = probe.getsockname()[1]
    # below Linux's ephemeral range (32768 up): a port checked free there cannot be handed to some
    # other process's outgoing connection before the server binds it
    base = 20000 + base % 12000
    return allocate_ports(count, rpc_base=base, tm_base=base + 5)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}").exists() else "Z"
    return state != "Z"


def engine_pid(server: ManagedServer) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in server.log_path.read_text().splitlines():
            if line.startswith("engine pid "):
                return int(line.split()[-1])
        time.sleep(0.05)
    raise AssertionError("the fake server never started its engine")


@pytest.fixture
def managed(tmp_path):
    servers = []

    def make(**kwargs) -> ManagedServer:
        script = find_carla_script(make_carla_root(tmp_path / "carla"))
        server = ManagedServer(script, free_ports()[0], log_dir=tmp_path / "logs", ready_timeout_s=10, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def test_start_waits_until_the_server_answers_and_stop_ends_its_whole_group(managed):
    server = managed()
    record = server.start()
    assert server.is_alive() and answers(server.ports.rpc)
    assert f"-carla-rpc-port={server.ports.rpc}" in record.command and "-RenderOffScreen" in record.command
    engine = engine_pid(server)
    assert alive(engine)
    server.stop()
    assert not server.is_alive() and not alive(record.pid) and not alive(engine)
    assert not answers(server.ports.rpc)


def test_a_server_whose_script_died_is_still_found_and_stopped(managed):
    """CarlaUE4.sh can die before the engine it started: the group, not the script, is the server."""
    import signal

    server = managed()
    record = server.start()
    engine = engine_pid(server)
    os.kill(record.pid, signal.SIGKILL)  # only the script (the group leader)
    server._process.wait()
    assert alive(engine) and server.is_alive()
    server.stop()
    assert not alive(engine) and not server.is_alive()


def test_a_crashed_server_is_detected_and_restarted_on_the_same_ports(managed, monkeypatch):
    monkeypatch.setenv("FAKE_CARLA_CRASH_AFTER_S", "0.5")
    server = managed()
    first = server.start().pid
    deadline = time.monotonic() + 5
    while server.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.is_alive()
    monkeypatch.delenv("FAKE_CARLA_CRASH_AFTER_S")
    server.restart()
    assert server.is_alive() and server.record.pid != first and server.restarts == 1
    assert answers(server.ports.rpc) and server.endpoint.port == server.ports.rpc


def test_a_hung_server_ignoring_sigterm_is_killed_with_its_engine(managed, monkeypatch):
    monkeypatch.setenv("FAKE_CARLA_IGNORE_TERM", "1")
    server = managed(stop_grace_s=0.3)
    record = server.start()
    engine = engine_pid(server)
    started = time.monotonic()
    server.stop()
    assert not alive(record.pid) and not alive(engine)
    assert time.monotonic() - started < 5.0


def test_a_server_failing_to_start_shows_its_log(managed, monkeypatch):
    monkeypatch.setenv("FAKE_CARLA_FAIL_START", "1")
    expected = r"exited with code 1 while starting; its log .* ends with: .* \| LowLevelFatalError: Vulkan"
    with pytest.raises(CarlaSetupError, match=expected):
        managed().start()


def test_stop_never_signals_a_process_it_did_not_start():
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        # Same PID, other start time: a recycled PID must not be mistaken for our server.
        impostor = ServerRecord(bystander.pid, (process_start_ticks(bystander.pid) or 0) + 1, 0, 2000, 8000, [], "")
        assert not impostor.is_alive()
        assert stop_record(impostor, grace_s=0.1) is False
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_server_command_selects_gpu_and_ports(tmp_path):
    script = find_carla_script(make_carla_root(tmp_path))
    command = server_command(script, ServerPorts(3000, 9000), gpu=2, extra_args=("-quality-level=Low",))
    assert command[:2] == ["bash", str(script)]
    for flag in ("-carla-rpc-port=3000", "-carla-streaming-port=3001", "-carla-primary-port=3002",
                 "-ini:[/Script/Engine.RendererSettings]:r.GraphicsAdapter=2", "-quality-level=Low"):  # fmt: skip
        assert flag in command


def test_port_range_in_use_is_named():
    ports = free_ports()[0]
    with socket.socket() as holder:
        holder.bind(("", ports.rpc + 1))
        holder.listen()
        with pytest.raises(CarlaSetupError, match=rf"port {ports.rpc + 1} is in use .*{ports.rpc}-{ports.rpc + 2}"):
            allocate_ports(1, rpc_base=ports.rpc, tm_base=ports.traffic_manager, exact=True)
        skipped = allocate_ports(2, rpc_base=ports.rpc, tm_base=ports.traffic_manager)
        assert ports.rpc not in [p.rpc for p in skipped]  # automatic choice skips the taken set


def test_carla_root_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("CARLA_ROOT", raising=False)
    with pytest.raises(CarlaSetupError, match="CARLA_ROOT is not set: pass --carla-root"):
        find_carla_script(None)
    monkeypatch.setenv("CARLA_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(CarlaSetupError, match=r"CARLA_ROOT=.*nowhere: no such folder"):
        find_carla_script(None)
    with pytest.raises(CarlaSetupError, match=r"--carla-root=.*: has no CarlaUE4\.sh"):
        find_carla_script(tmp_path)
