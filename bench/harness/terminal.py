"""Tables and notes for stdout that fit the terminal: 100 columns at most, folded below that.

A stage prints its table when it ends. On a terminal narrower than 100
columns the cells fold onto more lines instead of the terminal wrapping each
row; in a pipe or a file the table is 100 columns wide ($COLUMNS overrides).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import textwrap
from collections.abc import Collection, Sequence

from rich.console import Console
from rich.table import Table

MAX_WIDTH = 100


def table_width() -> int:
    """The width tables and notes are laid out to."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return min(int(columns), MAX_WIDTH)
    if sys.stdout.isatty():
        return min(shutil.get_terminal_size((MAX_WIDTH, 24)).columns, MAX_WIDTH)
    return MAX_WIDTH


def render_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    keep_whole: Collection[int] = (),
    width: int | None = None,
    gap: int = 2,
) -> str:
    """``rows`` under ``header`` as plain text, ``gap`` spaces between columns, no borders.

    Columns in ``right`` are right-aligned; those in ``keep_whole`` never fold
    (the others fold at spaces, then anywhere, to fit ``width``).
    """
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, gap, 0, 0), header_style="")
    for i, name in enumerate(header):
        table.add_column(
            name,
            justify="right" if i in right else "left",
            no_wrap=i in keep_whole,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or table_width(), color_system=None, highlight=False)
    console.print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


def wrap_note(text: str, width: int | None = None, indent: str = "") -> str:
    """A note under a table, wrapped to the table's width (continuation lines indented)."""
    return textwrap.fill(text, width=width or table_width(), subsequent_indent=indent or "  ")
