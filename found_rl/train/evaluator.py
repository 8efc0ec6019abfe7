"""Periodic closed-loop evaluation of a training run on held-out routes.

The held-out routes are written once into the run folder as a leaderboard ``eval_routes.xml``
(a route-file scenario's held-out routes, or routes drawn with a held-out seed for a scenario of
random routes), so ``found-rl eval --routes RUN/eval_routes.xml`` repeats any evaluation.

libsumo runs one simulation per process, so the evaluation env lives in a worker process of
its own, started once (``spawn``: it needs torch, which must not be forked) and kept for the
whole run. It drives the latest checkpoint and the reference policies with the same
leaderboard evaluation as ``found-rl eval`` and writes the same results JSON.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from found_rl.atomic import replaced_atomically
from found_rl.errors import UserError
from found_rl.scenario import Scenario, load_scenario
from found_rl.train.resources import Placement

_REPLY_TIMEOUT_S = 3600.0


def prepare_eval_routes(
    scenario: Scenario, count: int, held_out: list[int] | None, seed: int, out: Path, *, hold_out: bool = True,
    limit: int | None = None,
) -> list[int] | None:
    """Write the evaluation routes to ``out``; return the training route indices.

    A route-file scenario gives its held-out routes (``held_out``, default the last ``count``),
    or with ``hold_out=False`` (a town only evaluated on) all of them, or the first ``limit``;
    only the routes of ``routes.town`` count when the scenario names one. A random-route
    scenario gives ``count`` routes drawn with the held-out ``seed``.

    Returns:
        The route indices training may draw from, or ``None`` for a random-route scenario (its
        training routes come from training seeds; the evaluation routes from ``seed``) or a
        town not trained on.

    Raises:
        ValueError: held-out indices outside the route file, or no route left to train on.
    """
    from found_rl.routes import parse_routes

    if scenario.routes.file is not None:
        routes = parse_routes(scenario.routes.file, scenario.routes.town)
        if not hold_out:
            _write_once(out, routes[:limit])
            return None
        if held_out is None and len(routes) < 2:
            raise UserError(
                f"{scenario.routes.file}: holds {len(routes)} route; training on a route file needs at least 2 "
                "(the last evaluation.routes are held out for evaluation)"
            )
        first = len(routes) - min(count, len(routes) - 1)
        indices = held_out if held_out is not None else list(range(first, len(routes)))
        if not indices:
            raise UserError("evaluation.held_out: is empty; name at least one route to evaluate on")
        bad = [i for i in indices if not 0 <= i < len(routes)]
        if bad:
            raise UserError(
                f"evaluation.held_out: indices {bad} lie outside {scenario.routes.file} ({len(routes)} routes)"
            )
        train = [i for i in range(len(routes)) if i not in set(indices)]
        if not train:
            raise UserError(
                f"evaluation.held_out: all {len(routes)} routes of {scenario.routes.file} are held out; "
                "leave at least one to train on"
            )
        _write_once(out, [routes[i] for i in indices])
        return train
    if scenario.map.town is not None:
        raise UserError(
            f"{scenario.source_path or 'scenario'}: map.town {scenario.map.town!r} has random routes, which "
            "can only be drawn on a running CARLA server; give the evaluation a route file (routes.file, or an "
            "evaluation.scenarios entry with one)"
        )
    if not out.exists():
        _write_once(out, _draw_routes(scenario, count, seed))
    return None


def _write_once(out: Path, routes: list[Any]) -> None:
    """Routes into ``out`` unless a run (being resumed) wrote them already."""
    from found_rl.routes import write_routes

    if not out.exists():
        with replaced_atomically(out) as tmp:
            write_routes(tmp, routes)


def _draw_routes(scenario: Scenario, count: int, seed: int) -> list[Any]:
    """Routes of the scenario's random length from a held-out seed: turning at lights where the
    map has enough of them, plain random drives for the rest (``routes.generate.draw_routes``)."""
    from found_rl.maps import build_network, read_network
    from found_rl.routes import RoutePlanner
    from found_rl.routes.generate import draw_routes

    planner = RoutePlanner.of_network(read_network(build_network(scenario.map)))
    length = float(scenario.routes.random_length_m or 150.0)
    routes, _ = draw_routes(planner, np.random.default_rng(seed), count, length)
    return routes


@dataclass(frozen=True)
class EvaluationResult:
    """Global scores of one evaluation (fractions, not percent) and where its records are."""

    agent: str
    route_completion: float
    driving_score: float
    infraction_penalty: float
    infractions_per_km: dict[str, float]
    results_path: str
    video_path: str | None
    driving_scores: tuple[tuple[float, ...], ...] = ()
    """per route, its repetitions' driving scores (the input of a bootstrap interval)"""
    route_completions: tuple[tuple[float, ...], ...] = ()
    """per route, its repetitions' route completions"""


def _worker_main(conn: Connection, scenario_path: str, routes_path: str, seed: int, bev_pool: int,
                 placement: Placement | None = None, repetitions: int = 1) -> None:
    """The evaluation process: one env, commands from the trainer until it says stop (or dies)."""
    from fast_sampler.executors.process_worker import die_with_parent

    die_with_parent()  # a trainer killed with SIGKILL takes this worker with it, silently
    if placement is not None:  # the learner's core is the learner's
        placement.apply()
    import torch

    torch.set_num_threads(1)  # the trainer and the env workers own the other cores
    from found_rl.bev import BevConfig
    from found_rl.env import DrivingEnv
    from found_rl.evaluation.agents import CheckpointAgent, make_agent
    from found_rl.evaluation.results import ResultsFile, scores_by_route
    from found_rl.evaluation.runner import evaluate
    from found_rl.routes import parse_routes

    try:
        scenario = load_scenario(scenario_path)
        # the scenario's route settings (command look-ahead) with the run's own route file
        routes = scenario.routes.with_file(Path(routes_path)).model_copy(update={"town": None})
        scenario = scenario.model_copy(update={"routes": routes})
        num_routes = len(parse_routes(routes_path))
        env = DrivingEnv(scenario, render_mode="rgb_array", bev_config=BevConfig(pool=bev_pool))
    except Exception as exc:  # forwarded whole: the trainer raises it with this traceback
        conn.send(("error", _describe(exc)))
        return
    conn.send(("ready", num_routes))
    try:
        while True:
            try:
                command, payload = conn.recv()
            except (EOFError, OSError):  # the trainer is gone: nothing left to answer
                return
            if command == "stop":
                return
            try:
                agent = make_agent(payload["agent"])
                env.set_observation(agent.observation)  # the references read no BEV: none is rendered
                if isinstance(agent, CheckpointAgent):
                    agent.check_observation_space(env.observation_space)
                identity = {"routes": routes_path, "agent": payload["label"], "seed": seed,
                            "repetitions": repetitions, **payload["identity"]}
                results = ResultsFile(payload["results_path"], identity, total=num_routes * repetitions)
                video_dir = Path(payload["video_dir"]) if payload.get("video_dir") else None
                scores = evaluate(
                    env, agent, results, num_routes=num_routes, repetitions=repetitions, seed=seed,
                    video_dir=video_dir, show_progress=False, video_episodes=1,
                )
                video = sorted(video_dir.glob("0000_*.gif")) if video_dir is not None else []
                conn.send(("ok", EvaluationResult(
                    agent=payload["label"],
                    route_completion=scores.route_completion,
                    driving_score=scores.driving_score,
                    infraction_penalty=scores.infraction_penalty,
                    infractions_per_km={kind.value: rate for kind, rate in scores.infractions_per_km.items()},
                    results_path=payload["results_path"],
                    video_path=str(video[0]) if video else None,
                    driving_scores=tuple(map(tuple, scores_by_route(results.records, "score_composed"))),
                    route_completions=tuple(map(tuple, scores_by_route(results.records, "score_route"))),
                )))
            except Exception as exc:
                conn.send(("error", _describe(exc)))
    finally:
        env.close()


def _describe(exc: Exception) -> str:
    """One summary line first, then the worker's whole traceback (the trainer re-raises it)."""
    return f"{type(exc).__name__}: {exc}\n--- evaluation worker traceback ---\n{traceback.format_exc()}"


class EvaluationWorker:
    """The evaluation process, driven from the trainer.

    Args:
        scenario_path: the run's scenario file.
        routes_path: the run's ``eval_routes.xml``.
        seed: seed of every evaluation episode (the same episodes every time).
        bev_pool: the BEV max-pooling the trained policy reads (``BevConfig.pool``).
        placement: the worker's priority and CPUs beside the trainer (``None``: the trainer's).
        repetitions: episodes per route, each under other traffic.
    """

    def __init__(self, scenario_path: Path, routes_path: Path, seed: int, bev_pool: int = 2, *,
                 placement: Placement | None = None, repetitions: int = 1) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main,
            args=(child, str(scenario_path), str(routes_path), seed, bev_pool, placement, repetitions),
            name="found-rl-eval", daemon=True,
        )
        self.process.start()
        child.close()
        self._doing = "idle"
        self._num_routes: int | None = None

    def wait_ready(self) -> None:
        """Wait until the worker's env is built (the trainer starts its other processes first)."""
        if self._num_routes is None:
            self._num_routes = int(self._receive("starting the evaluation env"))

    def is_ready(self) -> bool:
        """The worker's env is built (never waits; a worker that failed to start raises here).

        Raises:
            RuntimeError: the worker could not build its env, or died (its error is quoted).
        """
        if self._num_routes is None and (self._conn.poll(0) or not self.process.is_alive()):
            self.wait_ready()
        return self._num_routes is not None

    @property
    def num_routes(self) -> int:
        """The evaluation routes the worker drives (waits for the worker to be ready)."""
        self.wait_ready()
        return self._num_routes

    def start(
        self, agent: str, label: str, results_path: Path, video_dir: Path | None, identity: dict[str, Any]
    ) -> None:
        """Start driving every evaluation route with ``agent`` (a ``found-rl eval --agent`` spec);
        :meth:`finish` returns the result, :meth:`is_done` says whether it is in."""
        self.wait_ready()
        self._doing = f"evaluating {label}"
        self._conn.send(("evaluate", {
            "agent": agent, "label": label, "results_path": str(results_path),
            "video_dir": str(video_dir) if video_dir else None, "identity": identity,
        }))

    def is_done(self) -> bool:
        """The started evaluation's result is in (or the worker died): :meth:`finish` will not wait."""
        return self._conn.poll(0) or not self.process.is_alive()

    def finish(self) -> EvaluationResult:
        """The result of the evaluation :meth:`start` began (waits for it).

        Raises:
            RuntimeError: the evaluation failed (the worker's error is quoted).
        """
        return self._receive(self._doing)

    def _receive(self, doing: str) -> Any:
        if not self._conn.poll(_REPLY_TIMEOUT_S):
            raise RuntimeError(f"the evaluation worker did not answer while {doing}")
        try:
            status, payload = self._conn.recv()
        except EOFError:
            raise RuntimeError(
                f"the evaluation worker died while {doing} (exit code {self.process.exitcode})"
            ) from None
        if status == "error":
            raise RuntimeError(f"evaluation failed while {doing}: {payload}")
        return payload

    def request_stop(self) -> None:
        """Ask the worker to close its env and exit (:meth:`close` waits for it)."""
        if self.process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self._conn.send(("stop", None))

    def close(self) -> None:
        self.request_stop()
        if self.process.is_alive():
            self.process.join(timeout=10.0)
        if self.process.is_alive():
            self.process.terminate()  # our own child, by its handle
            self.process.join(timeout=5.0)
        self._conn.close()
