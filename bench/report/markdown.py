"""Markdown pieces the report is made of: numbers as text, tables, figure links, and a run's gaps."""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

from bench.report.load import FRAMES, ID_COLUMNS, RunData
from bench.report.plots.style import Plot


def fmt(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isinf(number):
            return "∞"
        if number.is_integer() and abs(number) < 1e15:
            return f"{int(number):,}"
        magnitude = abs(number)
        digits = 0 if magnitude >= 1000 else 1 if magnitude >= 100 else 2 if magnitude >= 1 else 3
        return f"{number:,.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub markdown table; numbers right-aligned."""
    if frame.empty:
        return "*(no rows)*"
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]  # fmt: skip
    align = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, align, *body])


def percent(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def figure(plot: Plot | None, why_not: str) -> list[str]:
    if plot is None:
        return [f"*No figure: {why_not}.*", ""]
    return [f"![{plot.title}]({plot.file})", "", f"*{plot.title}: {plot.caption}*", ""]


def flag_rows(frame: pd.DataFrame) -> pd.DataFrame:
    shown = frame.copy()
    if "contended" in shown:
        shown["contended"] = shown["contended"].map(lambda v: "**contended**" if v is True else fmt(v))
    if "saturated" in shown:
        shown["saturated"] = shown["saturated"].map(lambda v: "**saturated**" if v is True else fmt(v))
    if "audit_ok" in shown:
        shown["audit_ok"] = shown["audit_ok"].map(lambda v: "**FAILED**" if v is False else fmt(v))
    return shown


def present(data: RunData, stage: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The stage's columns without those the file lacked, nor those every row holds alike (the run's
    id, protocol and profile, which the Run section shows once) unless they differ; the protocol
    first, where it is shown."""
    drop = set(data.missing_columns.get(stage, []))
    drop |= {c for c in ID_COLUMNS if c in frame.columns and frame[c].nunique(dropna=False) <= 1}
    shown = frame.drop(columns=[c for c in frame.columns if c in drop])
    if "protocol" in shown.columns:
        shown = shown[["protocol", *(c for c in shown.columns if c != "protocol")]]
    return shown


def missing_note(data: RunData, stage: str) -> list[str]:
    if not (missing := data.missing_columns.get(stage)):
        return []
    file = FRAMES[stage].FILE
    return [f"> **Column(s) absent from {file}**: {', '.join(missing)} (an older or partial run); "
            "what needs them is left out.", ""]  # fmt: skip


# What the bullmq protocol runs, said once wherever its numbers are shown.
BULLMQ_NOTE = (
    "bullmq is BullMQ's own Lua and argument builders from the installed bullmq package, run with a "
    "BullMQ Worker's default options: lock 30 s, every completed job kept, no metrics, no limiter."
)


def bullmq_note(frame: pd.DataFrame) -> list[str]:
    if "protocol" in frame.columns and (frame["protocol"] == "bullmq").any():
        return [f"*{BULLMQ_NOTE}*", ""]
    return []
