"""``found-rl carla up|down|status``: CARLA servers on chosen GPUs and free ports, stopped by PID.

``up`` starts servers detached (each in its own process group), waits until each answers and
records them; ``down`` stops only the recorded ones (PID and start time must still match);
``status`` says which are alive and answering. Training and evaluation connect to a server
with ``FOUND_RL_CARLA=host:port[:tm_port]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from found_rl.argtypes import finite_float, int_at_least
from found_rl.errors import UserError


def _gpu_list(text: str) -> list[int]:
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated GPU indices like 0,1, got {text!r}") from None
    if not gpus or min(gpus) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated GPU indices >= 0 like 0,1, got {text!r}")
    return gpus


def _port(text: str) -> int:
    value = int_at_least(1024)(text)
    if value > 65000:
        raise argparse.ArgumentTypeError(f"expected a port in [1024, 65000], got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry", type=Path, default=None, help="server list file (default: $FOUND_RL_CACHE/carla/servers.json)"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start CARLA servers and wait until they answer")
    up.add_argument("--count", type=int_at_least(1), default=1, help="servers to start (default 1)")
    up.add_argument("--gpus", type=_gpu_list, default=[0], help="GPU indices, used round robin (default 0)")
    up.add_argument("--port", type=_port, default=None,
                    help="RPC port of the first server; each takes 3 ports, the next starts 10 higher "
                         "(default: the first free sets from 2000)")  # fmt: skip
    up.add_argument(
        "--tm-port", type=_port, default=None, help="Traffic Manager port of the first server (default 8000)"
    )
    up.add_argument("--carla-root", type=Path, default=None, help="unpacked CARLA release (default: $CARLA_ROOT)")
    up.add_argument("--timeout-s", type=finite_float(0, inclusive=False), default=120.0,
                    help="longest wait for each server to answer (default 120)")  # fmt: skip
    up.add_argument("--log-dir", type=Path, default=None, help="server logs (default: beside the registry)")
    up.add_argument(
        "--server-arg", action="append", default=[], help="extra CarlaUE4.sh flag, e.g. --server-arg=-quality-level=Low"
    )
    down = actions.add_parser("down", help="stop the servers found-rl started (never others)")
    down.add_argument("--port", type=_port, default=None, help="stop only the server on this RPC port")
    actions.add_parser("status", help="list the started servers: alive, answering, ports, GPU")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from found_rl.sim.carla.registry import default_registry

    registry = args.registry or default_registry()
    if registry.is_dir():
        raise UserError(f"--registry {registry}: is a folder; pass a file path")
    return {"up": _up, "down": _down, "status": _status}[args.action](args, registry)


def _up(args: argparse.Namespace, registry: Path) -> int:
    from found_rl.sim.carla.registry import read_registry, write_registry
    from found_rl.sim.carla.server_process import allocate_ports, find_carla_script
    from found_rl.sim.carla.supervisor import ManagedServer

    script = find_carla_script(args.carla_root)
    records = [r for r in read_registry(registry) if r.is_alive()]
    taken = {p for r in records for p in r.ports.all}
    exact = args.port is not None
    ports = allocate_ports(
        args.count, rpc_base=args.port or 2000, tm_base=args.tm_port or 8000, exact=exact, taken=taken
    )
    log_dir = args.log_dir or registry.parent / "logs"
    started = []
    try:
        for index, server_ports in enumerate(ports):
            server = ManagedServer(
                script, server_ports, gpu=args.gpus[index % len(args.gpus)], log_dir=log_dir,
                ready_timeout_s=args.timeout_s, extra_args=tuple(args.server_arg),
            )  # fmt: skip
            started.append(server)
            server.start()
            records.append(server.record)
            write_registry(registry, records)
    except BaseException:
        for server in started:  # all or nothing: never leave half a fleet running unrecorded
            server.stop()
        write_registry(registry, [r for r in records if r.is_alive()])
        raise
    _print_servers([s.record for s in started], "started")
    for server in started:
        print(f"FOUND_RL_CARLA=127.0.0.1:{server.ports.rpc}:{server.ports.traffic_manager}")
    return 0


def _down(args: argparse.Namespace, registry: Path) -> int:
    from found_rl.sim.carla.registry import read_registry, write_registry
    from found_rl.sim.carla.supervisor import stop_record

    records = read_registry(registry)
    chosen = [r for r in records if args.port is None or r.rpc_port == args.port]
    if args.port is not None and not chosen:
        raise UserError(f"--port {args.port}: no server found-rl started listens there (see `found-rl carla status`)")
    for record in chosen:
        was_running = stop_record(record)
        print(f"{'stopped' if was_running else 'already gone'}: pid {record.pid} (RPC port {record.rpc_port})")
    write_registry(registry, [r for r in records if r not in chosen])
    if not chosen:
        print("no servers recorded")
    return 0


def _status(args: argparse.Namespace, registry: Path) -> int:
    from found_rl.sim.carla.registry import read_registry

    records = read_registry(registry)
    if not records:
        print(f"no servers recorded in {registry}")
        return 0
    _print_servers(records, "recorded")
    return 0


def _print_servers(records: list, title: str) -> None:
    from rich.table import Table

    from found_rl.sim.carla.server_process import answers
    from found_rl.tables import print_table

    table = Table(title=f"CARLA servers ({title})")
    for column in ("pid", "gpu", "rpc port", "tm port", "alive", "answering", "log"):
        table.add_column(column)
    for r in records:
        alive = r.is_alive()
        table.add_row(
            str(r.pid), str(r.gpu), str(r.rpc_port), str(r.traffic_manager_port),
            "yes" if alive else "no", "yes" if alive and answers(r.rpc_port) else "no", r.log,
        )  # fmt: skip
    print_table(table)
