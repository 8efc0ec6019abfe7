"""Which towns a run is evaluated on, and one headline score over them (ARCHITECTURE §9).

A run trains on one or more scenarios and is evaluated on *sets*: each set is one town with
its routes written into the run folder (``eval_routes/<name>.xml``), driven by a worker
process of its own. A set is **unseen** when no training scenario shares its map; unseen sets
make the headline, and everything else (the held-out routes of the first training town, an
evaluation town that a training scenario also uses) is reported apart, labelled as seen. When
no set is unseen the headline falls back to the seen sets and ``eval_town_unseen`` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from found_rl.errors import UserError
from found_rl.scenario import Scenario, load_scenario
from found_rl.train.config import RunConfig
from found_rl.train.evaluator import EvaluationResult, EvaluationWorker, prepare_eval_routes
from found_rl.train.resources import Placement

SCORE_KEYS = ("route_completion", "driving_score", "infraction_penalty")


@dataclass(frozen=True)
class EvaluationSet:
    """One evaluation town: its scenario, the routes driven on it, and whether training saw it."""

    name: str
    scenario: Path
    routes_path: Path
    unseen: bool


@dataclass(frozen=True)
class EvaluationPlan:
    """The evaluation sets of a run, and the routes training may draw on its first town."""

    sets: tuple[EvaluationSet, ...]
    first_town_train_routes: list[int] | None
    """route indices training draws from on the first training town (``None``: all / random)"""


NO_EVALUATION = EvaluationPlan((), None)


def same_map(a: Scenario, b: Scenario) -> bool:
    """Two scenarios drive the same town: the same backend and the same map spec."""
    return a.backend == b.backend and a.map == b.map


def plan_evaluation_sets(config: RunConfig, routes_dir: Path) -> EvaluationPlan:
    """Write each evaluation set's routes under ``routes_dir`` (once) and say which are unseen.

    Raises:
        ValueError: the held-out routes of the first training town cannot be split off.
    """
    evaluation = config.evaluation
    training = [load_scenario(path) for path in config.scenario]
    routes_dir.mkdir(parents=True, exist_ok=True)
    sets: list[EvaluationSet] = []
    train_routes: list[int] | None = None
    if evaluation.seen:
        path = routes_dir / f"seen_{config.scenario[0].stem}.xml"
        train_routes = prepare_eval_routes(training[0], evaluation.routes, evaluation.held_out, evaluation.seed, path)
        sets.append(EvaluationSet(f"{config.scenario[0].stem} (seen)", config.scenario[0], path, unseen=False))
    for scenario_path in evaluation.scenarios:
        scenario = load_scenario(scenario_path)
        unseen = not any(same_map(scenario, town) for town in training)
        name = scenario_path.stem if unseen else f"{scenario_path.stem} (seen)"
        path = routes_dir / f"{'' if unseen else 'seen_'}{scenario_path.stem}.xml"
        prepare_eval_routes(scenario, evaluation.routes, None, evaluation.seed, path, hold_out=False)
        sets.append(EvaluationSet(name, scenario_path, path, unseen=unseen))
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise UserError(f"evaluation.scenarios: two evaluation towns share a file name ({names}); rename one")
    return EvaluationPlan(tuple(sets), train_routes)


def headline(results: dict[str, tuple[EvaluationSet, EvaluationResult, int]]) -> dict[str, Any]:
    """One row of scores: route-weighted means over the unseen sets (over the seen ones if none).

    Args:
        results: per set name, the set, its result and its number of routes.

    Returns:
        ``route_completion``, ``driving_score``, ``infraction_penalty``, ``infractions_per_km``,
        ``eval_town_unseen``, the headline's first ``results``/``video`` paths, ``towns`` (every
        set's own scores, each with ``unseen``) and ``seen`` (the seen sets' means, or ``None`` without any).
    """
    unseen = [item for item in results.values() if item[0].unseen]
    seen = [item for item in results.values() if not item[0].unseen]
    chosen = unseen or seen
    row: dict[str, Any] = {**_weighted(chosen), "eval_town_unseen": bool(unseen)}
    row["results"] = chosen[0][1].results_path
    row["video"] = chosen[0][1].video_path
    row["towns"] = {
        s.name: {**{key: getattr(result, key) for key in SCORE_KEYS}, "unseen": s.unseen, "routes": n,
                 "results": result.results_path}
        for s, result, n in results.values()
    }
    row["seen"] = _weighted(seen) if seen else None
    return row


def _weighted(items: Sequence[tuple[EvaluationSet, EvaluationResult, int]]) -> dict[str, Any]:
    total = sum(n for _, _, n in items)
    out: dict[str, Any] = {key: sum(getattr(r, key) * n for _, r, n in items) / total for key in SCORE_KEYS}
    kinds = sorted({kind for _, r, _ in items for kind in r.infractions_per_km})
    out["infractions_per_km"] = {
        kind: sum(r.infractions_per_km.get(kind, 0.0) * n for _, r, n in items) / total for kind in kinds
    }
    return out


class EvaluationSets:
    """One evaluation worker per set, driven together: every agent drives every set.

    The workers start when the sets are made and load in parallel; :meth:`wait_ready` (or the
    first evaluation) waits for them.
    """

    def __init__(self, plan: EvaluationPlan, seed: int, bev_pool: int, *, placement: Placement | None = None) -> None:
        self.plan = plan
        self.workers: dict[str, EvaluationWorker] = {}
        try:
            for item in plan.sets:
                self.workers[item.name] = EvaluationWorker(item.scenario, item.routes_path, seed, bev_pool,
                                                           placement=placement)
        except BaseException:
            self.close()
            raise

    def wait_ready(self) -> None:
        """Wait until every worker's env is built (they start in parallel, beside the trainer's
        other processes)."""
        try:
            for worker in self.workers.values():
                worker.wait_ready()
        except BaseException:
            self.close()
            raise

    @property
    def num_routes(self) -> int:
        return sum(worker.num_routes for worker in self.workers.values())

    def start(
        self, agent: str, label: str, results_stem: Path, video_root: Path | None, identity: dict[str, Any]
    ) -> None:
        """Start driving ``agent`` on every set at once (each set has its own worker process).

        Results files are ``<results_stem>.<routes file stem>.json`` (``<results_stem>.json`` for a
        single set); the video (into ``video_root``) is of the first headline town's first route.
        """
        single = len(self.plan.sets) == 1
        filmed = next((item for item in self.plan.sets if item.unseen), self.plan.sets[0])
        for item in self.plan.sets:
            suffix = "" if single else "." + item.routes_path.stem  # NAME or seen_NAME, file-safe already
            results_path = results_stem.with_name(f"{results_stem.name}{suffix}.json")
            results_path.unlink(missing_ok=True)  # a resumed run repeats an evaluation past its checkpoint
            video_dir = video_root if item is filmed else None
            town_identity = {**identity, "town": item.name, "eval_town_unseen": item.unseen}
            self.workers[item.name].start(agent, label, results_path, video_dir, town_identity)

    def is_done(self) -> bool:
        """Every set's result of the started evaluation is in: :meth:`finish` will not wait."""
        return all(worker.is_done() for worker in self.workers.values())

    def finish(self) -> dict[str, Any]:
        """The headline row (see :func:`headline`) of the evaluation :meth:`start` began (waits)."""
        results = {item.name: (item, self.workers[item.name].finish(), self.workers[item.name].num_routes)
                   for item in self.plan.sets}
        return headline(results)

    def evaluate(
        self, agent: str, label: str, results_stem: Path, video_root: Path | None, identity: dict[str, Any]
    ) -> dict[str, Any]:
        """Drive ``agent`` on every set and wait for the headline row (see :meth:`start`)."""
        self.start(agent, label, results_stem, video_root, identity)
        return self.finish()

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()

