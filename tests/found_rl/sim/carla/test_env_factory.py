"""Env factories that start their own supervised server (as each Ray actor does on its node)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import DATA
from test_supervisor import alive, free_ports, make_carla_root

from fast_sampler import InProcessExecutor
from found_rl.sim.carla.env_factory import SupervisedCarlaEnv, carla_env_factories, visible_gpu


@pytest.fixture
def fake_client(carla, server, monkeypatch):
    """The ``carla`` stand-in answers on every port (the real server process is the fake script)."""
    carla.SERVERS[0] = carla.SERVERS.pop(2000)
    monkeypatch.setitem(__import__("sys").modules, "carla", carla)
    return carla


def test_each_env_gets_its_own_server_on_its_gpu_and_stops_it_on_close(fake_client, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")  # what Ray sets for an actor given GPU 3
    base = free_ports(1)[0]
    factories = carla_env_factories(
        DATA / "grid_town.yaml", 2, carla_root=str(make_carla_root(tmp_path / "carla")),
        rpc_base=base.rpc, tm_base=base.traffic_manager, log_dir=str(tmp_path / "logs"), observation="state",
    )  # fmt: skip
    assert [f.rpc_base for f in factories] == [base.rpc, base.rpc + 10]
    assert pickle.loads(pickle.dumps(factories[1])) == factories[1]  # travels to Ray actors
    executor = InProcessExecutor(factories)
    servers = [env.backend._server for env in executor._envs]
    assert [s.ports.rpc for s in servers] == [base.rpc, base.rpc + 10]
    assert all("-ini:[/Script/Engine.RendererSettings]:r.GraphicsAdapter=3" in s.command for s in servers)
    executor.reset({0: 0, 1: 1})
    results = executor.step({0: np.zeros(2, np.float32), 1: np.zeros(2, np.float32)})
    assert not any(r.worker_died for r in results.values())
    pids = [s.record.pid for s in servers]
    assert all(alive(pid) for pid in pids)
    executor.close()
    assert not any(alive(pid) for pid in pids)


def test_visible_gpu():
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": "2,5"}) == 2
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert visible_gpu({}) == 0
    assert SupervisedCarlaEnv("s.yaml").gpu is None
