"""Env factories that start their own supervised server (as each Ray actor does on its node)."""

from __future__ import annotations

import pickle
import signal

import numpy as np
import pytest
from conftest import DATA
from test_supervisor import alive, free_ports, make_carla_root

from fast_sampler import InProcessExecutor
from found_rl.sim.carla.supervised_backend import visible_gpu
from found_rl.train.envs import SupervisedCarlaEnv, carla_env_factories


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
    logs = {port: tmp_path / "logs" / f"carla-{port}.log" for port in (base.rpc, base.rpc + 10)}
    for log in logs.values():  # each server's first line echoes its command line
        assert "-ini:[/Script/Engine.RendererSettings]:r.GraphicsAdapter=3" in log.read_text().splitlines()[0]
    executor.reset({0: 0, 1: 1})
    results = executor.step({0: np.zeros(2, np.float32), 1: np.zeros(2, np.float32)})
    assert not any(r.worker_died for r in results.values())
    engines = [int(line.split()[-1]) for log in logs.values() for line in log.read_text().splitlines()
               if line.startswith("engine pid ")]  # fmt: skip
    assert len(engines) == 2 and all(alive(pid) for pid in engines)
    executor.close()
    assert not any(alive(pid) for pid in engines)


def test_visible_gpu():
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": "2,5"}) == 2
    assert visible_gpu({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert visible_gpu({}) == 0
    assert SupervisedCarlaEnv("s.yaml").gpu is None


@pytest.mark.slow
def test_one_server_per_ray_actor(tmp_path):
    """RayExecutor over carla_env_factories: each actor starts, uses and stops its own server."""
    import os
    from pathlib import Path

    ray = pytest.importorskip("ray")
    from fast_sampler import PerClipResetSampler
    from fast_sampler.executors.ray_actors import RayExecutor

    tests_dir = Path(__file__).parent
    stub = tmp_path / "stub" / "carla"  # the carla stand-in, importable as `carla` in every actor
    stub.mkdir(parents=True)
    stub.joinpath("__init__.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tests_dir)!r})\nimport fake_carla as _fake\n"
        "_module = _fake.load_fake_carla()\n"
        "_module.SERVERS[0] = _fake.FakeServer({'GridTown': _fake.load_town()}, town='GridTown')\n"
        "globals().update({k: v for k, v in vars(_module).items() if not k.startswith('__')})\n"
    )
    root = Path(__file__).parents[4]
    python_path = os.pathsep.join(filter(None, [str(stub.parent), str(root), os.environ.get("PYTHONPATH")]))
    cache = tmp_path / "cache"
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init installs its own and shutdown leaves it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": python_path, "FOUND_RL_CACHE": str(cache)}})  # fmt: skip
    try:
        base = free_ports(1)[0]
        factories = carla_env_factories(
            DATA / "grid_town.yaml", 2, carla_root=str(make_carla_root(tmp_path / "carla")), rpc_base=base.rpc,
            tm_base=base.traffic_manager, observation="state",
        )  # fmt: skip
        executor = RayExecutor(factories, num_cpus_per_clip=0.5, timeout_s=120)
        with PerClipResetSampler(executor, lambda obs: np.tile([0.5, 0.0], (2, 1)).astype(np.float32), seed=0) as s:
            rollout = s.collect(10)
        assert rollout.valid.all() and not rollout.worker_died.any()
        logs = sorted((cache / "carla" / "logs").glob("carla-*.log"))
        assert [p.name for p in logs] == [f"carla-{base.rpc}.log", f"carla-{base.rpc + 10}.log"]
        engines = [int(line.split()[-1]) for p in logs for line in p.read_text().splitlines()
                   if line.startswith("engine pid ")]  # fmt: skip
        assert len(engines) == 2 and not any(alive(pid) for pid in engines)  # stopped on close
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, sigterm)
