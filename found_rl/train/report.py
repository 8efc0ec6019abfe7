"""What a user reads after each evaluation: the policy beside the reference policies.

Standing still, constant throttle with zero steer, and the expert drive the same held-out
routes, so a reader sees at once whether the policy drives or only moves (a constant throttle
already earns some route completion before it crashes).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from found_rl.tables import print_table

REFERENCE_LABELS = {"still": "standing still", "throttle": "constant throttle, zero steer", "expert": "expert"}


def with_interval(scores: dict[str, Any], key: str) -> str:
    """``72.1 [55.0, 88.3]``: a score in % with its 95 % bootstrap interval where the row has one."""
    interval = scores.get(f"{key}_ci")
    text = f"{100 * scores[key]:.1f}"
    return text if interval is None else f"{text} [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]"


def evaluation_table(row: dict[str, Any], references: dict[str, dict[str, Any]]) -> Table:
    """The policy and the references, per evaluation town (unseen towns first), then the headline.

    RC and DS carry their 95 % bootstrap intervals over routes and repetitions; the headline's
    is route-weighted over the headline towns.
    """
    mark = row.get("mark", row["env_steps"])
    table = Table(title=f"evaluation at mark {mark:,} ({row['env_steps']:,} env steps, "
                        f"{row.get('updates', 0):,} updates)")
    for name in ("policy", "town", "routes", "RC % [95% CI]", "DS % [95% CI]", "IP %"):
        table.add_column(name, justify="left" if name in ("policy", "town") else "right")

    def add(label: str, town: str, scores: dict[str, Any], routes: str = "") -> None:
        table.add_row(
            label, town, routes,
            with_interval(scores, "route_completion"),
            with_interval(scores, "driving_score"),
            f"{100 * scores['infraction_penalty']:.1f}",
        )

    towns = sorted(row.get("towns", {}).items(), key=lambda item: not item[1].get("unseen"))
    for town, scores in towns:
        seen_by = ", ".join(scores.get("seen_by") or []) or "seen"
        add("trained policy", town if scores.get("unseen") else f"{town} [{seen_by}]", scores,
            str(scores.get("routes", "")))
        for name, reference in references.items():
            if town in reference.get("towns", {}):
                add(f"reference: {REFERENCE_LABELS.get(name, name)}", "", reference["towns"][town])
    is_unseen = bool(row.get("eval_town_unseen"))
    headline = "unseen towns, route-weighted" if is_unseen else "seen routes (no unseen town)"
    routes = sum(scores.get("routes", 0) for _, scores in towns if bool(scores.get("unseen")) == is_unseen)
    add("trained policy", f"headline: {headline}", row, str(routes))
    return table


def print_evaluation(
    row: dict[str, Any], references: dict[str, dict[str, Any]], console: Console | None = None
) -> None:
    print_table(evaluation_table(row, references), console or Console(stderr=True))
