"""A suite's scores: each town's mean and 95 % interval, and the suite's route-weighted mean.

Built from the towns' results files (leaderboard layout), so a report can be redrawn from a
finished ``found-rl eval --suite`` folder without driving again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from found_rl.evaluation.intervals import bootstrap_interval
from found_rl.evaluation.results import ResultsFile, scores_by_route
from found_rl.tables import print_table

INTERVAL_SCORES = {"driving_score": "score_composed", "route_completion": "score_route"}
"""Scores reported with an interval, and their key in a record's ``scores``."""


@dataclass(frozen=True)
class TownScores:
    """One town's results, ready for the report.

    Attributes:
        name, kind, network: the town's name, its kind label and its network identity.
        results: its finished results file.
        wall_s: seconds its worker took (``None`` when it had nothing left to run).
    """

    name: str
    kind: str
    network: str
    results: ResultsFile
    wall_s: float | None = None


def suite_report(towns: Sequence[TownScores], header: dict[str, Any]) -> dict[str, Any]:
    """The ``suite.json`` record: ``header``, then per town and for the suite the mean and
    ``[low, high]`` of DS and RC (``{"mean", "low", "high"}``), the mean IP, routes and episodes."""
    per_town = []
    routes: dict[str, list[list[list[float]]]] = {key: [] for key in INTERVAL_SCORES}
    for town in towns:
        record: dict[str, Any] = {"name": town.name, "kind": town.kind, "network": town.network}
        for key, score_key in INTERVAL_SCORES.items():
            town_routes = scores_by_route(town.results.records, score_key)
            routes[key].append(town_routes)
            record[key] = bootstrap_interval([town_routes]).as_dict()
        scores = town.results.global_scores()
        record.update({
            "infraction_penalty": scores.infraction_penalty,
            "routes": len(routes["driving_score"][-1]),
            "episodes": len(town.results.records),
            "results": str(town.results.path),
            "wall_s": town.wall_s,
        })
        per_town.append(record)
    suite: dict[str, Any] = {key: bootstrap_interval(routes[key]).as_dict() for key in INTERVAL_SCORES}
    suite["routes"] = sum(town["routes"] for town in per_town)
    suite["infraction_penalty"] = sum(t["infraction_penalty"] * t["routes"] for t in per_town) / suite["routes"]
    suite["episodes"] = sum(town["episodes"] for town in per_town)
    return {**header, "towns": per_town, "suite": suite}


def _cell(scores: dict[str, float]) -> str:
    return f"{100 * scores['mean']:.1f} [{100 * scores['low']:.1f}, {100 * scores['high']:.1f}]"


def suite_table(report: dict[str, Any]) -> Table:
    """One row per town and a route-weighted suite row: DS and RC in % with their 95 % intervals."""
    table = Table(title=f"{report.get('suite_file', 'suite')}: {report.get('agent', '')}, "
                        f"{report.get('repetitions', '?')} repetition(s) per route")
    for name in ("town", "kind", "routes", "episodes", "DS % [95% CI]", "RC % [95% CI]", "IP %", "wall s"):
        table.add_column(name, justify="left" if name in ("town", "kind") else "right")
    for town in report["towns"]:
        wall = "-" if town.get("wall_s") is None else f"{town['wall_s']:.0f}"
        table.add_row(town["name"], town["kind"], str(town["routes"]), str(town["episodes"]),
                      _cell(town["driving_score"]), _cell(town["route_completion"]),
                      f"{100 * town['infraction_penalty']:.1f}", wall)
    table.add_section()
    suite = report["suite"]
    table.add_row("suite (route-weighted)", "", str(suite["routes"]), str(suite["episodes"]),
                  _cell(suite["driving_score"]), _cell(suite["route_completion"]),
                  f"{100 * suite['infraction_penalty']:.1f}", "")
    return table


def print_suite(report: dict[str, Any], console: Console | None = None) -> None:
    print_table(suite_table(report), console)
