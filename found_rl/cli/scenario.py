"""``found-rl scenario``: check and inspect scenario files, and generate route files."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from found_rl.argtypes import SEED, int_at_least
from found_rl.atomic import replaced_atomically
from found_rl.cli.paths import check_output_file
from found_rl.errors import UserError

if TYPE_CHECKING:
    from found_rl.scenario import Scenario


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    check = actions.add_parser(
        "check", help="validate scenario files (exit 2 naming the file and field)"
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    check.add_argument(
        "--schema-only",
        action="store_true",
        help="skip building the network and planning routes",
    )
    check.set_defaults(run=run_check)

    show = actions.add_parser(
        "show", help="summarise a scenario: map size, lanes, lights, routes"
    )
    show.add_argument("file", type=Path, metavar="FILE")
    show.set_defaults(run=run_show)

    routes = actions.add_parser(
        "routes",
        help="write a leaderboard routes.xml of random drives that turn at lights (where the map has them)",
    )
    routes.add_argument(
        "--scenario",
        type=Path,
        required=True,
        help="scenario whose map the routes drive on",
    )
    routes.add_argument("--count", type=int_at_least(1), default=12, help="number of routes")
    routes.add_argument(
        "--length-m", type=float, default=400.0, help="length of each route in metres"
    )
    routes.add_argument("--seed", type=SEED, default=0)
    routes.add_argument("--town", default="", help="value of the town attribute")
    routes.add_argument(
        "--turns",
        choices=("lights", "any"),
        default="lights",
        help="lights: routes that turn at signalised junctions, plain random drives (with a warning) where "
        "the map has too few; any: plain random drives",
    )
    routes.add_argument("--out", type=Path, required=True, help="output routes.xml")
    routes.set_defaults(run=run_routes)

    town = actions.add_parser(
        "import-town",
        help="write a scenario for a CARLA town's OpenDRIVE file (and the leaderboard's routes)",
    )
    town.add_argument("xodr", type=Path, metavar="TOWN.xodr", help="e.g. exported with world.get_map().to_opendrive()")
    town.add_argument("--routes", type=Path, help="leaderboard routes.xml (e.g. routes_devtest.xml); default: random")
    town.add_argument(
        "--town", help="the route file's town to use (default: the map file's name, e.g. Town01)"
    )
    town.add_argument("--vehicles", type=_count, default=[40, 80], help="N or MIN,MAX (default 40,80)")
    town.add_argument("--walkers", type=_count, default=[20, 40], help="N or MIN,MAX (default 20,40)")
    town.add_argument("--out", type=Path, required=True, help="scenario YAML to write")
    town.set_defaults(run=run_import_town)


def _count(text: str) -> int | list[int]:
    """``N`` or ``MIN,MAX`` (checked again by the scenario schema)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or MIN,MAX (integers), got {text!r}") from None
    if len(values) not in (1, 2):
        raise argparse.ArgumentTypeError(f"expected N or MIN,MAX (integers), got {text!r}")
    return values[0] if len(values) == 1 else values


def _count_text(value: int | list[int]) -> str:
    return str(value) if isinstance(value, int) else ",".join(map(str, value))


def _world(path: Path, *, map_only: bool = False):
    """(scenario, network path, sumolib net, planner) for a SUMO scenario.

    ``map_only`` ignores the scenario's routes (so routes can be generated for a scenario
    whose route file does not exist yet).
    """
    import yaml

    from found_rl.maps import build_network, read_network
    from found_rl.routes import RoutePlanner
    from found_rl.scenario import load_scenario, parse_scenario

    if map_only and path.is_file():
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict):
            data["routes"] = {"random_length_m": 100.0}
        scenario = parse_scenario(data, source=str(path), base_dir=path.parent)
    else:
        scenario = load_scenario(path)
    if scenario.backend != "sumo":
        raise UserError(
            f"{path}: backend: this command needs a sumo scenario, got {scenario.backend!r}"
        )
    net_path = build_network(scenario.map)
    net = read_network(net_path)
    return scenario, net_path, net, RoutePlanner.of_network(net)


def _episode_limit(scenario: Scenario) -> str:
    from found_rl.world import STEP_S

    episode = scenario.episode
    limit = f"at most {episode.max_steps} steps ({episode.max_steps * STEP_S:g} s)"
    if episode.route_timeout is None:
        return limit
    timeout = episode.route_timeout
    return f"{timeout.s_per_m:g} s per route metre + {timeout.initial_s:g} s (leaderboard), {limit}"


def _plan_routes(scenario, planner):
    if scenario.routes.file is None:
        return []
    return planner.plan_file(scenario.routes.file, scenario.routes.town)


def _file_kind(path: Path) -> str:
    """``run config``, ``suite`` or ``scenario`` (the default: load_scenario names any problem)."""
    import yaml

    from found_rl.train.config import is_run_config

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return "scenario"
    if is_run_config(data):
        return "run config"
    return "suite" if isinstance(data, dict) and "towns" in data and "map" not in data else "scenario"


def run_check(args: argparse.Namespace) -> int:
    from found_rl.scenario import load_scenario

    for path in args.files:
        kind = _file_kind(path)
        if kind == "run config":  # the quickstart: its settings and every scenario it names
            from found_rl.evaluation.suite import load_suite
            from found_rl.train.config import load_run_config

            config = load_run_config(path)
            suite = len(load_suite(config.evaluation.suite).towns) if config.evaluation.suite is not None else 0
            evaluated = len(config.evaluation.scenarios) + suite
            print(f"{path}: ok (a run config: {len(config.scenario)} training scenarios, {evaluated} evaluation "
                  f"towns; {len(config.scenario) + evaluated} scenario files checked)")
            continue
        if kind == "suite":  # an evaluation suite: every town's scenario
            from found_rl.evaluation.suite import load_suite

            suite = load_suite(path)
            for town in suite.towns if not args.schema_only else ():
                _check_world(town.scenario_path, town.scenario)
            kinds = ", ".join(dict.fromkeys(town.kind for town in suite.towns))
            print(f"{path}: ok (a suite: {len(suite.towns)} towns ({kinds}), {suite.repetitions} repetition(s) "
                  "per route)")
            continue
        scenario = load_scenario(path)
        if not args.schema_only:
            _check_world(path, scenario)
        print(f"{path}: ok")
    return 0


def _check_world(path: Path, scenario: Scenario) -> None:
    """Build a SUMO scenario's network and plan its routes; warn where it runs with less than it asks."""
    import sys

    from found_rl.sim.sumo.world_checks import world_warnings

    if scenario.backend != "sumo":
        return
    scenario, net_path, net, planner = _world(path)
    _plan_routes(scenario, planner)
    for line in world_warnings(scenario, net_path, net):
        print(f"{path}: warning: {line}", file=sys.stderr)


def run_show(args: argparse.Namespace) -> int:
    import numpy as np

    from found_rl.actions import RoadOption
    from found_rl.maps import load_map_geometry, network_identity
    from found_rl.maps.opendrive import ImportReport
    from found_rl.sim.sumo.traffic import walker_capacity
    from found_rl.sim.sumo.world_checks import world_warnings

    scenario, net_path, net, planner = _world(args.file)
    geometry = load_map_geometry(net_path, net)
    min_x, min_y, max_x, max_y = geometry.bounds
    lanes = geometry.lanes.values()
    lights = net.getTrafficLights()
    print(f"scenario   {args.file}  ({scenario.description or 'no description'})")
    print(f"network    {net_path}")
    print(f"identity   {network_identity(net_path)}  (the same roads under any spec have the same identity)")
    print(f"map        {max_x - min_x:.0f} m x {max_y - min_y:.0f} m")
    print(
        f"lanes      {sum(not lane.is_junction for lane in lanes)} road lanes, "
        f"{sum(lane.is_junction for lane in lanes)} junction lanes"
    )
    report = ImportReport.load(net_path)
    unmapped = f", {len(report.unmapped)} map lights not mapped" if report and report.unmapped else ""
    print(f"lights     {len(lights)} signalised junctions{unmapped}")
    print(
        f"walkways   {len(geometry.sidewalk_polygons)} sidewalk pieces, "
        f"{len(geometry.crossing_polygons)} crossings"
    )
    traffic = scenario.traffic
    possible = walker_capacity(net)
    print(
        f"traffic    vehicles {traffic.vehicles[0]}-{traffic.vehicles[1]}, "
        f"walkers {traffic.walkers[0]}-{traffic.walkers[1]} (the map can host {possible})"
    )
    for line in world_warnings(scenario, net_path, net):
        print(f"warning    {line}")
    print(f"episode    {_episode_limit(scenario)}, blocked after {scenario.episode.blocked_s:g} s")
    routes = _plan_routes(scenario, planner)
    if not routes:
        print(f"routes     random, {scenario.routes.random_length_m:.0f} m each")
        return 0
    lengths = np.array([r.length_m for r in routes])
    print(
        f"routes     {len(routes)} from {scenario.routes.file}, "
        f"{lengths.min():.0f}-{lengths.max():.0f} m (mean {lengths.mean():.0f} m)"
    )
    for route in routes:
        changes = np.flatnonzero(np.diff(route.commands.astype(int), prepend=-99))
        turns = [
            RoadOption(int(route.commands[i])).name
            for i in changes
            if route.commands[i] in (RoadOption.LEFT, RoadOption.RIGHT)
        ]
        print(
            f"  {route.route_id:>6}  {route.length_m:6.0f} m  turns: {' '.join(turns) or '-'}"
        )
    return 0


def run_routes(args: argparse.Namespace) -> int:
    import sys

    import numpy as np

    from found_rl.routes import write_routes
    from found_rl.routes.generate import draw_routes, generate_routes

    if not (math.isfinite(args.length_m) and args.length_m > 10):
        raise UserError(f"--length-m must be a finite number > 10, got {args.length_m}")
    check_output_file(args.out, "--out")
    if args.out.resolve() == args.scenario.resolve():
        raise UserError(f"--out {args.out}: is the --scenario file itself; pass a routes.xml path")
    _, _, _, planner = _world(args.scenario, map_only=True)
    rng = np.random.default_rng(args.seed)
    if args.turns == "any":
        routes = generate_routes(planner, rng, args.count, args.length_m, town=args.town, at_lights=False)
    else:
        routes, at_lights = draw_routes(planner, rng, args.count, args.length_m, town=args.town)
        if at_lights < len(routes):
            lights = len(planner.net.getTrafficLights())
            print(
                f"{args.scenario}: warning: only {at_lights} of {len(routes)} routes turn at signalised junctions "
                f"(the map has {lights} traffic lights); the other {len(routes) - at_lights} are plain random drives",
                file=sys.stderr,
            )
    with replaced_atomically(args.out) as tmp:
        write_routes(tmp, routes)
    print(f"wrote {len(routes)} routes to {args.out}")
    return 0


def _route_town(routes_path: Path, town: str | None, map_stem: str) -> str | None:
    """The town whose routes to use: ``--town``, else the map's name if the file has it, else its only town.

    Routes without a ``town`` attribute (older CARLA and Found-RL files) belong to every town:
    they are kept, and a note says so. ``None``: no route names a town, so all are used.
    """
    import sys

    from found_rl.routes import parse_routes

    specs = parse_routes(routes_path)
    towns = sorted({spec.town for spec in specs if spec.town})
    townless = sum(not spec.town for spec in specs)
    if town is None and map_stem in towns:
        town = map_stem
    elif town is None and len(towns) == 1:
        town = towns[0]
    elif town is None and towns:
        raise UserError(f"--routes {routes_path}: holds routes of towns {towns}; say which with --town")
    if town is not None and town not in towns and not townless:
        raise UserError(f"--town {town}: {routes_path} has no route of that town; it has {towns}")
    if townless:
        kept = f"kept for --town {town}" if town is not None else f"all {len(specs)} are used"
        print(
            f"--routes {routes_path}: note: {townless} of {len(specs)} routes carry no town attribute; {kept}",
            file=sys.stderr,
        )
    return town


def run_import_town(args: argparse.Namespace) -> int:
    """Write a ready scenario for an exported CARLA town, after building and checking it."""
    import os
    import sys

    import yaml

    from found_rl.maps import build_network, read_network
    from found_rl.maps.opendrive import ImportReport
    from found_rl.routes import RoutePlanner
    from found_rl.scenario import parse_scenario
    from found_rl.sim.sumo.world_checks import world_warnings

    xodr = args.xodr
    if not xodr.is_file() or xodr.suffix != ".xodr":
        raise UserError(f"{xodr}: expected an existing OpenDRIVE .xodr file")
    check_output_file(args.out, "--out")
    folder = args.out.resolve().parent
    folder.mkdir(parents=True, exist_ok=True)  # relative paths resolve through it

    def relative(path: Path) -> str:
        return os.path.relpath(path.resolve(), folder)

    routes: dict = {"random_length_m": 500.0}
    town = None
    if args.routes is not None:
        town = _route_town(args.routes, args.town, xodr.stem)
        routes = {"file": relative(args.routes), **({"town": town} if town else {})}
    route_note = "" if args.routes is None else f", leaderboard routes of {town}" if town else ", leaderboard routes"
    data = {
        "description": f"{xodr.stem} imported from OpenDRIVE{route_note}",
        "backend": "sumo",
        "map": {"file": relative(xodr)},
        "routes": routes,
        "traffic": {"vehicles": args.vehicles, "walkers": args.walkers, "warmup_s": 60},
        "episode": {"max_steps": 6000, "route_timeout": {"s_per_m": 0.8, "initial_s": 5.0}},
        "reward": "valeo",
        "seed": 0,
    }
    scenario = parse_scenario(data, source=str(args.out), base_dir=folder)
    net_path = build_network(scenario.map)
    net = read_network(net_path)
    planned = _plan_routes(scenario, RoutePlanner.of_network(net))
    report = ImportReport.load(net_path)
    for line in world_warnings(scenario, net_path, net):
        print(f"{args.out}: warning: {line}", file=sys.stderr)
    command = [f"found-rl scenario import-town {xodr}"]
    if args.routes is not None:
        command.append(f"--routes {args.routes}" + (f" --town {town}" if town else ""))
    command.append(f"--vehicles {_count_text(args.vehicles)} --walkers {_count_text(args.walkers)} --out {args.out}")
    header = f"# {xodr.stem}, imported from OpenDRIVE. Regenerate with\n#   {' '.join(command)}\n"
    with replaced_atomically(args.out) as tmp:
        text = header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
        tmp.write_text(text, encoding="utf-8")
    print(
        f"wrote {args.out}: {len(report.traffic_lights)} signalised junctions, {report.sidewalk_lanes} sidewalk "
        f"lanes, {report.crossings} crossings, "
        + (f"{len(planned)} routes" + (f" of {town}" if town else "") if args.routes else "random 500 m routes")
    )
    return 0

