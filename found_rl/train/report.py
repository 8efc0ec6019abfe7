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
    table = Table(title=f"evaluation at {row['env_steps']:,} env steps ({row.get('updates', 0):,} updates)")
    for name in ("policy", "RC %", "DS %", "IP %"):
        table.add_column(name, justify="left" if name == "policy" else "right")

    def add(label: str, scores: dict[str, Any]) -> None:
        table.add_row(
            label,
            f"{100 * scores['route_completion']:.1f}",
            f"{100 * scores['driving_score']:.1f}",
            f"{100 * scores['infraction_penalty']:.1f}",
        )

    add("trained policy", row)
    for name, scores in references.items():
        add(f"reference: {REFERENCE_LABELS.get(name, name)}", scores)
    return table


def print_evaluation(
    row: dict[str, Any], references: dict[str, dict[str, Any]], console: Console | None = None
) -> None:
    print_table(evaluation_table(row, references), console or Console(stderr=True))
