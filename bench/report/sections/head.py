"""How a stage's section opens: its heading, then the stage's file absent, or its notes."""

from __future__ import annotations

import pandas as pd

from bench.report.load import STAGE_FILES, RunData
from bench.report.markdown import missing_note
from bench.report.quiet import contended_note


def section_head(
    data: RunData, stage: str, title: str, counted: str
) -> tuple[list[str], pd.DataFrame | None]:
    """The section's first lines and its frame (None: no file); ``counted`` names a contended row."""
    lines = [f"## {title}", ""]
    if (frame := data.frames.get(stage)) is None:
        return [*lines, f"*Absent: this run has no {STAGE_FILES[stage].FILE}.*", ""], None
    return [*lines, *missing_note(data, stage), *contended_note(frame, counted)], frame
