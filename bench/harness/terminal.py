"""Tables and notes for stdout, 100 columns at most: on a narrower terminal the cells fold onto
more lines instead of the terminal wrapping each row ($COLUMNS overrides the width)."""

from __future__ import annotations

import io
import os
import shutil
import sys
import textwrap
from collections.abc import Collection, Sequence

from rich.console import Console
from rich.table import Table

from bench.harness.machine import FOREIGN_LIMIT_PCT, STEAL_LIMIT_PCT

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
    leading: int = 0,
) -> str:
    """``rows`` under ``header`` as plain text, no borders; columns in ``keep_whole`` never fold,
    and ``leading`` blank lines between rows keep a row whose text folds from reading as several."""
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, gap, 0, 0), header_style="")
    for i, name in enumerate(header):
        table.add_column(
            name,
            justify="right" if i in right else "left",
            no_wrap=i in keep_whole,
            overflow="fold",
        )
    for n, row in enumerate(rows):
        if n:
            for _ in range(leading):  # rich draws no separator without a box: empty rows are the gap
                table.add_row(*[""] * len(header))
        table.add_row(*row)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or table_width(), color_system=None, highlight=False)
    console.print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


def wrap_note(text: str, width: int | None = None, indent: str = "") -> str:
    """A note under a table, wrapped to the table's width (continuation lines indented)."""
    return textwrap.fill(text, width=width or table_width(), subsequent_indent=indent or "  ")


def fold(text: str) -> str:
    """Every line of ``text`` within the table width: a longer one folded at spaces, its
    continuation indented under its start, so it never reads as a row of its own."""
    width = table_width()
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, subsequent_indent=lead + "    ", break_on_hyphens=False) or [""]
    return "\n".join(out)


def plural(count: int, noun: str) -> str:
    """``1 execution``, ``2 executions``: a count with its noun in the singular when it is one."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def contended_note(
    count: int,
    total: int,
    what: str,
    foreign_cpu_pct: Sequence[float | None],
    steal_pct: Sequence[float | None],
    consequence: str = "their figures are not comparable",
    width: int | None = None,
) -> str:
    """The CONTENDED line under a table: how many of the ``what`` shared the machine, and what was
    high, foreign CPU or steal, with both figures (the worst over the contended ones)."""
    foreign = max((v for v in foreign_cpu_pct if v is not None), default=0.0)
    steal = max((v for v in steal_pct if v is not None), default=0.0)
    over = {"foreign CPU": foreign > FOREIGN_LIMIT_PCT, "steal": steal > STEAL_LIMIT_PCT}
    cause = " and ".join(name for name, high in over.items() if high) or "foreign CPU or steal"
    return wrap_note(
        f"CONTENDED: {count} of {total} {what} shared the machine, {cause} high (foreign CPU up to "
        f"{foreign:.0f}% of a core, limit {FOREIGN_LIMIT_PCT:g}%; steal up to {steal:.1f}%, limit "
        f"{STEAL_LIMIT_PCT:g}%): {consequence}",
        width,
    )
