"""``found-rl expert``: drive the privileged expert (``drive``) or collect a dataset (``collect``).

Examples::

    found-rl expert drive --scenario scenarios/town_grid.yaml --route 0 --video expert.gif
    found-rl expert collect --scenario scenarios/town_grid.yaml --steps 20000 --perturb-chance 0.05 --out data/expert
    found-rl expert collect --scenario scenarios/quickstart.yaml --steps 30000 --out data/three_towns
    found-rl expert collect --scenario scenarios/small_grid.yaml --scenario scenarios/small_spider.yaml \
        --driver advisor:http://127.0.0.1:8470 --beta 0.5 --steps 20000 --out data/dagger1
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from found_rl.argtypes import SEED, finite_float, int_at_least
from found_rl.cli.paths import check_output_dir, check_output_file
from found_rl.errors import UserError

if TYPE_CHECKING:
    from found_rl.dataset.towns import Town
    from found_rl.scenario import Scenario


PROBABILITY = finite_float(0.0, inclusive=True, maximum=1.0)
DEFAULT_BETA = 0.5
DRIVER_KINDS = ("advisor", "checkpoint")


class DeprecatedAlias(argparse.Action):
    """An old flag name that still works, with a one-line notice naming its replacement."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        new_name = "--" + self.dest.replace("_", "-")
        print(f"{parser.prog}: {option_string} is deprecated; use {new_name} (same meaning)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="expert_command", metavar="ACTION", required=True)

    collect = actions.add_parser("collect", help="write expert samples as webdataset shards")
    collect.add_argument(
        "--scenario", required=True, type=Path, action="append",
        help="scenario YAML, or a run config (its scenario: list); repeat it to collect several towns into one "
        "dataset: the steps split evenly over the scenarios, in the order given",
    )
    collect.add_argument(
        "--routes", type=Path, help="leaderboard routes.xml (default: the scenario's routes; one scenario only)"
    )
    collect.add_argument("--steps", required=True, type=int, help="samples to write (one per env step)")
    collect.add_argument("--out", required=True, type=Path, help="output folder (must be empty or new)")
    collect.add_argument(
        "--perturb-chance",
        type=PROBABILITY,
        default=0.0,
        metavar="P",
        help="chance per 0.1 s step of starting a 1 s action perturbation (default 0: none); bursts then "
        "cover about 10P/(9P+1) of the samples: 0.02 -> 17%%, 0.05 -> 34%%, 0.2 -> 71%%",
    )
    collect.add_argument(
        "--noise", type=PROBABILITY, dest="perturb_chance", action=DeprecatedAlias, help=argparse.SUPPRESS
    )
    collect.add_argument("--seed", type=SEED, default=0)
    collect.add_argument(
        "--workers", type=int_at_least(1), default=None,
        help="expert processes, each with its own simulator; one writer (default: the CPU cores, at most 8; "
        "1 collects in this process). The dataset depends on --seed and --workers",
    )
    collect.add_argument("--samples-per-shard", type=int_at_least(1), default=1000)
    collect.add_argument(
        "--driver", metavar="advisor:URL|checkpoint:PATH",
        help="DAgger: this learner drives and the expert labels every state (default: the expert drives)",
    )
    collect.add_argument(
        "--beta", type=PROBABILITY, metavar="B",
        help="with --driver: chance per step that the expert's own action is executed instead "
        f"(default {DEFAULT_BETA})",
    )
    collect.add_argument("--device", default="cpu", help="torch device of a checkpoint driver (default cpu)")
    collect.add_argument(
        "--advisor-timeout", type=finite_float(0.0, inclusive=False), default=10.0,
        help="seconds to wait for an advisor driver's answer (default 10)",
    )
    collect.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    collect.set_defaults(run=run_collect)

    drive = actions.add_parser("drive", help="drive one route and print its leaderboard scores")
    drive.add_argument("--scenario", required=True, type=Path, help="scenario YAML")
    drive.add_argument("--routes", type=Path, help="leaderboard routes.xml (default: the scenario's routes)")
    drive.add_argument("--route", type=int, default=None, help="route index (default: drawn from the seed)")
    drive.add_argument("--seed", type=SEED, default=0)
    drive.add_argument("--video", type=Path, help="write an annotated BEV video (.gif or .mp4)")
    drive.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    drive.set_defaults(run=run_drive)


def _scenario(scenario_path: Path, routes_path: Path | None):
    from found_rl.routes import parse_routes
    from found_rl.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    if routes_path is not None:
        parse_routes(routes_path, scenario.routes.town)
        scenario = scenario.model_copy(update={"routes": scenario.routes.with_file(routes_path.resolve())})
    return scenario


def _check_route_index(route: int | None, scenario: Scenario, scenario_path: Path) -> None:
    """Refuse a ``--route`` the route file does not have, before the simulator starts."""
    from found_rl.routes import parse_routes

    if route is None:
        return
    if scenario.routes.file is None:
        raise UserError(
            f"--route {route}: --scenario {scenario_path} has random routes (routes.random_length_m), "
            "so there is no route list to index; drop --route or pass --routes FILE"
        )
    num_routes = len(parse_routes(scenario.routes.file, scenario.routes.town))
    if not 0 <= route < num_routes:
        raise UserError(
            f"--route must be in [0, {num_routes}) for the {num_routes} route(s) of {scenario.routes.file}, got {route}"
        )


MAX_DEFAULT_WORKERS = 8


def default_workers() -> int:
    """One expert process per CPU core this process may use, at most ``MAX_DEFAULT_WORKERS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def _scenario_files(inputs: list[Path]) -> list[Path]:
    """The scenario files named by ``--scenario``: a scenario file itself, or a run config's list.

    Raises:
        FileNotFoundError, UserError: a missing or invalid file (named), or one given twice.
    """
    from found_rl.train.config import load_run_config

    files: list[Path] = []
    for path in inputs:
        for scenario in load_run_config(path).scenario:
            if scenario in files:
                raise UserError(f"--scenario {path}: {scenario} is already collected; name each scenario once")
            files.append(scenario)
    return files


def _towns(args: argparse.Namespace) -> list[Town]:
    """Every town to collect in, each checked to be collectable here before anything starts."""
    from found_rl.dataset.towns import load_town
    from found_rl.scenario import load_scenario

    files = _scenario_files(args.scenario)
    if args.routes is not None and len(files) > 1:
        raise UserError(
            f"--routes applies to one scenario, but --scenario names {len(files)} "
            f"({', '.join(f.name for f in files)}); give each scenario its routes in its own routes.file"
        )
    if args.routes is not None:
        return [load_town(files[0], _scenario(files[0], args.routes))]
    return [load_town(path, load_scenario(path)) for path in files]


def _driver(args: argparse.Namespace) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """``(make_driver, env options)`` for ``--driver``, after building the driver once to check it.

    A driver that cannot be reached (advisor) or loaded (checkpoint), or a checkpoint built for
    another observation, is refused here, naming the flag, before the collection starts.
    """
    from found_rl.evaluation.agents import CheckpointAgent, make_agent

    if args.driver is None:
        if args.beta is not None:
            raise UserError(f"--beta {args.beta:g}: needs --driver (without one the expert drives every step)")
        return None, {}
    kind, _, target = args.driver.partition(":")
    if kind not in DRIVER_KINDS or not target:
        raise UserError(f"--driver: expected advisor:URL or checkpoint:PATH, got {args.driver!r}")
    make_driver = functools.partial(
        make_agent, args.driver, device=args.device, advisor_timeout_s=args.advisor_timeout, flag="--driver"
    )
    try:
        driver = make_driver()
    except UserError as exc:
        if str(exc).startswith("--"):
            raise
        raise UserError(f"--driver {args.driver}: {exc}") from None
    try:
        if not isinstance(driver, CheckpointAgent):
            return make_driver, {}
        bev_config = driver.bev_config()
        driver.check_observation_space(_observation_space(bev_config))
        return make_driver, {"bev_config": bev_config}
    finally:
        driver.close()


def _observation_space(bev_config: Any) -> Any:
    """The env's observation space under ``bev_config``, known without starting a simulator."""
    import gymnasium as gym
    import numpy as np

    from found_rl.state_vector import STATE_SIZE

    return gym.spaces.Dict(
        bev=gym.spaces.Box(0, 255, bev_config.observation_shape, np.uint8),
        state=gym.spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float32),
    )


def run_collect(args: argparse.Namespace) -> int:
    if args.steps < 1:
        raise UserError(f"--steps must be >= 1, got {args.steps}")
    import gymnasium as gym

    from found_rl import DRIVING_ENV_ID
    from found_rl.dataset.collect import PerturbationConfig, StreamConfig, collect
    from found_rl.dataset.parallel import collect_parallel
    from found_rl.dataset.shards import ShardWriter
    from found_rl.world import STEP_S

    perturbation = PerturbationConfig(chance_per_step=args.perturb_chance)
    check_output_dir(args.out, "--out")
    workers = args.workers or default_workers()
    towns = _towns(args)
    make_driver, env_options = _driver(args)
    beta = (DEFAULT_BETA if args.beta is None else args.beta) if make_driver is not None else 1.0
    settings = {
        "scenarios": [str(path.resolve()) for path in args.scenario],
        "routes": str(towns[0].scenario.routes.file) if args.routes is not None else None,
        "steps": args.steps,
        "perturb_chance": perturbation.chance_per_step,
        "perturb_duration_steps": perturbation.duration_steps,
        "driver": args.driver or "expert",
        "beta": beta,
        "seed": args.seed,
        "workers": workers,
    }
    config = StreamConfig(
        make_env=functools.partial(
            gym.make, DRIVING_ENV_ID, observation="bev", render_mode="rgb_array", **env_options
        ),
        towns=tuple(towns),
        perturbation=perturbation,
        make_driver=make_driver,
        beta=beta,
    )
    writer = ShardWriter(args.out, samples_per_shard=args.samples_per_shard, settings=settings)
    started = time.perf_counter()
    with writer:
        if workers == 1:
            counts = collect(config, writer, args.steps, args.seed, show_progress=not args.no_progress)
        else:
            counts = collect_parallel(
                config, writer, args.steps, args.seed, workers, show_progress=not args.no_progress
            )
    wall_s = time.perf_counter() - started
    print(
        f"wrote {counts['samples']} samples from {counts['episodes']} episodes in {len(writer.shards)} shards "
        f"to {args.out} ({counts['samples'] / wall_s:.1f} samples/s with {workers} worker(s), start-up included)"
    )
    if len(towns) > 1:
        print("towns: " + ", ".join(f"{name} {samples}" for (name, _), samples in writer.towns.items()))
    if perturbation.chance_per_step > 0:
        print(
            f"perturbed {counts['perturbed']} of {counts['samples']} samples "
            f"({100 * counts['perturbed'] / counts['samples']:.1f} %); --perturb-chance "
            f"{perturbation.chance_per_step:g} with {perturbation.duration_steps * STEP_S:g} s bursts "
            f"expects about {100 * perturbation.expected_fraction():.1f} %"
        )
    return 0


def run_drive(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from tqdm import tqdm

    from found_rl import DRIVING_ENV_ID
    from found_rl.evaluation.agents import ExpertAgent
    from found_rl.evaluation.progress import EpisodeProgress
    from found_rl.evaluation.runner import run_episode
    from found_rl.evaluation.video import VideoRecorder
    from found_rl.metrics import route_scores

    scenario = _scenario(args.scenario, args.routes)
    _check_route_index(args.route, scenario, args.scenario)
    video = None
    if args.video is not None:
        check_output_file(args.video, "--video")
        video = VideoRecorder(args.video)
    env = gym.make(
        DRIVING_ENV_ID,
        scenario=scenario,
        observation="state",
        render_mode="rgb_array" if video is not None else None,
    )
    try:
        with tqdm(total=100, unit="%", desc="route completion", disable=args.no_progress) as bar:
            on_step = EpisodeProgress(bar, completion_as_bar=True)
            outcome = run_episode(
                env, ExpertAgent(), args.route, args.seed, video, on_step, show_progress=not args.no_progress
            )
    finally:
        env.close()
    summary, scores = outcome.summary, route_scores(outcome.summary)
    print(
        f"route {summary.route_id}: {summary.status.value}; DS {scores.driving_score:.3f} "
        f"RC {scores.route_completion:.3f} IP {scores.infraction_penalty:.3f}; "
        f"{summary.distance_m:.0f} m in {summary.duration_s:.1f} s simulated ({outcome.wall_s:.1f} s wall)"
    )
    for infraction in summary.infractions:
        print(f"  step {infraction.step}: {infraction.kind.value} {infraction.detail}")
    if args.video is not None:
        print(f"video: {args.video}")
    return 0
