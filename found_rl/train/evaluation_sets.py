"""Which towns a run is evaluated on, and one headline score over them (ARCHITECTURE §9).

A run trains on one or more scenarios and is evaluated on *sets*: each set is one town with
its routes written into the run folder (``eval_routes/<name>.xml``), driven by a worker
process of its own. A town is known by its road network (:mod:`found_rl.maps.identity`), not by
its spec: a set is **unseen** when no training scenario and no dataset the advisor learned from
(:mod:`found_rl.train.advisor_towns`) has the same network. Unseen sets make the headline, and
everything else (the held-out routes of the first training town, an evaluation town whose roads
training or the advisor drove) is reported apart, labelled as seen, with what saw it. When no set
is unseen the headline falls back to the seen sets and ``eval_town_unseen`` says so. Every mean
comes with its 95 % bootstrap interval over routes and repetitions
(:mod:`found_rl.evaluation.intervals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from found_rl.errors import UserError
from found_rl.evaluation.intervals import bootstrap_interval
from found_rl.evaluation.suite import load_suite, map_kind
from found_rl.maps.identity import scenario_network
from found_rl.scenario import Scenario, load_scenario
from found_rl.train.advisor_towns import AdvisorTowns, advisor_towns
from found_rl.train.config import RunConfig
from found_rl.train.evaluator import EvaluationResult, EvaluationWorker, prepare_eval_routes
from found_rl.train.resources import Placement

SCORE_KEYS = ("route_completion", "driving_score", "infraction_penalty")
INTERVAL_KEYS = {"driving_score": "driving_scores", "route_completion": "route_completions"}
"""Scores given with a bootstrap interval (``<key>_ci``), and the result field holding their routes."""


@dataclass(frozen=True)
class EvaluationSet:
    """One evaluation town: its scenario, the routes driven on it, and whether training saw it."""

    name: str
    scenario: Path
    routes_path: Path
    unseen: bool
    network: str = ""
    """the identity of the town's road network"""
    kind: str = ""
    """grid, spider, random, OpenDRIVE, SUMO network, or the suite's label"""
    seen_by: tuple[str, ...] = ()
    """what drove this network: ``training: FILE`` and ``advisor data: TOWN`` entries"""


@dataclass(frozen=True)
class EvaluationPlan:
    """The evaluation sets of a run, and the routes training may draw on its first town."""

    sets: tuple[EvaluationSet, ...]
    first_town_train_routes: list[int] | None
    """route indices training draws from on the first training town (``None``: all / random)"""
    repetitions: int = 1
    advisor: AdvisorTowns = field(default_factory=lambda: AdvisorTowns({}, "no advisor"))

    def towns_record(self) -> dict[str, Any]:
        """What the run folder's ``towns.json`` holds: each set's network and why it is (un)seen."""
        return {
            "advisor_towns": self.advisor.description,
            "repetitions": self.repetitions,
            "sets": [{"name": s.name, "scenario": str(s.scenario), "routes": str(s.routes_path), "kind": s.kind,
                      "network": s.network, "unseen": s.unseen, "seen_by": list(s.seen_by)} for s in self.sets],
        }


NO_EVALUATION = EvaluationPlan((), None)


@dataclass(frozen=True)
class _Town:
    """An evaluation town before its routes are written."""

    path: Path
    scenario: Scenario
    name: str
    kind: str
    limit: int | None = None


def plan_evaluation_sets(config: RunConfig, routes_dir: Path) -> EvaluationPlan:
    """Write each evaluation set's routes under ``routes_dir`` (once) and say which are unseen.

    Raises:
        UserError: the held-out routes of the first training town cannot be split off, two
            towns share a name, or a network does not build.
    """
    evaluation = config.evaluation
    training = [(path, load_scenario(path)) for path in config.scenario]
    trained = {}
    for path, scenario in training:
        trained.setdefault(scenario_network(scenario), []).append(f"training: {path.name}")
    advisor = advisor_towns(config.advisor)
    for network, town in (advisor.networks or {}).items():
        trained.setdefault(network, []).append(f"advisor data: {town}")
    routes_dir.mkdir(parents=True, exist_ok=True)
    sets: list[EvaluationSet] = []
    train_routes: list[int] | None = None
    if evaluation.seen:
        first_path, first = training[0]
        path = routes_dir / f"seen_{first_path.stem}.xml"
        train_routes = prepare_eval_routes(first, evaluation.routes, evaluation.held_out, evaluation.seed, path)
        network = scenario_network(first)
        sets.append(EvaluationSet(f"{first_path.stem} (seen)", first_path, path, unseen=False, network=network,
                                  kind=map_kind(first), seen_by=tuple(trained[network])))
    for town in _evaluation_towns(config):
        network = scenario_network(town.scenario)
        seen_by = tuple(trained.get(network, ()))
        unseen = not seen_by
        name = town.name if unseen else f"{town.name} (seen)"
        path = routes_dir / f"{'' if unseen else 'seen_'}{town.name}.xml"
        prepare_eval_routes(town.scenario, evaluation.routes, None, evaluation.seed, path, hold_out=False,
                            limit=town.limit)
        sets.append(EvaluationSet(name, town.path, path, unseen=unseen, network=network, kind=town.kind,
                                  seen_by=seen_by))
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise UserError(f"evaluation: two evaluation towns share a name ({names}); rename one (a suite town's "
                        "name, or the scenario file)")
    return EvaluationPlan(tuple(sets), train_routes, evaluation.repetitions, advisor)


def _evaluation_towns(config: RunConfig) -> list[_Town]:
    """``evaluation.scenarios``, then the towns of ``evaluation.suite`` (their first ``routes_per_town`` routes)."""
    evaluation = config.evaluation
    towns = []
    for path in evaluation.scenarios:
        scenario = load_scenario(path)
        towns.append(_Town(path, scenario, path.stem, map_kind(scenario)))
    if evaluation.suite is not None:
        suite = load_suite(evaluation.suite)
        towns += [_Town(t.scenario_path, t.scenario, t.name, t.kind, evaluation.routes_per_town) for t in suite.towns]
    return towns


def headline(results: dict[str, tuple[EvaluationSet, EvaluationResult, int]]) -> dict[str, Any]:
    """One row of scores: route-weighted means over the unseen sets (over the seen ones if none).

    Args:
        results: per set name, the set, its result and its number of routes.

    Returns:
        ``route_completion``, ``driving_score``, ``infraction_penalty``, ``infractions_per_km``,
        ``driving_score_ci`` and ``route_completion_ci`` (``[low, high]`` of the 95 % bootstrap
        interval), ``eval_town_unseen``, the headline's first ``results``/``video`` paths,
        ``towns`` (every set's own scores and intervals, each with ``unseen``, ``network``,
        ``kind`` and ``seen_by``) and ``seen`` (the seen sets' means, or ``None`` without any).
    """
    unseen = [item for item in results.values() if item[0].unseen]
    seen = [item for item in results.values() if not item[0].unseen]
    chosen = unseen or seen
    row: dict[str, Any] = {**_weighted(chosen), "eval_town_unseen": bool(unseen)}
    row["results"] = chosen[0][1].results_path
    row["video"] = chosen[0][1].video_path
    row["towns"] = {
        s.name: {**_weighted([(s, result, n)]), "unseen": s.unseen, "routes": n, "network": s.network,
                 "kind": s.kind, "seen_by": list(s.seen_by), "results": result.results_path}
        for s, result, n in results.values()
    }
    for town in row["towns"].values():
        town.pop("infractions_per_km")
    row["seen"] = _weighted(seen) if seen else None
    return row


def _weighted(items: Sequence[tuple[EvaluationSet, EvaluationResult, int]]) -> dict[str, Any]:
    """Route-weighted means over the sets' routes, with the bootstrap intervals of DS and RC."""
    total = sum(n for _, _, n in items)
    out: dict[str, Any] = {key: sum(getattr(r, key) * n for _, r, n in items) / total for key in SCORE_KEYS}
    for key, routes_field in INTERVAL_KEYS.items():
        towns = [getattr(r, routes_field) for _, r, _ in items]
        if all(towns):  # every set's per-route scores are known
            interval = bootstrap_interval(towns)
            out[f"{key}_ci"] = [interval.low, interval.high]
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
                                                           placement=placement, repetitions=plan.repetitions)
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

    def ready(self) -> bool:
        """Every worker's env is built (never waits)."""
        return all(worker.is_ready() for worker in self.workers.values())

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
            town_identity = {**identity, "town": item.name, "eval_town_unseen": item.unseen, "network": item.network}
            self.workers[item.name].start(agent, label, results_path, video_dir, town_identity)

    def is_done(self) -> bool:
        """Every set's result of the started evaluation is in: :meth:`finish` will not wait."""
        return all(worker.is_done() for worker in self.workers.values())

    def finish(self) -> dict[str, Any]:
        """The headline row (see :func:`headline`) of the evaluation :meth:`start` began (waits)."""
        results = {item.name: (item, self.workers[item.name].finish(), self.workers[item.name].num_routes)
                   for item in self.plan.sets}
        return headline(results)

    def close(self) -> None:
        """Stop every worker; they close their envs (a SUMO shutdown each) at the same time."""
        for worker in self.workers.values():
            worker.request_stop()
        for worker in self.workers.values():
            worker.close()

