"""A console summary of a results file (leaderboard percentages, per route and global)."""

from __future__ import annotations

import statistics

from rich.console import Console
from rich.table import Table

from found_rl.evaluation.intervals import bootstrap_interval
from found_rl.evaluation.results import ResultsFile, scores_by_route
from found_rl.events import InfractionKind
from found_rl.tables import print_table

_RATE_COLUMNS = (
    ("ped/km", InfractionKind.COLLISION_PEDESTRIAN),
    ("veh/km", InfractionKind.COLLISION_VEHICLE),
    ("layout/km", InfractionKind.COLLISION_LAYOUT),
    ("red/km", InfractionKind.RED_LIGHT),
    ("stop/km", InfractionKind.STOP_SIGN),
)


def print_summary(results: ResultsFile, console: Console | None = None) -> None:
    """One row per record, a mean row (DS, RC, IP in %, status, infractions, simulated and wall time)
    and the 95 % bootstrap interval of DS and RC over routes and repetitions."""
    table = Table(title=f"{results.path}  ({len(results.records)}/{results.total} episodes)")
    for name in ("route", "status", "DS %", "RC %", "IP %", "infractions", "sim time s", "wall time s"):
        table.add_column(name, justify="right" if name.endswith(("%", " s")) else "left")
    sim_s, wall_s = [], []
    for record in results.records:
        scores, meta = record["scores"], record["meta"]
        counts = ", ".join(f"{k} {n}" for k, n in meta["infraction_counts"].items() if n)
        sim_s.append(float(meta["duration_game"]))
        wall_s.append(float(meta["duration_system"]))
        table.add_row(
            record["route_id"],
            record["status"],
            f"{scores['score_composed']:.1f}",
            f"{scores['score_route']:.1f}",
            f"{scores['score_penalty']:.1f}",
            counts or "-",
            f"{sim_s[-1]:.0f}",
            f"{wall_s[-1]:.1f}",
        )
    totals = results.global_scores()
    table.add_section()
    table.add_row(
        "mean",
        "",
        f"{100 * totals.driving_score:.1f}",
        f"{100 * totals.route_completion:.1f}",
        f"{100 * totals.infraction_penalty:.1f}",
        ", ".join(f"{name} {totals.infractions_per_km[kind]:.2f}" for name, kind in _RATE_COLUMNS),
        f"{statistics.fmean(sim_s):.0f}" if sim_s else "",
        f"{statistics.fmean(wall_s):.1f}" if wall_s else "",
    )
    if results.records:
        ds, rc = (bootstrap_interval([scores_by_route(results.records, key)])
                  for key in ("score_composed", "score_route"))
        table.add_row("95% CI", "", f"[{100 * ds.low:.1f}, {100 * ds.high:.1f}]",
                      f"[{100 * rc.low:.1f}, {100 * rc.high:.1f}]", "", "", "", "")
    print_table(table, console)
