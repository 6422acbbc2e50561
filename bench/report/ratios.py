"""finish_fetch's paired ratios as the report shows them: fused over each other strategy, per point,
the repetitions of one A B C round paired by their ``rep`` (as the stage's terminal table pairs
them). A ratio whose rtt missed compares two networks: RTT_MISSED stands in its place.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.columns import rtt_missed_rows, rtt_paid_ms
from bench.results.finish_fetch import RTT_TOLERANCE, RTT_TOLERANCE_MS, FinishFetchRow, rtt_missed
from bench.results.fits import headline_ratio

# a point: finish_fetch.csv's key columns but the strategy, which the ratio is between
POINT_COLUMNS = tuple(c for c in FinishFetchRow.KEYS if c != "strategy")
BASE = "fused"
RATIO_COLUMNS = (*POINT_COLUMNS, "other", "median", "lo", "hi", "pairs", "rtt_missed")
RTT_MISSED = "rtt missed"  # what a table shows for a ratio whose rtt missed
RTT_MISSED_WHY = (
    f"a strategy's rtt paid was over the nominal rtt, or the two strategies' apart, by more than "
    f"{RTT_TOLERANCE:.0%} or {RTT_TOLERANCE_MS:g} ms, the larger: the ratio compares two networks"
)
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


def paired_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """A row a point and strategy but fused: fused/other jobs/s, the pairs' median, min and max."""
    frame = frame.assign(**{c: v for c, v in POINT_DEFAULTS.items() if c not in frame.columns})
    needed = {"strategy", "rep", "jobs_per_s", *POINT_COLUMNS}
    if frame.empty or not needed <= set(frame.columns) or BASE not in set(frame["strategy"]):
        return pd.DataFrame(columns=list(RATIO_COLUMNS))
    others = [v for v in dict.fromkeys(frame["strategy"]) if v != BASE]
    frame = frame.assign(rtt_missed=rtt_missed_rows(frame), rtt_paid=rtt_paid_ms(frame))
    sides = ["strategy", "rep", "jobs_per_s", "rtt_paid", "rtt_missed"]
    rows = []
    for point, group in frame.groupby(list(POINT_COLUMNS), dropna=False, sort=True):
        at = dict(zip(POINT_COLUMNS, point, strict=True))
        rtt = float(group["rtt_ms"].iloc[0])
        by: dict[object, list[list[Any]]] = {}  # a strategy's rows: rep, jobs/s, rtt paid, missed
        for strategy, *row in zip(*(group[c].tolist() for c in sides), strict=True):
            by.setdefault(strategy, []).append(row)
        reps = {s: {int(r[0]): float(r[1]) for r in mine if not pd.isna(r[0])} for s, mine in by.items()}
        for other in others:
            a, b = reps.get(BASE, {}), reps.get(other, {})  # jobs/s by repetition, as values_by_rep
            ratio = headline_ratio(a, b)  # paired by repetition
            if ratio is None:
                continue
            # the rows the pairs rest on: a row of either side missed, or the two sides paid two networks
            used = [[row for row in by.get(s, []) if row[0] in a.keys() & b.keys()] for s in (BASE, other)]
            paid = [pd.Series([row[2] for row in side], dtype=float).median() for side in used]
            missed = any(row[3] for side in used for row in side) or rtt_missed(rtt, max(paid), min(paid))
            rows.append(
                {**at, "other": other, "median": ratio.median, "lo": ratio.lo, "hi": ratio.hi,
                 "pairs": ratio.pairs, "rtt_missed": bool(missed)}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=list(RATIO_COLUMNS))


def ratio_text(ratio: pd.Series) -> str:
    """A row of paired_ratios as a table quotes it: median [min-max], or RTT_MISSED."""
    return (
        RTT_MISSED if ratio["rtt_missed"] else f"{ratio['median']:.2f} [{ratio['lo']:.2f}-{ratio['hi']:.2f}]"
    )


def quoted(ratios: pd.DataFrame) -> pd.DataFrame:
    """The rows of paired_ratios a figure may draw: those whose rtt did not miss."""
    return ratios[~ratios["rtt_missed"].astype(bool)] if not ratios.empty else ratios


def rtt_note(ratios: pd.DataFrame) -> list[str]:
    """The note under a table quoting ``ratios``: what RTT_MISSED means, when the table shows it."""
    shown = "rtt_missed" in ratios.columns and bool(ratios["rtt_missed"].any())
    return [f"*{RTT_MISSED}: {RTT_MISSED_WHY}.*", ""] if shown else []


def values_by_rep(rows: pd.DataFrame) -> dict[int, float]:
    """jobs/s by repetition, for fits.headline_ratio (rows without a repetition left out)."""
    rows = rows[rows["rep"].notna()]
    return {int(rep): float(value) for rep, value in zip(rows["rep"], rows["jobs_per_s"], strict=True)}
