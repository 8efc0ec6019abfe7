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
        from found_rl.scenario import load_scenario

        scenario = load_scenario(self.scenario)
        backend = start_supervised_backend(
            scenario, carla_root=self.carla_root, gpu=visible_gpu() if self.gpu is None else self.gpu,
            rpc_base=self.rpc_base, tm_base=self.tm_base, log_dir=self.log_dir, timeout_s=self.timeout_s,
            ready_timeout_s=self.ready_timeout_s,
        )  # fmt: skip
        try:
            return DrivingEnv(scenario, observation=self.observation, backend=backend)
        except BaseException:
            backend.close()
            raise


def start_supervised_backend(
    scenario,
    *,
    carla_root: str | Path | None = None,
    gpu: int = 0,
    rpc_base: int = 2000,
    tm_base: int = 8000,
    log_dir: str | Path | None = None,
    timeout_s: float = 20.0,
    ready_timeout_s: float = 120.0,
):
    """A :class:`~found_rl.sim.carla.backend.CarlaBackend` on a server started for it here.

    The server takes the first free port set from ``rpc_base``/``tm_base``, runs on ``gpu``, is
    restarted when it dies or hangs, and is stopped when the backend closes.

    Raises:
        CarlaSetupError: no CARLA release at ``carla_root``/``$CARLA_ROOT``, no free ports, or
            the server did not start.
    """
    from found_rl.maps.build import cache_root
    from found_rl.sim.carla.backend import CarlaBackend

    script = find_carla_script(carla_root)
    ports = allocate_ports(1, rpc_base=rpc_base, tm_base=tm_base, stride=PORT_STRIDE)[0]
    server = ManagedServer(
        script, ports, gpu=gpu, log_dir=Path(log_dir) if log_dir else cache_root() / "carla" / "logs",
        ready_timeout_s=ready_timeout_s, timeout_s=timeout_s,
    )  # fmt: skip
    server.start()
    try:
        return CarlaBackend(scenario, server=server, stop_server_on_close=True)
    except BaseException:
        server.stop()
        raise


def carla_env_factories(scenario: str | Path, num_envs: int, **options) -> list[SupervisedCarlaEnv]:
    """One factory per env, with port bases ``PORT_STRIDE`` apart so envs on a node never race."""
    rpc_base, tm_base = options.pop("rpc_base", 2000), options.pop("tm_base", 8000)
    offsets = [k * PORT_STRIDE for k in range(num_envs)]
    return [SupervisedCarlaEnv(str(scenario), rpc_base=rpc_base + o, tm_base=tm_base + o, **options) for o in offsets]
