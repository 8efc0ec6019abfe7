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


def evaluation_table(row: dict[str, Any], references: dict[str, dict[str, Any]]) -> Table:
    """The policy and the references, per evaluation town (unseen towns first), then the headline."""
    mark = row.get("mark", row["env_steps"])
    table = Table(title=f"evaluation at mark {mark:,} ({row['env_steps']:,} env steps, "
                        f"{row.get('updates', 0):,} updates)")
    for name in ("policy", "town", "RC %", "DS %", "IP %"):
        table.add_column(name, justify="left" if name in ("policy", "town") else "right")

    def add(label: str, town: str, scores: dict[str, Any]) -> None:
        table.add_row(
            label, town,
            f"{100 * scores['route_completion']:.1f}",
            f"{100 * scores['driving_score']:.1f}",
            f"{100 * scores['infraction_penalty']:.1f}",
        )

    towns = sorted(row.get("towns", {}).items(), key=lambda item: not item[1].get("unseen"))
    for town, scores in towns:
        add("trained policy", town if scores.get("unseen") else f"{town} [seen]", scores)
        for name, reference in references.items():
            if town in reference.get("towns", {}):
                add(f"reference: {REFERENCE_LABELS.get(name, name)}", "", reference["towns"][town])
    headline = "unseen towns" if row.get("eval_town_unseen") else "seen routes (no unseen town)"
    add("trained policy", f"headline: {headline}", row)
    return table


def print_evaluation(
    row: dict[str, Any], references: dict[str, dict[str, Any]], console: Console | None = None
) -> None:
    print_table(evaluation_table(row, references), console or Console(stderr=True))
