"""Print rich tables whole: a result table must never be cut or wrapped to the terminal.

rich shrinks a table to the console width (80 columns when output is piped to a file or
CI log), truncating route ids and wrapping numbers; results copied from such a log are
then wrong or unreadable.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

_UNBOUNDED = 10_000


def fitting_console(table: Table, console: Console | None = None) -> Console:
    """``console`` (default: a new one), widened if ``table`` needs more columns than it has."""
    console = console or Console()
    needed = console.measure(table, options=console.options.update_width(_UNBOUNDED)).maximum
    return console if console.width >= needed else Console(width=needed, file=console.file)


def print_table(table: Table, console: Console | None = None) -> Console:
    """Print ``table`` uncut; returns the console used, for lines printed after it."""
    console = fitting_console(table, console)
    console.print(table)
    return console
