"""Run against run: every metric both runs have, A, B, the ratio B/A and a verdict that does not cry wolf.

Rows are matched on their key columns (``STAGE_KEYS``), the protocol first (a file from before the
protocol column is echomq's). A point's value is the mean over its repetitions (finish_fetch,
script_cost); a sweep point carries a median and a stdev over ``reps`` repetitions of its time, and
every other sweep column and race count is measured once a point. Skipped sweep points are left out
and named in a note. Each measurement is judged once: a column derived from another
(us_per_active_job, redis_ceiling_jobs_per_s) is left out. A column is ``exact`` only where the code
fixes it in every row (commands per job or per call); a count the run's timing moves (atomic_sliced's
round trips end with its time budget) is measured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from bench.report.columns import clean, flag, rtt_missed_rows
from bench.report.compare.learnt import TIMED, Learnt, family, read_learnt, threshold
from bench.report.load import FRAMES
from bench.report.ratios import BASE, POINT_COLUMNS, POINT_DEFAULTS, values_by_rep
from bench.report.verdict import (
    BETWEEN_RUNS,
    CLAIM_BEYOND,
    CLEAN_WINDOWS_MIN,
    NOT_JUDGED,
    SHOWN,
    Sample,
    is_missing,
    ratio,
    verdict,
)
from bench.results.finish_fetch import FinishFetchRow
from bench.results.instructions import INSTRUCTIONS_BEYOND, INSTRUCTIONS_LEAST, INSTRUCTIONS_UNPINNED_BEYOND
from bench.results.rows import Metric

# frame -> its row type's key columns, for the frames that have them, in the order the loader reads
STAGE_KEYS: dict[str, tuple[str, ...]] = {f: r.KEYS for f, r in FRAMES.items() if r.KEYS}
# A key value left out of a point's label: echomq's points read as they did before protocols; and
# what a frame without the key implies (a count of a queue that began empty, before its state).
LABEL_DEFAULTS: dict[str, str | int] = {"protocol": "echomq", "server": "", "completed_size": 0}
# A key at this value is left out of a point's name (a run from before the key ran at it).
KEY_DEFAULTS: dict[str, object] = {**FinishFetchRow.IMPLIED, "active_size": 0, **LABEL_DEFAULTS}

# frame -> what compare judges of its points, from its row type
STAGE_METRICS: dict[str, tuple[Metric, ...]] = {f: r.METRICS for f, r in FRAMES.items() if r.METRICS}


def norm_key(value: object) -> object:
    """Key values that compare equal across runs: 1, 1.0 and '1' are one rtt_ms."""
    try:
        number = float(str(value))
    except ValueError:
        return str(value)
    return int(number) if number.is_integer() else number


def point_of(raw_key: object) -> tuple[object, ...]:
    """A point's key from a groupby's: each value normalized (a single key may come bare)."""
    return tuple(norm_key(v) for v in (raw_key if isinstance(raw_key, tuple) else (raw_key,)))


def key_order(key: tuple[object, ...]) -> tuple[tuple[int, object], ...]:
    """Sort keys with numbers as numbers (size 200 before 1000)."""
    return tuple((0, v) if isinstance(v, int | float) else (1, str(v)) for v in key)


def point_label(keys: Sequence[str], values: Sequence[object]) -> str:
    """``strategy=fused workers=4 rtt_ms=1``: a key at its default left out (echomq goes unnamed)."""
    return " ".join(
        f"{k}={v}" for k, v in zip(keys, values, strict=True) if k not in KEY_DEFAULTS or v != KEY_DEFAULTS[k]
    )


def with_known_keys(stage: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with the key columns it lacks whose value is known (no protocol: echomq's)."""
    missing = {k: v for k, v in LABEL_DEFAULTS.items() if k in STAGE_KEYS[stage] and k not in frame.columns}
    return frame.assign(**missing) if missing else frame


def samples(stage: str, frame: pd.DataFrame) -> dict[tuple[object, ...], dict[str, Sample]]:
    """Per point (the stage's key values), each metric's Sample."""
    keys = STAGE_KEYS[stage]
    frame = with_known_keys(stage, frame)
    if frame.empty or any(k not in frame.columns for k in keys):
        return {}
    columns = [m.column for m in STAGE_METRICS[stage] if m.column in frame.columns]
    by_point = frame.groupby(list(keys), sort=True, dropna=False)
    measured = frame[columns].notna().groupby(by_point.ngroup()).any()  # every point's, in one look
    return {
        point_of(raw_key): {
            column: _sample(stage, column, group) for column in columns if measured.at[number, column]
        }
        for number, (raw_key, group) in enumerate(by_point)
    }


def _sample(stage: str, column: str, group: pd.DataFrame) -> Sample:
    if stage == "sweep" and column == "sweep_ms_median" and "sweep_ms_stdev" in group.columns:
        row = group.iloc[0]  # the sweep time's spread: its pyperf stdev over ``reps`` repetitions
        reps: Any = row["reps"] if "reps" in group.columns else None
        n = 2 if is_missing(reps) else int(float(reps))  # an older file without reps: at least two
        return Sample.with_stdev(float(row["sweep_ms_median"]), float(row["sweep_ms_stdev"]), n=n)
    return Sample.of(group[column].tolist())


@dataclass
class Comparison:
    rows: pd.DataFrame  # stage, point, metric, kind, a, b, ratio, cv_a, cv_b, verdict, note
    notes: list[str]
    learnt: Learnt = field(default_factory=Learnt)  # the drift timed figures were judged beyond

    def thresholds(self) -> list[str]:
        """The thresholds this comparison judged by, a line each, and where they came from."""
        timed = self.rows[self.rows["kind"] == TIMED] if not self.rows.empty else self.rows
        families = dict.fromkeys(family(str(r["stage"]), str(r["metric"])) for _, r in timed.iterrows())
        drift = self.learnt.drift
        learnt = [f"{name} {threshold(drift[name]):.0%}" for name in families if name in drift]
        default = [name for name in families if name not in drift]
        lines = [
            f"counts the code fixes: beyond {CLAIM_BEYOND:.0%}; instructions beyond {INSTRUCTIONS_BEYOND:.1%}"
            f" and {INSTRUCTIONS_LEAST:,.0f} a call",
            f"timed figures, on {CLEAN_WINDOWS_MIN}+ clean windows a side, ranges apart, beyond half again "
            f"the drift {self.learnt.source()}: {', '.join(learnt) or 'none'}",
        ]
        if default:
            lines.append(f"no drift learnt, judged beyond {BETWEEN_RUNS:.0%}: {', '.join(default)}")
        return lines

    def count(self, what: str) -> int:
        return int((self.rows["verdict"] == what).sum()) if not self.rows.empty else 0

    def judged_share(self) -> float:
        """The share of the rows that could be judged (not a maximum or a single value) that were."""
        candidates = self.rows[self.rows["verdict"] != SHOWN] if not self.rows.empty else self.rows
        return float((candidates["verdict"] != NOT_JUDGED).mean()) if not candidates.empty else 0.0


COMPARISON_COLUMNS = (
    "stage", "point", "metric", "kind", "a", "b", "ratio", "cv_a", "cv_b", "verdict", "note",
)  # fmt: skip
# the other kinds of row: a count the code fixes, a maximum, a figure measured once a point
COUNT, MAXIMUM, ONCE = "count", "maximum", "once"


def point_flags(stage: str, frame: pd.DataFrame) -> dict[tuple[object, ...], list[str]]:
    """Per point: why its numbers may not be valid (contended or saturated windows, failed audits)."""
    keys = list(STAGE_KEYS[stage])
    if frame.empty or any(k not in frame.columns for k in keys):
        return {}
    audited = frame["audit_ok"] if "audit_ok" in frame.columns else pd.Series(True, index=frame.index)
    marks = pd.DataFrame(
        {
            "contended": flag(frame, "contended"),
            "saturated": flag(frame, "saturated"),
            "audit failed": ~audited.astype("boolean").fillna(True).astype(bool),
        }
    )
    by_point = marks.groupby([frame[k] for k in keys], sort=False, dropna=False).any()
    return {
        point_of(raw_key): [str(name) for name, marked in row.items() if marked]
        for raw_key, row in by_point.iterrows()
    }


def _seed_pinned(frame: pd.DataFrame) -> bool:
    return "seed_pinned" in frame and bool(flag(frame, "seed_pinned").all())


def _stage_metrics(stage: str, a: pd.DataFrame, b: pd.DataFrame, notes: list[str]) -> tuple[Metric, ...]:
    """The stage's metrics, instruction counts judged beyond 1% where a run's seed stayed random."""
    metrics = STAGE_METRICS[stage]
    if not stage.startswith("instructions"):
        return metrics
    if not (random := [name for name, frame in (("A", a), ("B", b)) if not _seed_pinned(frame)]):
        return metrics
    notes.append(
        f"instructions: Redis's seed was random in run {' and '.join(random)};"
        f" a change is claimed beyond {INSTRUCTIONS_UNPINNED_BEYOND:.0%}, not {INSTRUCTIONS_BEYOND:.1%}"
    )
    return tuple(
        replace(m, exact_beyond=INSTRUCTIONS_UNPINNED_BEYOND) if m.exact_beyond == INSTRUCTIONS_BEYOND else m
        for m in metrics
    )


def _row(
    stage: str, point: str, metric: str, kind: str, a: Sample, b: Sample, said: str, note: str
) -> dict[str, object]:
    return {
        "stage": stage, "point": point, "metric": metric, "kind": kind, "a": a.mean, "b": b.mean,
        "ratio": ratio(a.mean, b.mean), "cv_a": a.cv, "cv_b": b.cv, "verdict": said, "note": note,
    }  # fmt: skip


def compare_runs(
    a: Mapping[str, pd.DataFrame], b: Mapping[str, pd.DataFrame], learnt: Learnt | None = None
) -> Comparison:
    """Every metric both runs have, matched on the stage's keys, and finish_fetch's in-run ratios; a
    timed figure is judged on clean windows beyond its ``learnt`` drift (default: the repository's)."""
    learnt = read_learnt() if learnt is None else learnt
    rows: list[dict[str, object]] = []
    notes: list[str] = []
    for stage, keys in STAGE_KEYS.items():
        if stage not in a and stage not in b:
            continue  # neither run has it: nothing to say
        if stage not in a or stage not in b:
            missing = " and ".join(name for name, run in (("A", a), ("B", b)) if stage not in run)
            notes.append(f"{stage}: absent from run {missing}; not compared")
            continue
        frame_a = with_known_keys(stage, _usable(stage, a[stage], notes, "A"))
        frame_b = with_known_keys(stage, _usable(stage, b[stage], notes, "B"))
        points_a, points_b = samples(stage, frame_a), samples(stage, frame_b)
        for side, only in (("A", points_a.keys() - points_b), ("B", points_b.keys() - points_a)):
            if only:
                labels = "; ".join(point_label(keys, k) for k in sorted(only, key=key_order))
                notes.append(f"{stage}: only in run {side}: {labels}")
        clean_a = samples(stage, frame_a[clean(frame_a)])
        clean_b = samples(stage, frame_b[clean(frame_b)])
        windows_a, windows_b = window_counts(stage, frame_a), window_counts(stage, frame_b)
        marked_a, marked_b = point_flags(stage, frame_a), point_flags(stage, frame_b)
        metrics = _stage_metrics(stage, frame_a, frame_b, notes)
        for key in sorted(points_a.keys() & points_b.keys(), key=key_order):
            flags = [f"{f} in A" for f in marked_a[key]] + [f"{f} in B" for f in marked_b[key]]
            (n_a, clean_n_a), (n_b, clean_n_b) = windows_a[key], windows_b[key]
            windows = (
                f"clean windows {clean_n_a} of {n_a} in A, {clean_n_b} of {n_b} in B"
                if clean_n_a < n_a or clean_n_b < n_b
                else ""
            )
            label = point_label(keys, key)
            for metric in metrics:
                sa, sb = points_a[key].get(metric.column), points_b[key].get(metric.column)
                if sa is None or sb is None:
                    continue
                if metric.exact:
                    said = verdict(
                        sa, sb, metric.higher_is_better, exact=True, exact_beyond=metric.exact_beyond,
                        least=metric.least,
                    )  # fmt: skip
                    rows.append(_row(stage, label, metric.column, COUNT, sa, sb, said, ", ".join(flags)))
                    continue
                if metric.maximum or max(sa.n, sb.n) < 2:
                    what = "a maximum: one event" if metric.maximum else "one value a point"
                    kind = MAXIMUM if metric.maximum else ONCE
                    note = ", ".join([what, *flags])
                    rows.append(_row(stage, label, metric.column, kind, sa, sb, SHOWN, note))
                    continue
                ca, cb = clean_a.get(key, {}).get(metric.column), clean_b.get(key, {}).get(metric.column)
                ja, jb = ca or sa, cb or sb  # the clean windows; all of them where none was clean
                said = verdict(
                    ja, jb, metric.higher_is_better, clean=(ca is not None, cb is not None),
                    beyond=learnt.beyond(stage, metric.column), least=metric.least,
                )  # fmt: skip
                note = ", ".join(x for x in (*flags, windows) if x)
                rows.append(_row(stage, label, metric.column, TIMED, ja, jb, said, note))
    if "finish_fetch" in a and "finish_fetch" in b:
        rows += ratio_rows(a["finish_fetch"], b["finish_fetch"], learnt)
    return Comparison(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)), notes, learnt)


def pair_ratios(frame: pd.DataFrame) -> dict[tuple[tuple[object, ...], str], tuple[list[float], list[float]]]:
    """(point, other) -> fused/other jobs/s of each repetition pair: the clean pairs (rtt paid), and all.
    A ratio within one run: its two sides ran minutes apart at most, on one machine and server."""
    frame = frame.assign(**{c: v for c, v in POINT_DEFAULTS.items() if c not in frame.columns})
    if frame.empty or not {"strategy", "rep", "jobs_per_s", *POINT_COLUMNS} <= set(frame.columns):
        return {}
    frame = frame.assign(clean=clean(frame) & ~rtt_missed_rows(frame))  # over two networks: not clean
    out: dict[tuple[tuple[object, ...], str], tuple[list[float], list[float]]] = {}
    for raw_key, group in frame.groupby(list(POINT_COLUMNS), dropna=False, sort=True):
        point = point_of(raw_key)
        jobs = {s: values_by_rep(rows) for s, rows in group.groupby("strategy")}
        clean_reps = {s: values_by_rep(rows).keys() for s, rows in group[group["clean"]].groupby("strategy")}
        base = jobs.get(BASE, {})
        for other, against in jobs.items():
            if other == BASE:
                continue
            reps = sorted(base.keys() & against.keys())
            both = clean_reps.get(BASE, set()) & clean_reps.get(other, set())
            every = [base[r] / against[r] for r in reps if against[r]]
            paired = [base[r] / against[r] for r in reps if against[r] and r in both]
            if every:
                out[(point, str(other))] = (paired, every)
    return out


def ratio_rows(frame_a: pd.DataFrame, frame_b: pd.DataFrame, learnt: Learnt) -> list[dict[str, object]]:
    """fused/other jobs/s a point, judged on its clean pairs beyond the drift learnt for the ratio."""
    rows = []
    ratios_a, ratios_b = pair_ratios(frame_a), pair_ratios(frame_b)
    for point, other in sorted(ratios_a.keys() & ratios_b.keys(), key=lambda k: key_order((*k[0], k[1]))):
        (clean_a, every_a), (clean_b, every_b) = ratios_a[(point, other)], ratios_b[(point, other)]
        metric = f"{BASE}/{other} jobs/s"
        ca, cb = Sample.of(clean_a), Sample.of(clean_b)
        ja = ca if ca.n else Sample.of(every_a)
        jb = cb if cb.n else Sample.of(every_b)
        clean = (ca.n == len(every_a), cb.n == len(every_b))
        said = verdict(
            ja, jb, higher_is_better=True, clean=clean, beyond=learnt.beyond("finish_fetch", metric)
        )
        note = (
            "" if all(clean) else f"clean pairs {ca.n} of {len(every_a)} in A, {cb.n} of {len(every_b)} in B"
        )
        label = point_label(POINT_COLUMNS, point)
        rows.append(_row("finish_fetch", label, metric, TIMED, ja, jb, said, note))
    return rows


def window_counts(stage: str, frame: pd.DataFrame) -> dict[tuple[object, ...], tuple[int, int]]:
    """Per point: its windows (rows) and how many were clean."""
    keys = list(STAGE_KEYS[stage])
    if frame.empty or any(k not in frame.columns for k in keys):
        return {}
    counted = clean(frame).groupby([frame[k] for k in keys], sort=False, dropna=False).agg(["size", "sum"])
    return {
        point_of(raw_key): (int(n), int(c))
        for raw_key, n, c in zip(counted.index, counted["size"], counted["sum"], strict=True)
    }


def _usable(stage: str, frame: pd.DataFrame, notes: list[str], side: str) -> pd.DataFrame:
    """Drop skipped sweep points (no measurement to compare), saying so."""
    if stage != "sweep" or "skipped" not in frame.columns:
        return frame
    skipped = frame["skipped"].fillna("").astype(str).str.strip() != ""
    if skipped.any():
        notes.append(f"sweep: {int(skipped.sum())} skipped point(s) in run {side} not compared")
    return frame[~skipped]
