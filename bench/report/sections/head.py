"""How a stage's section opens: its heading, then either the line saying the run lacks the stage's
file, or the notes on its missing columns and contended points."""

from __future__ import annotations

import pandas as pd

from bench.report.load import STAGE_FILES, RunData
from bench.report.markdown import missing_note
from bench.report.quiet import contended_note


def section_head(
    data: RunData, stage: str, title: str, counted: str
) -> tuple[list[str], pd.DataFrame | None]:
    """The section's first lines and the stage's frame (None when the run has no file for it);
    ``counted`` names what a contended row is ("repetition(s)", "point(s)")."""
    lines = [f"## {title}", ""]
    frame = data.frames.get(stage)
    if frame is None:
        return [*lines, f"*Absent: this run has no {STAGE_FILES[stage].FILE}.*", ""], None
    return [*lines, *missing_note(data, stage), *contended_note(frame, counted)], frame
