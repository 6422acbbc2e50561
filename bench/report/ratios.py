"""finish_fetch's paired ratios as the report shows them: fused over each other strategy, per point.

A point is (workers, concurrency, job_ms, rtt_ms); the repetitions of one A B C
round pair up by their ``rep`` (bench.fits.paired_ratio, as the stage's
terminal table computes it).
"""

from __future__ import annotations

import pandas as pd

from bench.fits import paired_ratio

POINT_COLUMNS = ("protocol", "workers", "concurrency", "job_ms", "rtt_ms")
BASE = "fused"
RATIO_COLUMNS = (*POINT_COLUMNS, "other", "median", "lo", "hi", "pairs")


def shown_point_columns(frame: pd.DataFrame) -> list[str]:
    """The point columns worth a table column: the protocol when the run measured several,
    workers and rtt always, concurrency and job_ms
    when the run has a value other than 1 and 0 (an older run has only those)."""
    several = "protocol" in frame.columns and frame["protocol"].nunique(dropna=True) > 1
    shown = ["protocol", "workers"] if several else ["workers"]
    for column, default in (("concurrency", 1), ("job_ms", 0)):
        if column in frame.columns and (frame[column].fillna(default) != default).any():
            shown.append(column)
    return [*shown, "rtt_ms"]


def paired_ratios(frame: pd.DataFrame, column: str = "jobs_per_s") -> pd.DataFrame:
    """One row per point and strategy other than fused: fused/other ``column`` as the median of
    the repetition pairs, its min and max, and how many pairs."""
    needed = {"strategy", "rep", column, *POINT_COLUMNS}
    if frame.empty or not needed <= set(frame.columns) or BASE not in set(frame["strategy"]):
        return pd.DataFrame(columns=list(RATIO_COLUMNS))
    others = [v for v in dict.fromkeys(frame["strategy"]) if v != BASE]
    rows = []
    for point, group in frame.groupby(list(POINT_COLUMNS), dropna=False, sort=True):
        base = group[group["strategy"] == BASE].set_index("rep")[column]
        for other in others:
            against = group[group["strategy"] == other].set_index("rep")[column]
            if base.empty or against.empty:
                continue
            pairs = pd.concat(
                [base.rename("a"), against.rename("b")], axis=1, join="inner"
            )  # one rep, a pair
            ratio = paired_ratio(pairs.itertuples(index=False, name=None))
            if ratio is None:
                continue
            rows.append(
                {**dict(zip(POINT_COLUMNS, point, strict=True)), "other": other, "median": ratio.median,
                 "lo": ratio.lo, "hi": ratio.hi, "pairs": ratio.pairs}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=list(RATIO_COLUMNS))
