"""What the end-to-end figure of finish_fetch.csv means: queue latency, or the harness's backlog.

In closed loop (``target_rate`` 0) the producers keep a fixed backlog, so by Little's law a job
waits about backlog / throughput, whatever the queue does. Only an open-loop point below
saturation measures queue latency. The CSV keeps its ``e2e_*`` columns; the report names them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from bench.report.columns import flag
from bench.report.markdown import fmt

BACKLOG_WAIT = "backlog wait"
QUEUE_LATENCY = "queue latency"
E2E_COLUMNS = ("e2e_p50_us", "e2e_p99_us", "e2e_p999_us")


@dataclass(frozen=True)
class E2EMeaning:
    """How the report names the end-to-end figure of one run, its merged histogram's too."""

    name: str  # BACKLOG_WAIT, QUEUE_LATENCY or ENQUEUE_TO_FINISH; its merged histogram's metric
    panel: str  # the latency plot's panel title

    def column(self, column: str) -> str:
        """e2e_p50_us -> backlog_wait_p50_us or queue_latency_p50_us."""
        return column.replace("e2e", self.name.replace(" ", "_"), 1)


CLOSED = E2EMeaning(BACKLOG_WAIT, "backlog wait (closed loop: enqueue to finish, set by the backlog)")
OPEN = E2EMeaning(QUEUE_LATENCY, "queue latency (open loop: enqueue to finish)")
# A run of several regimes (a backlog grid and open points): each row's regime says which it is.
ENQUEUE_TO_FINISH = "enqueue to finish"
MIXED = E2EMeaning(
    ENQUEUE_TO_FINISH, "enqueue to finish (backlog wait in the closed regimes, queue latency in the open one)"
)


def _open_rows(frame: pd.DataFrame) -> pd.Series:
    """The rows offered a rate (a file from before target_rate offered none: closed loop)."""
    if "target_rate" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return pd.to_numeric(frame["target_rate"], errors="coerce").fillna(0.0) > 0


def meaning(frame: pd.DataFrame) -> E2EMeaning:
    """CLOSED when no row offered a rate, OPEN when every row did, else MIXED (by each row's regime)."""
    offered = _open_rows(frame)
    return CLOSED if not offered.any() else OPEN if offered.all() else MIXED


def shown_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows as the report shows them: e2e columns named by meaning; in open loop a saturated
    row's end-to-end cells are left empty (its backlog grew all window: no latency of the queue)."""
    how = meaning(frame)
    shown = frame.copy()
    if how is not CLOSED:  # an open row that saturated measured no latency of the queue
        for column in E2E_COLUMNS:
            if column in shown.columns:
                shown.loc[flag(frame, "saturated") & _open_rows(frame), column] = math.nan
    return shown.rename(columns={c: how.column(c) for c in E2E_COLUMNS if c in shown.columns})


def note(frame: pd.DataFrame) -> list[str]:
    """The sentence above the tables that says what the end-to-end figure is."""
    if "e2e_p50_us" not in frame.columns or frame["e2e_p50_us"].isna().all():
        return []
    if meaning(frame) is CLOSED:
        backlog = (frame["jobs_per_s"] * frame["e2e_p50_us"] / 1e6).dropna()  # Little's law, a repetition
        example = frame.dropna(subset=["jobs_per_s", "e2e_p50_us"]).iloc[0]
        wait_ms = float(example["e2e_p50_us"]) / 1000
        size = f"{fmt(backlog.min())}-{fmt(backlog.max())}" if len(backlog) > 1 else fmt(backlog.iloc[0])
        return [
            "> **End to end is backlog wait here, not queue latency.** "
            "In closed loop the producers keep a fixed backlog of jobs waiting. "
            "By Little's law (L = λ W) a job waits about backlog / throughput, however fast the queue is. "
            f"For example, {example['strategy']} at {fmt(example['workers'])} workers and "
            f"rtt {fmt(example['rtt_ms'])} ms waited {wait_ms:,.1f} ms at "
            f"{fmt(example['jobs_per_s'])} jobs/s. "
            f"That is a backlog of {fmt(backlog.iloc[0])} jobs (every repetition: {size}). "
            "The columns say backlog_wait. "
            "Queue latency comes only from an open-loop run (profile key target-rate) below saturation.",
            "",
        ]
    if meaning(frame) is MIXED:
        return [
            "*End to end is named by each row's regime: backlog wait in the closed ones (backlog, "
            "steady), queue latency in the open one, from each job's scheduled time; a saturated "
            "open row's cells are left empty.*",
            "",
        ]
    if not (saturated := int(flag(frame, "saturated").sum())):
        return ["*End to end is queue latency: an open-loop run, every repetition below saturation.*", ""]
    return [
        "> **End to end is queue latency only where the offered rate was met.** "
        f"The {saturated} saturated repetition(s) fell behind the offered rate, so their wait grew "
        "all window. "
        "Their queue_latency cells are left empty (the merged histograms still hold them).",
        "",
    ]
