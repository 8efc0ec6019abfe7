"""found_rl.tables: result tables are printed whole on a narrow console (a piped CI log)."""

import io

from rich.console import Console
from rich.table import Table

from found_rl.tables import fitting_console, print_table


def wide_table() -> Table:
    table = Table()
    for name in ("route", "status", "infractions"):
        table.add_column(name)
    table.add_row("RouteScenario_10_rep0", "Failed - Simulation timed out", "ped/km 0.00, veh/km 0.00, layout/km 0.00")
    return table


def test_a_table_wider_than_the_console_is_printed_uncut():
    out = io.StringIO()
    print_table(wide_table(), Console(file=out, width=40))
    text = out.getvalue()
    assert "…" not in text
    for cell in ("RouteScenario_10_rep0", "Failed - Simulation timed out", "ped/km 0.00, veh/km 0.00, layout/km 0.00"):
        assert cell in text


def test_a_wide_enough_console_is_kept():
    console = Console(file=io.StringIO(), width=200)
    assert fitting_console(wide_table(), console) is console
