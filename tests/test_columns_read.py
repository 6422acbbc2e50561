"""Reads within writes: every column a report module reads from a result file is a field of a
declared row type (bench/results/stages.py), or a declared rename of an old one, so a report can
never look up a column no writer writes and silently fall back."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.paths import REPO
from bench.report import columns, latency, ratios
from bench.report.compare.metrics import STAGE_KEYS, STAGE_METRICS
from bench.report.load import FRAMES, ID_COLUMNS
from bench.report.plots import finish_fetch as finish_fetch_plots
from bench.report.sections import finish_fetch as finish_fetch_section
from bench.results.finish_fetch import FinishFetchRow
from bench.results.rows import Row, columns_of
from bench.results.stages import FILES


def written(row: type[Row]) -> set[str]:
    """The columns a file of ``row`` holds, under today's names or an older run's."""
    return {*columns_of(row), *row.RENAMED}


EVERY = set().union(*(written(f.row) for f in FILES))


def test_the_findings_and_the_model_read_finish_fetch_columns() -> None:
    """bench/report/columns.py names the finish_fetch columns the findings and the model read."""
    read = {v for name, v in vars(columns).items() if name.isupper() and isinstance(v, str)}
    assert len(read) >= 5
    assert sorted(read - written(FinishFetchRow)) == []


def test_compare_reads_each_frame_by_its_own_row_type() -> None:
    for frame, metrics in STAGE_METRICS.items():
        declared = written(FRAMES[frame])
        assert sorted({m.column for m in metrics} - declared) == [], frame
        assert sorted(set(STAGE_KEYS[frame]) - declared) == [], frame


def test_the_report_column_lists_are_written() -> None:
    finish_fetch = written(FinishFetchRow)
    for listed in (
        ratios.POINT_COLUMNS,
        latency.E2E_COLUMNS,
        finish_fetch_plots.POINT_COLUMNS,
        finish_fetch_section.PACE_COLUMNS,
        finish_fetch_section.DRIVER_COLUMNS,
    ):
        assert sorted(set(listed) - finish_fetch) == []
    assert sorted(set(ID_COLUMNS) - EVERY) == []


def lookups(path: Path) -> set[str]:
    """The names a module asks a frame for: ``"x" in frame.columns``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        columns = isinstance(node, ast.Compare) and any(
            isinstance(c, ast.Attribute) and c.attr == "columns" for c in node.comparators
        )
        if columns and isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            found.add(str(node.left.value))
    return found


def test_a_column_asked_for_by_name_is_written() -> None:
    """``"x" in frame.columns`` asks whether a run's file has a column: one some row type writes."""
    asked = {name: path for path in (REPO / "bench" / "report").rglob("*.py") for name in lookups(path)}
    assert len(asked) >= 10
    made = {"marks"}  # a column the report adds to a table itself before asking
    assert {name: str(path) for name, path in asked.items() if name not in EVERY | made} == {}
