"""A finish_fetch cell (one strategy at one point) as a report table shows it: its figures rest on
its uncontended windows when it has any; marked c when it has none, s when a window it rests on
saturated the load generator."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from bench.report.columns import flag

CONTENDED, SATURATED = "c", "s"
MARK = "cell_mark"  # the judged frame's column: each row's cell's mark
MARKS_NOTE = {
    CONTENDED: f"{CONTENDED}: every window of the cell was contended (the machine watch marked each one): "
    "its figures are not comparable",
    SATURATED: f"{SATURATED}: the load generator, not Redis, saturated in a window the cell rests on",
}
FIGURES_NOTE = "A cell's figures rest on its uncontended windows when it has any."


def judged(group: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows a cell's figures rest on, and its mark ("" when clean and unsaturated)."""
    clean = group[~flag(group, "contended")]
    used = clean if not clean.empty else group
    mark = CONTENDED if clean.empty and not group.empty else ""
    return used, mark + (SATURATED if flag(used, "saturated").any() else "")


def judged_frame(
    frame: pd.DataFrame, keys: Sequence[str]
) -> tuple[pd.DataFrame, dict[tuple[object, ...], str]]:
    """Each cell (``keys``: the point and the strategy) reduced to the rows it rests on, and each
    marked cell's mark by its key."""
    if frame.empty or any(k not in frame.columns for k in keys):
        return frame, {}
    parts, marks = [], {}
    for key, group in frame.groupby(list(keys), sort=False, dropna=False):
        used, mark = judged(group)
        parts.append(used.assign(**{MARK: mark}))
        if mark:
            marks[key] = mark
    return pd.concat(parts).sort_index(), marks


def with_marks(rows: list[dict[str, object]], groups: Sequence[pd.DataFrame]) -> list[dict[str, object]]:
    """Table rows, one a group of a judged frame's rows, with a marks column when any is marked."""
    found = [cell_mark(group) for group in groups]
    if not any(found):
        return rows
    return [{**row, "marks": mark} for row, mark in zip(rows, found, strict=True)]


def cell_mark(group: pd.DataFrame) -> str:
    """The marks of a judged frame's rows (a table row may gather several cells)."""
    if MARK not in group.columns:
        return ""
    return "".join(sorted({m for mark in group[MARK].fillna("") for m in str(mark)}))


def marked(text: str, mark: str) -> str:
    return f"{text} {mark}" if mark else text


def mark_notes(marks: Iterable[str]) -> list[str]:
    """The note lines under a table whose cells carry these marks (none when none)."""
    found = "".join(marks)
    notes = [note for mark, note in MARKS_NOTE.items() if mark in found]
    return [f"*{'; '.join(notes)}. {FIGURES_NOTE}*", ""] if notes else []
