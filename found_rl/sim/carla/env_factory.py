"""Env factories that bring their own supervised CARLA server: one server per env, per node.

A factory is a small picklable value; calling it (in a worker process or a Ray actor) starts a
CARLA server on that machine, on the GPU that process was given (the first of
``CUDA_VISIBLE_DEVICES``, which Ray sets for an actor with ``num_gpus``), on free ports, and
returns a :class:`~found_rl.env.DrivingEnv` whose backend restarts the server when it dies or
hangs and stops it when the env closes. So ``RayExecutor(carla_env_factories(...),
num_gpus_per_clip=1)`` spreads a run over every GPU node of a Ray cluster with no other change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from found_rl.sim.carla.server_process import allocate_ports, find_carla_script
from found_rl.sim.carla.supervisor import ManagedServer

PORT_STRIDE = 10


def visible_gpu(environ: dict[str, str] | None = None) -> int:
    """The first GPU of ``CUDA_VISIBLE_DEVICES`` (Ray's assignment), else 0."""
    first = (environ if environ is not None else os.environ).get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


@dataclass(frozen=True)
class SupervisedCarlaEnv:
    """Build a ``DrivingEnv`` on a CARLA server started for it on this machine.

    Attributes:
        scenario: scenario YAML path (``backend: carla``), readable on every node.
        carla_root: CARLA release folder on the nodes (default ``$CARLA_ROOT`` there).
        rpc_base / tm_base: first RPC and Traffic Manager ports tried; taken sets are skipped.
        gpu: graphics adapter; ``None`` picks the process's first visible GPU.
        observation: ``"bev"`` or ``"state"``.
        log_dir: server logs (default ``$FOUND_RL_CACHE/carla/logs``).
        timeout_s: per-call timeout; a tick longer than this is a hung server.
        ready_timeout_s: longest wait for the server to start.
    """

    scenario: str
    carla_root: str | None = None
    rpc_base: int = 2000
    tm_base: int = 8000
    gpu: int | None = None
    observation: str = "bev"
    log_dir: str | None = None
    timeout_s: float = 20.0
    ready_timeout_s: float = 120.0

    def __call__(self):
        from found_rl.env import DrivingEnv
        from found_rl.maps.build import cache_root
        from found_rl.scenario import load_scenario
        from found_rl.sim.carla.backend import CarlaBackend

        scenario = load_scenario(self.scenario)
        script = find_carla_script(self.carla_root)
        ports = allocate_ports(1, rpc_base=self.rpc_base, tm_base=self.tm_base, stride=PORT_STRIDE)[0]
        server = ManagedServer(
            script, ports, gpu=visible_gpu() if self.gpu is None else self.gpu,
            log_dir=Path(self.log_dir) if self.log_dir else cache_root() / "carla" / "logs",
            ready_timeout_s=self.ready_timeout_s, timeout_s=self.timeout_s,
        )  # fmt: skip
        server.start()
        try:
            backend = CarlaBackend(scenario, server=server, stop_server_on_close=True)
            return DrivingEnv(scenario, observation=self.observation, backend=backend)
        except BaseException:
            server.stop()
            raise


def carla_env_factories(scenario: str | Path, num_envs: int, **options) -> list[SupervisedCarlaEnv]:
    """One factory per env, with port bases ``PORT_STRIDE`` apart so envs on a node never race."""
    rpc_base, tm_base = options.pop("rpc_base", 2000), options.pop("tm_base", 8000)
    offsets = [k * PORT_STRIDE for k in range(num_envs)]
    return [SupervisedCarlaEnv(str(scenario), rpc_base=rpc_base + o, tm_base=tm_base + o, **options) for o in offsets]
