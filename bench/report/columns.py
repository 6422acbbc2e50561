"""The finish_fetch columns the findings and the model read (tests/test_columns_read.py holds them
to the row type), named once, with what a run from before a column means, here and nowhere else."""

from __future__ import annotations

import pandas as pd

from bench.results.finish_fetch import Regime, regime_of, rtt_missed

# The regime of a finish_fetch row (Regime: docs/method.md#glossary).
REGIME = "regime"
# The mean wait a simulated round trip paid, ms; and whether it missed its nominal rtt.
RTT_PAID = "rtt_slept_ms"
RTT_MISSED = "rtt_missed"
# The open loop's queue latency, µs: enqueue to finish.
QUEUE_P50, QUEUE_P99 = "e2e_p50_us", "e2e_p99_us"
# The Locust processes a row's window ran on (a saturated window is measured again on one more).
LOAD_PROCESSES = "loadgen_processes"
# Flags that make a row not clean.
CONTENDED, SATURATED = "contended", "saturated"


def filled(frame: pd.DataFrame, **defaults: float) -> pd.DataFrame:
    """The frame with the named columns' empty cells (an older run: the whole column) as their defaults."""
    return frame.assign(**{c: frame[c].fillna(v) if c in frame else v for c, v in defaults.items()})


def measured(frame: pd.DataFrame, name: str) -> bool:
    """The frame holds ``name`` with a value."""
    return name in frame.columns and bool(frame[name].notna().any())


def regime(frame: pd.DataFrame) -> pd.Series:
    """Each row's regime: its own column, else open when it had a target rate, else steady."""
    rates = frame["target_rate"].fillna(0) if "target_rate" in frame.columns else pd.Series(0.0, frame.index)
    fallback = rates.astype(float).map(lambda rate: str(regime_of(rate, Regime.STEADY))).astype(object)
    if REGIME not in frame.columns:
        return fallback
    own = frame[REGIME].astype(object).where(frame[REGIME].astype(str).str.strip() != "", None)
    return own.fillna(fallback)


def rtt_paid_ms(frame: pd.DataFrame) -> pd.Series:
    """The rtt each row paid, ms; the nominal rtt where no paid figure was recorded."""
    nominal = frame["rtt_ms"].astype(float) if "rtt_ms" in frame.columns else pd.Series(0.0, frame.index)
    return frame[RTT_PAID].astype(float).fillna(nominal) if measured(frame, RTT_PAID) else nominal


def rtt_missed_rows(frame: pd.DataFrame) -> pd.Series:
    """True for a row whose rtt paid missed its nominal rtt: its own column, else (a run from before
    it) the rule over the rtt it paid."""
    nominal = frame["rtt_ms"].astype(float) if "rtt_ms" in frame.columns else pd.Series(0.0, frame.index)
    pairs = zip(nominal, rtt_paid_ms(frame), strict=True)
    ruled = pd.Series([rtt_missed(rtt, paid) for rtt, paid in pairs], index=frame.index, dtype=bool)
    if RTT_MISSED not in frame.columns:
        return ruled
    return frame[RTT_MISSED].astype("boolean").fillna(ruled).astype(bool)


def load_processes(frame: pd.DataFrame, run_processes: int) -> pd.Series:
    """Each row's load processes: its own column, never fewer than the profile's ``run_processes``.
    A row never runs on fewer than its profile's (a saturated window adds one), and a row from
    before the column reads as 1 (the row type implies it), so the profile's count stands there."""
    run = pd.Series(run_processes, index=frame.index)
    if LOAD_PROCESSES not in frame.columns:
        return run
    own = pd.to_numeric(frame[LOAD_PROCESSES], errors="coerce").fillna(run)
    return own.clip(lower=run).astype(int)


def flag(frame: pd.DataFrame, name: str) -> pd.Series:
    """Each row's boolean ``name``; False where the cell or the column is missing."""
    if name not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame[name].astype("boolean").fillna(False).astype(bool)


def clean(frame: pd.DataFrame) -> pd.Series:
    """True for a row measured cleanly: not contended, not saturated."""
    return ~flag(frame, CONTENDED) & ~flag(frame, SATURATED)


def closed_loop(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose jobs/s the workers set: an open row's is the rate it was offered."""
    return frame[regime(frame) != Regime.OPEN]
