"""``found-rl eval``: closed-loop route evaluation with CARLA-leaderboard metrics.

Example::

    found-rl eval --scenario scenarios/town_grid.yaml --agent expert --out results/expert.json
    found-rl eval --suite scenarios/suites/unseen_towns.yaml --agent expert --out results/expert_suite
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from found_rl.argtypes import SEED, int_at_least
from found_rl.cli.paths import check_output_dir, check_output_file
from found_rl.errors import UserError


def configure(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--scenario", type=Path, help="scenario YAML (one town)")
    where.add_argument("--suite", type=Path, help="evaluation suite YAML (several towns, scenarios/suites/)")
    parser.add_argument(
        "--routes", type=Path, help="leaderboard routes.xml (default: the scenario's route file)"
    )
    parser.add_argument(
        "--agent", required=True, help="expert | checkpoint:PATH | advisor:URL (an advisor server's base URL)"
    )
    parser.add_argument(
        "--repetitions", type=int, default=None,
        help="episodes per route, each freshly reset under other traffic (default: 1; a suite's own number)",
    )
    parser.add_argument("--seed", type=SEED, default=None,
                        help="base seed; each episode's seed derives from it (default: 0; a suite's own seed)")
    parser.add_argument(
        "--out", required=True, type=Path,
        help="results JSON (leaderboard layout); resumed if it exists. --suite: a folder (a results JSON per "
        "town and suite.json)",
    )
    parser.add_argument("--routes-per-town", type=int_at_least(1), help="--suite: only each town's first N routes")
    parser.add_argument("--workers", type=int_at_least(1),
                        help="--suite: towns driven at once, each in its own process (default: the usable cores)")
    parser.add_argument("--video-dir", type=Path, help="write one annotated BEV video per route here")
    parser.add_argument("--video-format", choices=("gif", "mp4"), default="gif")
    parser.add_argument("--device", default="cpu", help="torch device for checkpoint agents")
    parser.add_argument(
        "--advisor-timeout", type=float, default=10.0, help="seconds to wait for an advisor answer"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--carla-root",
        type=Path,
        help="backend: carla: start and supervise a CARLA server from this release for the evaluation "
        "(default: use the running server at $FOUND_RL_CARLA, or localhost:2000)",
    )
    parser.add_argument("--carla-gpu", type=int_at_least(0), default=0, help="GPU of that server (default 0)")
    parser.set_defaults(run=run)


def prepare_scenario(scenario_path: Path, routes_path: Path | None) -> Any:
    """The scenario with ``--routes`` swapped in, checked to have a route file with routes.

    Raises:
        ValueError: random-route scenario without ``--routes``, or a route file without routes.
        FileNotFoundError: missing scenario or route file.
    """
    from found_rl.routes import parse_routes
    from found_rl.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    if routes_path is not None:
        parse_routes(routes_path, scenario.routes.town)  # names the file when it is missing, malformed or empty
        scenario = scenario.model_copy(update={"routes": scenario.routes.with_file(routes_path.resolve())})
    if scenario.routes.file is None:
        raise UserError(
            f"--scenario {scenario_path}: routes are random (routes.random_length_m), so there is no "
            "fixed route list to evaluate; pass --routes FILE (a leaderboard routes.xml)"
        )
    parse_routes(scenario.routes.file, scenario.routes.town)
    return scenario


def check_video_dir(args: argparse.Namespace) -> None:
    """``--video-dir`` is a folder path (or absent) and ``--video-format`` one this machine writes."""
    from found_rl.evaluation.video import MP4_NEEDS, mp4_supported

    if args.video_dir is not None:
        check_output_dir(args.video_dir, "--video-dir")
        if args.video_format == "mp4" and not mp4_supported():
            raise UserError(f"--video-format mp4: {MP4_NEEDS}; or use --video-format gif")


def run(args: argparse.Namespace) -> int:
    if args.repetitions is not None and args.repetitions < 1:
        raise UserError(f"--repetitions must be >= 1, got {args.repetitions}")
    if not (math.isfinite(args.advisor_timeout) and args.advisor_timeout > 0):
        raise UserError(f"--advisor-timeout must be a finite number > 0 seconds, got {args.advisor_timeout}")
    if args.suite is not None:
        from found_rl.cli.evaluate_suite import run_suite

        return run_suite(args)
    for flag in ("routes_per_town", "workers"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag.replace('_', '-')}: applies to --suite only")
    args.repetitions = 1 if args.repetitions is None else args.repetitions
    args.seed = 0 if args.seed is None else args.seed

    import gymnasium as gym

    from found_rl import DRIVING_ENV_ID
    from found_rl.evaluation.agents import CheckpointAgent, make_agent, parse_agent_spec
    from found_rl.evaluation.report import print_summary
    from found_rl.evaluation.results import ResultsFile
    from found_rl.evaluation.runner import evaluate
    from found_rl.maps import scenario_network
    from found_rl.routes import parse_routes

    parse_agent_spec(args.agent)
    check_output_file(args.out, "--out")
    check_video_dir(args)
    scenario = prepare_scenario(args.scenario, args.routes)
    if args.carla_root is not None:
        from found_rl.sim.carla.server_process import find_carla_script

        if scenario.backend != "carla":
            raise UserError(f"--carla-root: {args.scenario} uses backend: {scenario.backend}, not carla")
        find_carla_script(args.carla_root)  # names a bad release folder before anything starts
    num_routes = len(parse_routes(scenario.routes.file, scenario.routes.town))
    identity = {
        "scenario": str(args.scenario.resolve()),
        **({"network": scenario_network(scenario)} if scenario.backend == "sumo" else {}),
        "routes": str(Path(scenario.routes.file).resolve()),
        "agent": args.agent,
        "repetitions": args.repetitions,
        "seed": args.seed,
    }
    # Fail fast, before SUMO starts: a foreign --out, a bad agent spec, checkpoint or URL.
    results = ResultsFile(args.out, identity, total=num_routes * args.repetitions)
    if len(results.finished_indices) >= results.total:
        print_summary(results)
        print(f"results: {args.out} (already complete; nothing to run)")
        return 0
    agent = make_agent(args.agent, device=args.device, advisor_timeout_s=args.advisor_timeout)
    env = backend = None
    try:
        render_mode = "rgb_array" if args.video_dir is not None else None
        if args.carla_root is not None:
            from found_rl.sim.carla.supervised_backend import start_supervised_backend

            backend = start_supervised_backend(scenario, carla_root=args.carla_root, gpu=args.carla_gpu)
        bev = {"bev_config": agent.bev_config()} if isinstance(agent, CheckpointAgent) else {}
        env = gym.make(
            DRIVING_ENV_ID, scenario=scenario, observation=agent.observation, render_mode=render_mode,
            backend=backend, **bev,
        )
        if isinstance(agent, CheckpointAgent):
            agent.check_observation_space(env.observation_space)
        evaluate(
            env,
            agent,
            results,
            num_routes=num_routes,
            repetitions=args.repetitions,
            seed=args.seed,
            video_dir=args.video_dir,
            video_format=args.video_format,
            show_progress=not args.no_progress,
        )
    finally:
        agent.close()
        if env is not None:
            env.close()
        elif backend is not None:  # the env never took it over
            backend.close()
    print_summary(results)
    print(f"results: {args.out}")
    return 0
