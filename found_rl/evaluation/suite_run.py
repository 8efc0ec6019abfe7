"""Driving one agent over every town of a suite: one worker process per town, a few at a time.

libsumo runs one simulation per process, so each town is evaluated in a process of its own
(spawned: it may run torch), at most ``workers`` at once. Each town writes its own results
file in the leaderboard's layout, resumed where a previous run of the same command stopped,
exactly as ``found-rl eval --scenario`` does for one town.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TownTask:
    """What a worker needs to drive one town.

    Attributes:
        name: the town's name in the suite.
        scenario_path: its scenario file.
        routes_path: the routes to drive (the scenario's file, or its first routes written apart).
        results_path: the town's results JSON (resumed if it holds the same run).
        identity: the results file's identity (what makes two runs the same run).
        agent: a ``found-rl eval --agent`` spec.
        repetitions: episodes per route.
        seed: base seed of the episodes.
        device: torch device of a checkpoint agent.
        advisor_timeout_s: seconds an advisor agent may take to answer.
        video_dir: where to write one BEV video per episode, or ``None``.
        video_format: ``gif`` or ``mp4``.
    """

    name: str
    scenario_path: Path
    routes_path: Path
    results_path: Path
    identity: dict[str, Any]
    agent: str
    repetitions: int
    seed: int
    device: str = "cpu"
    advisor_timeout_s: float = 10.0
    video_dir: Path | None = None
    video_format: str = "gif"


@dataclass(frozen=True)
class TownOutcome:
    """A town driven to the end: its results file and the wall-clock seconds its worker took."""

    name: str
    results_path: Path
    wall_s: float


def drive_town(task: TownTask) -> TownOutcome:
    """Drive every (route, repetition) of ``task`` not yet in its results file (in a worker process)."""
    start = time.perf_counter()
    import gymnasium as gym
    import torch

    torch.set_num_threads(1)  # the other towns' workers share the cores
    from found_rl import DRIVING_ENV_ID
    from found_rl.evaluation.agents import CheckpointAgent, make_agent
    from found_rl.evaluation.results import ResultsFile
    from found_rl.evaluation.runner import evaluate
    from found_rl.routes import parse_routes
    from found_rl.scenario import load_scenario

    scenario = load_scenario(task.scenario_path)
    scenario = scenario.model_copy(update={"routes": scenario.routes.with_file(task.routes_path)})
    num_routes = len(parse_routes(task.routes_path, scenario.routes.town))
    results = ResultsFile(task.results_path, task.identity, total=num_routes * task.repetitions)
    agent = make_agent(task.agent, device=task.device, advisor_timeout_s=task.advisor_timeout_s)
    env = None
    try:
        bev = {"bev_config": agent.bev_config()} if isinstance(agent, CheckpointAgent) else {}
        env = gym.make(DRIVING_ENV_ID, scenario=scenario, observation=agent.observation,
                       render_mode="rgb_array" if task.video_dir is not None else None, **bev)
        if isinstance(agent, CheckpointAgent):
            agent.check_observation_space(env.observation_space)
        evaluate(env, agent, results, num_routes=num_routes, repetitions=task.repetitions, seed=task.seed,
                 video_dir=task.video_dir, video_format=task.video_format, show_progress=False)
    finally:
        agent.close()
        if env is not None:
            env.close()
    return TownOutcome(task.name, task.results_path, time.perf_counter() - start)


def drive_towns(
    tasks: Sequence[TownTask], workers: int, on_done: Callable[[TownOutcome], None] | None = None
) -> list[TownOutcome]:
    """Drive every task, ``workers`` towns at a time, each in a fresh process; outcomes in task order.

    ``on_done`` is called in this process as each town finishes. A worker's exception is raised
    here (a user's mistake as it is, a bug with the worker's traceback attached).
    """
    context = multiprocessing.get_context("spawn")
    # a fresh process per town (Python 3.11+; before, a worker restarts libsumo for its next town)
    fresh = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) else {}
    outcomes: dict[str, TownOutcome] = {}
    with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context, **fresh) as pool:
        pending: set[Future[TownOutcome]] = {pool.submit(drive_town, task) for task in tasks}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    outcome = future.result()
                    outcomes[outcome.name] = outcome
                    if on_done is not None:
                        on_done(outcome)
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    return [outcomes[task.name] for task in tasks]
