"""The columns the findings and the model read, named in one place, with what an older run means.

Some columns are newer than the published runs: a row's regime, the rtt it paid, its clean
windows, the open loop's queue latency. A run that has them is read by them; a run that lacks
them falls back here, and nowhere else: its rows are "steady" (or "open" with a target rate),
the wait a round trip slept is the rtt paid, and `contended` or `saturated` means not clean.
"""

from __future__ import annotations

import pandas as pd

# The regime of a finish_fetch row: backlog | steady | open (docs/method.md#glossary).
REGIME = "regime"
BACKLOG, STEADY, OPEN = "backlog", "steady", "open"
# The rtt a round trip paid, ms: the newer name first, then the older.
RTT_PAID = ("rtt_paid_ms", "rtt_slept_ms")
# Clean windows of a point that re-measures contended windows: clean k of n.
CLEAN_WINDOWS, WINDOWS = "clean_windows", "windows"
# The open loop's queue latency, µs: the newer names first, then the end-to-end columns.
QUEUE_P50 = ("queue_p50_us", "e2e_p50_us")
QUEUE_P99 = ("queue_p99_us", "e2e_p99_us")
# Flags that make a row not clean.
CONTENDED, SATURATED = "contended", "saturated"


def first_present(frame: pd.DataFrame, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` the frame holds with a value, or None."""
    for name in names:
        if name in frame.columns and frame[name].notna().any():
            return name
    return None


def regime(frame: pd.DataFrame) -> pd.Series:
    """Each row's regime: its own column, else open when it had a target rate, else steady."""
    fallback = pd.Series(STEADY, index=frame.index, dtype=object)
    if "target_rate" in frame.columns:
        fallback[frame["target_rate"].fillna(0).astype(float) > 0] = OPEN
    if REGIME not in frame.columns:
        return fallback
    own = frame[REGIME].astype(object).where(frame[REGIME].astype(str).str.strip() != "", None)
    return own.fillna(fallback)


def rtt_paid_ms(frame: pd.DataFrame) -> pd.Series:
    """The rtt each row paid, ms; the nominal rtt where no paid figure was recorded."""
    nominal = frame["rtt_ms"].astype(float) if "rtt_ms" in frame.columns else pd.Series(0.0, frame.index)
    name = first_present(frame, RTT_PAID)
    if name is None:
        return nominal
    return frame[name].astype(float).fillna(nominal)


def _flag(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame[name].astype("boolean").fillna(False).astype(bool)


def clean(frame: pd.DataFrame) -> pd.Series:
    """True for a row measured cleanly: not contended, not saturated, and, in a run that counts
    clean windows, resting on at least one clean window."""
    ok = ~_flag(frame, CONTENDED) & ~_flag(frame, SATURATED)
    if CLEAN_WINDOWS in frame.columns:
        ok &= frame[CLEAN_WINDOWS].fillna(1).astype(float) > 0
    return ok


def closed_loop(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose jobs/s the workers set (backlog, steady): an open row's jobs/s is the rate it
    was offered, which no closed-loop model or throughput ratio may read."""
    return frame[regime(frame) != OPEN]
