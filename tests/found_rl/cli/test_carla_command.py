"""``found-rl carla up|down|status`` with a fake CARLA release (a script that listens on its port)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from found_rl.cli import main

sys.path.insert(0, str(Path(__file__).parents[1] / "sim" / "carla"))

from test_supervisor import alive, free_ports, make_carla_root


@pytest.fixture
def carla_root(tmp_path, monkeypatch):
    monkeypatch.setenv("CARLA_ROOT", str(make_carla_root(tmp_path / "CARLA_0.9.16")))
    return tmp_path


def test_up_status_down_manage_only_the_servers_found_rl_started(carla_root, capsys):
    registry = carla_root / "servers.json"
    ports = free_ports(1)[0]
    # A bystander started the same way, by someone else: `down` must leave it running. Its port
    # is one the kernel handed out (a fixed offset from ours could be taken: the bystander then
    # exited and the test flaked), away from the ports `up` will take.
    bystander_port = ports.rpc
    while ports.rpc - 20 <= bystander_port <= ports.rpc + 40:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            bystander_port = probe.getsockname()[1]
    bystander = subprocess.Popen(
        ["bash", str(carla_root / "CARLA_0.9.16" / "CarlaUE4.sh"), f"-carla-rpc-port={bystander_port}"],
        stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        up = ["up", "--count", "2", "--gpus", "0,1", "--port", str(ports.rpc), "--tm-port", str(ports.traffic_manager)]
        assert main(["carla", "--registry", str(registry), *up, "--timeout-s", "10"]) == 0
        out = capsys.readouterr().out
        assert f"FOUND_RL_CARLA=127.0.0.1:{ports.rpc}:{ports.traffic_manager}" in out
        assert f"FOUND_RL_CARLA=127.0.0.1:{ports.rpc + 10}:{ports.traffic_manager + 10}" in out
        records = json.loads(registry.read_text())
        assert [r["gpu"] for r in records] == [0, 1] and all(alive(r["pid"]) for r in records)

        assert main(["carla", "--registry", str(registry), "status"]) == 0
        status = capsys.readouterr().out
        assert status.count("yes") == 4  # two servers, each alive and answering

        assert main(["carla", "--registry", str(registry), "down", "--port", str(ports.rpc + 10)]) == 0
        assert not alive(records[1]["pid"]) and alive(records[0]["pid"])
        assert main(["carla", "--registry", str(registry), "down"]) == 0
        assert not alive(records[0]["pid"]) and json.loads(registry.read_text()) == []
        assert bystander.poll() is None
    finally:
        main(["carla", "--registry", str(registry), "down"])
        os.killpg(bystander.pid, signal.SIGKILL)  # the bystander's script, server and engine: we started them
        bystander.wait()


def run_cli(args, capsys) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def test_port_in_use_exits_2_naming_it(carla_root, capsys):
    ports = free_ports(1)[0]
    with socket.socket() as holder:
        holder.bind(("", ports.rpc))
        holder.listen()
        code, err = run_cli(["carla", "--registry", str(carla_root / "r.json"), "up", "--port", str(ports.rpc),
                             "--tm-port", str(ports.traffic_manager)], capsys)  # fmt: skip
    assert code == 2 and f"port {ports.rpc} is in use" in err and err.count("\n") == 1


def test_missing_carla_root_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CARLA_ROOT", raising=False)
    code, err = run_cli(["carla", "--registry", str(tmp_path / "r.json"), "up"], capsys)
    assert code == 2 and "CARLA_ROOT is not set" in err
    code, err = run_cli(["carla", "--registry", str(tmp_path / "r.json"), "up", "--carla-root", str(tmp_path)], capsys)
    assert code == 2 and "has no CarlaUE4.sh" in err


def test_a_server_that_dies_while_starting_leaves_nothing_running(carla_root, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_CARLA_FAIL_START", "1")
    registry = carla_root / "r.json"
    code, err = run_cli(["carla", "--registry", str(registry), "up", "--timeout-s", "10"], capsys)
    assert code == 2 and "exited with code 1 while starting" in err and "Vulkan device lost" in err
    assert json.loads(registry.read_text()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "--gpus", "a,b"], "expected comma-separated GPU indices"),
        (["up", "--port", "80"], "expected an int >= 1024"),
        (["down", "--port", "2345"], "--port 2345: no server found-rl started listens there"),
    ],
)
def test_bad_flags_exit_2(tmp_path, capsys, args, message):
    try:
        code, err = run_cli(["carla", "--registry", str(tmp_path / "r.json"), *args], capsys)
    except SystemExit as exit_:
        code, err = exit_.code, capsys.readouterr().err
    assert code == 2 and message in err


def test_a_corrupt_registry_is_named(tmp_path, capsys):
    registry = tmp_path / "r.json"
    registry.write_text("{not json")
    code, err = run_cli(["carla", "--registry", str(registry), "status"], capsys)
    assert code == 2 and f"{registry}: not a found-rl CARLA server registry" in err


def test_eval_starts_a_supervised_server_and_drives_the_expert(tmp_path, monkeypatch, capsys):
    """``found-rl eval --carla-root``: a server per evaluation, the expert on the carla stand-in."""
    import fake_carla

    monkeypatch.setenv("FOUND_RL_CACHE", str(tmp_path / "cache"))  # this test's server logs only
    module = fake_carla.load_fake_carla()
    module.SERVERS[0] = fake_carla.FakeServer({"GridTown": fake_carla.load_town()}, town="GridTown")
    monkeypatch.setitem(sys.modules, "carla", module)
    root = make_carla_root(tmp_path / "CARLA_0.9.16")
    scenario = Path(fake_carla.DATA) / "grid_town.yaml"
    out = tmp_path / "results.json"
    code = main(["eval", "--scenario", str(scenario), "--agent", "expert", "--out", str(out),
                 "--carla-root", str(root), "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    records = results["_checkpoint"]["records"]
    assert [r["route_id"] for r in records] == ["RouteScenario_straight_rep0", "RouteScenario_turn_rep0"]
    assert all(r["status"] == "Completed" for r in records), records
    pids = [int(line.split()[-1]) for line in _server_logs(tmp_path) if line.startswith("engine pid ")]
    assert pids and not any(alive(pid) for pid in pids)  # stopped with the env


def _server_logs(tmp_path: Path) -> list[str]:
    logs = Path(os.environ["FOUND_RL_CACHE"]) / "carla" / "logs"
    return [line for path in logs.glob("carla-*.log") for line in path.read_text().splitlines()]


def test_eval_carla_root_on_a_sumo_scenario_exits_2(tmp_path, capsys):
    scenario = Path(__file__).parents[3] / "scenarios" / "town_grid.yaml"
    code, err = run_cli(["eval", "--scenario", str(scenario), "--agent", "expert", "--out", str(tmp_path / "r.json"),
                         "--carla-root", str(tmp_path)], capsys)  # fmt: skip
    assert code == 2 and "--carla-root" in err and "backend: sumo, not carla" in err
