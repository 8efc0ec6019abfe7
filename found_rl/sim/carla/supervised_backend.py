"""A CARLA backend that brings its own supervised server, started on this machine for it.

The server runs on the GPU this process was given (the first of ``CUDA_VISIBLE_DEVICES``,
which Ray sets for an actor with ``num_gpus``), on the first free ports from a base; the
backend restarts it when it dies or hangs and stops it when the backend closes. The env
factories built on it (one server per env, per node) are
``found_rl.train.envs.carla_env_factories``: a backend never builds the env.
"""

from __future__ import annotations

import os
from pathlib import Path

from found_rl.sim.carla.server_process import allocate_ports, find_carla_script
from found_rl.sim.carla.supervisor import ManagedServer

PORT_STRIDE = 10
"""Port bases of the envs on one node lie this far apart, so their servers never race for ports."""


def visible_gpu(environ: dict[str, str] | None = None) -> int:
    """The first GPU of ``CUDA_VISIBLE_DEVICES`` (Ray's assignment), else 0."""
    first = (environ if environ is not None else os.environ).get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


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
