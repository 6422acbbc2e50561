"""finish_fetch's paired ratios as the report shows them: fused over each other strategy, per point.

A point is (workers, concurrency, job_ms, rtt_ms); the repetitions of one A B C
round pair up by their ``rep`` (bench.results.fits.paired_ratio, as the stage's
terminal table computes it).
"""

from __future__ import annotations

import pandas as pd

from bench.results.finish_fetch import FinishFetchRow
from bench.results.fits import headline_ratio

# a point: finish_fetch.csv's key columns but the strategy, which the ratio is between
POINT_COLUMNS = tuple(c for c in FinishFetchRow.KEYS if c != "strategy")
BASE = "fused"
RATIO_COLUMNS = (*POINT_COLUMNS, "other", "median", "lo", "hi", "pairs")
# what a frame without a point column means by it: a run from before the regimes was steady
POINT_DEFAULTS: dict[str, str | float] = {"regime": "steady", "load": 0.0}


def shown_point_columns(frame: pd.DataFrame) -> list[str]:
    """The point columns worth a table column: the protocol when the run measured several, the
    regime, workers and rtt always, an open point's load, concurrency and job_ms
    when the run has a value other than 1 and 0 (an older run has only those)."""
    several = "protocol" in frame.columns and frame["protocol"].nunique(dropna=True) > 1
    shown = ["protocol"] if several else []
    # the regime always (a run from before the column: steady), an open point's load when one ran
    shown += ["regime"] if "regime" in frame.columns else []
    shown += ["load"] if "load" in frame.columns and (frame["load"].fillna(0) != 0).any() else []
    shown.append("workers")
    for column, default in (("queues", 1), ("concurrency", 1), ("job_ms", 0)):
        if column in frame.columns and (frame[column].fillna(default) != default).any():
            shown.append(column)
    return [*shown, "rtt_ms"]


def paired_ratios(frame: pd.DataFrame, column: str = "jobs_per_s") -> pd.DataFrame:
    """One row per point and strategy other than fused: fused/other ``column`` as the median of
    the repetition pairs, its min and max, and how many pairs."""
    frame = frame.assign(**{c: v for c, v in POINT_DEFAULTS.items() if c not in frame.columns})
    needed = {"strategy", "rep", column, *POINT_COLUMNS}
    if frame.empty or not needed <= set(frame.columns) or BASE not in set(frame["strategy"]):
        return pd.DataFrame(columns=list(RATIO_COLUMNS))
    others = [v for v in dict.fromkeys(frame["strategy"]) if v != BASE]
    rows = []
    for point, group in frame.groupby(list(POINT_COLUMNS), dropna=False, sort=True):
        base = values_by_rep(group[group["strategy"] == BASE], column)
        for other in others:
            against = values_by_rep(group[group["strategy"] == other], column)
            ratio = headline_ratio(base, against)  # paired by repetition
            if ratio is None:
                continue
            rows.append(
                {**dict(zip(POINT_COLUMNS, point, strict=True)), "other": other, "median": ratio.median,
                 "lo": ratio.lo, "hi": ratio.hi, "pairs": ratio.pairs}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=list(RATIO_COLUMNS))


def values_by_rep(rows: pd.DataFrame, column: str = "jobs_per_s") -> dict[int, float]:
    """``column`` by repetition, for fits.headline_ratio (rows without a repetition left out)."""
    rows = rows[rows["rep"].notna()]
    return {int(rep): float(value) for rep, value in zip(rows["rep"], rows[column], strict=True)}
