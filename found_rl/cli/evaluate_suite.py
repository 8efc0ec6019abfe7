"""``found-rl eval --suite FILE``: one agent over every town of an evaluation suite.

The output folder holds one results JSON per town (leaderboard layout, resumed like a single
town's), the routes of towns cut to ``--routes-per-town`` (``routes/NAME.xml``), and
``suite.json``: each town's and the suite's route-weighted mean with its 95 % bootstrap
interval, the towns' network identities, and the command's settings and wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from found_rl.atomic import replaced_atomically
from found_rl.cli.evaluate import check_video_dir
from found_rl.cli.paths import check_output_dir
from found_rl.errors import UserError

SUMMARY_FILE = "suite.json"


def run_suite(args: argparse.Namespace) -> int:
    """Drive ``--agent`` on every town of ``--suite``, then print and write the suite's table."""
    from found_rl.evaluation.agents import make_agent, parse_agent_spec
    from found_rl.evaluation.results import ResultsFile
    from found_rl.evaluation.suite import load_suite
    from found_rl.evaluation.suite_report import TownScores, print_suite, suite_report
    from found_rl.evaluation.suite_run import TownOutcome, TownTask, drive_towns
    from found_rl.maps import scenario_network
    from found_rl.routes import parse_routes
    from found_rl.train.resources import usable_cores

    for flag in ("routes", "carla_root"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag.replace('_', '-')}: applies to --scenario only; a suite town drives its own "
                            "route file")
    parse_agent_spec(args.agent)
    check_output_dir(args.out, "--out")
    check_video_dir(args)
    suite = load_suite(args.suite)
    repetitions = args.repetitions if args.repetitions is not None else suite.repetitions
    seed = args.seed if args.seed is not None else suite.seed
    make_agent(args.agent, device=args.device, advisor_timeout_s=args.advisor_timeout).close()  # fail fast
    args.out.mkdir(parents=True, exist_ok=True)
    tasks, networks, runs = [], {}, {}
    for town in suite.towns:
        routes_path = _town_routes(town.scenario, args.routes_per_town, args.out / "routes" / f"{town.name}.xml")
        num_routes = len(parse_routes(routes_path, town.scenario.routes.town))
        networks[town.name] = scenario_network(town.scenario)
        identity = {"suite": str(suite.path), "town": town.name, "scenario": str(town.scenario_path),
                    "network": networks[town.name], "routes": str(routes_path), "agent": args.agent,
                    "repetitions": repetitions, "seed": seed}
        results_path = args.out / f"{town.name}.json"
        results = ResultsFile(results_path, identity, total=num_routes * repetitions)  # refuses a foreign file
        runs[town.name] = (identity, results.total)
        if len(results.finished_indices) >= results.total:
            continue
        tasks.append(TownTask(
            town.name, town.scenario_path, routes_path, results_path, identity, args.agent, repetitions, seed,
            device=args.device, advisor_timeout_s=args.advisor_timeout,
            video_dir=None if args.video_dir is None else args.video_dir / town.name, video_format=args.video_format,
        ))
    workers = args.workers or min(len(tasks) or 1, usable_cores())
    print(f"{args.suite}: {len(suite.towns)} towns, {repetitions} repetition(s) per route; driving "
          f"{len(tasks)} town(s), {workers} at a time", file=sys.stderr)
    started = time.perf_counter()

    def report_town(outcome: TownOutcome) -> None:
        print(f"  {outcome.name}: done in {outcome.wall_s:.0f} s", file=sys.stderr)

    walls = {outcome.name: outcome.wall_s for outcome in drive_towns(tasks, workers, report_town)}
    wall_s = time.perf_counter() - started
    towns = []
    for town in suite.towns:
        identity, total = runs[town.name]
        results = ResultsFile(args.out / f"{town.name}.json", identity, total=total)  # as the worker left it
        towns.append(TownScores(town.name, town.kind, networks[town.name], results, walls.get(town.name)))
    header = {"suite_file": str(suite.path), "description": suite.description, "agent": args.agent,
              "repetitions": repetitions, "seed": seed, "routes_per_town": args.routes_per_town,
              "workers": workers, "wall_s": wall_s}
    report = suite_report(towns, header)
    with replaced_atomically(args.out / SUMMARY_FILE) as tmp:
        tmp.write_text(json.dumps(report, indent=2))
    print_suite(report)
    print(f"results: {args.out / SUMMARY_FILE} (and one results file per town in {args.out})")
    return 0


def _town_routes(scenario, limit: int | None, out: Path) -> Path:
    """The town's route file, or its first ``limit`` routes written to ``out`` (kept if unchanged)."""
    from found_rl.routes import parse_routes, write_routes

    if limit is None:
        return Path(scenario.routes.file)
    routes = parse_routes(scenario.routes.file, scenario.routes.town)[:limit]
    out.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(out) as tmp:
        write_routes(tmp, routes)
    return out.resolve()
