"""Run against run: every metric both runs have, A, B, the ratio B/A and a verdict.

Rows are matched on their key columns (``STAGE_KEYS``). finish_fetch rows are
one per repetition, so each point's value is the mean over its repetitions and
its spread is the repetitions' min..max; sweep_cost rows carry a median and a
stdev over repetitions (spread = median ± stdev); race rows are counts with no
spread. Sweep points skipped in either run are left out and named in a note.

A verdict is decided in this order (``verdict``):

1. ``unstable`` when either run's coefficient of variation (stdev / mean over
   the repetitions) exceeds 10%: the numbers are too noisy to call either way.
2. ``same`` when A and B are equal (two zero counts included), when B is
   within 3% of A, or when the two runs' spreads overlap (the change is inside
   the noise of the repetitions, however large it looks).
3. ``same`` when B differs by more than 3% but at most 5% with spreads apart:
   a change that small is not claimed. Only a change beyond 5% that the
   repetitions do not cover is called.
4. ``better`` / ``worse`` beyond 5%, by the metric's direction: more jobs/s is
   better; more µs, ms, round trips, calls, BUSY replies or anomalies is worse.
   A count going from zero to anything (an anomaly that was never there) is
   ``worse``; from anything to zero, ``better``.

``unstable`` is not a regression: ``--fail-on-regression`` fails on ``worse`` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

UNSTABLE_CV = 0.10
SAME_WITHIN = 0.03
CLAIM_BEYOND = 0.05

STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "finish_fetch": ("variant", "workers", "concurrency", "job_ms", "rtt_ms"),
    "sweep": ("variant", "scenario", "active_size"),
    "race": ("variant", "sweepers", "stalled_jobs", "delay_ms"),
}


@dataclass(frozen=True)
class Metric:
    column: str
    higher_is_better: bool = False


# A key at this value is left out of a point's name (a run from before the key ran at it).
KEY_DEFAULTS: dict[str, object] = {"concurrency": 1, "job_ms": 0}

# Lower is better for every metric but the throughputs and the Locust/raw ratio.
FINISH_FETCH_LOWER = (
    "round_trips_per_job", "server_calls_per_job", "server_us_per_job", "cycle_p50_us", "cycle_p90_us",
    "cycle_p99_us", "cycle_p999_us", "cycle_max_us", "e2e_p50_us", "e2e_p99_us", "commands_per_job",
    "server_commands_per_job", "loadgen_cpu_us_per_job", "raw_cpu_us_per_job",
)  # fmt: skip
FINISH_FETCH_HIGHER = ("redis_ceiling_jobs_per_s", "raw_jobs_per_s", "locust_raw_jobs_ratio")
SWEEP_LOWER = (
    "sweep_ms_median", "us_per_active_job", "round_trips", "server_us", "hold_ms_max", "probe_p99_us",
    "probe_max_us", "probe_busy",
)  # fmt: skip
RACE_LOWER = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish", "audit_violations")

STAGE_METRICS: dict[str, tuple[Metric, ...]] = {
    "finish_fetch": (
        Metric("jobs_per_s", higher_is_better=True),
        *map(Metric, FINISH_FETCH_LOWER),
        *(Metric(column, higher_is_better=True) for column in FINISH_FETCH_HIGHER),
    ),
    "sweep": tuple(map(Metric, SWEEP_LOWER)),
    "race": tuple(map(Metric, RACE_LOWER)),
}

# Sweep columns whose spread is the sweep time's (us_per_active_job is sweep time / size).
SWEEP_SPREAD_FROM_STDEV = ("sweep_ms_median", "us_per_active_job")


@dataclass(frozen=True)
class Sample:
    """One metric at one point of one run: its value and the spread of its repetitions."""

    mean: float
    lo: float
    hi: float
    cv: float | None = None  # None when there is only one value (no spread known)
    n: int = 1

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        clean = [float(v) for v in values if not _missing(v)]
        if not clean:
            return cls(math.nan, math.nan, math.nan, None, 0)
        mean = sum(clean) / len(clean)
        cv = None
        if len(clean) >= 2:
            sd = math.sqrt(sum((v - mean) ** 2 for v in clean) / (len(clean) - 1))
            cv = sd / abs(mean) if mean else (0.0 if sd == 0 else math.inf)
        return cls(mean, min(clean), max(clean), cv, len(clean))

    @classmethod
    def with_stdev(cls, centre: float, stdev: float, scale: float = 1.0) -> Sample:
        """A median ± stdev summary (sweep_cost rows); ``scale`` converts both to another unit."""
        if _missing(stdev):
            return cls(centre * scale, centre * scale, centre * scale)
        cv = stdev / abs(centre) if centre else None
        return cls(centre * scale, (centre - stdev) * scale, (centre + stdev) * scale, cv, 2)


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def ratio(a: float, b: float) -> float:
    """B/A; nan when both are zero, inf when only A is."""
    if a == 0:
        return math.nan if b == 0 else math.inf
    return b / a


def verdict(a: Sample, b: Sample, higher_is_better: bool) -> str:
    """better | worse | same | unstable, by the rules of the module docstring."""
    if any(cv is not None and cv > UNSTABLE_CV for cv in (a.cv, b.cv)):
        return "unstable"
    if a.mean == b.mean:
        return "same"
    change = ratio(a.mean, b.mean) - 1
    if abs(change) <= SAME_WITHIN:
        return "same"
    if a.lo <= b.hi and b.lo <= a.hi:
        return "same"
    if abs(change) <= CLAIM_BEYOND:
        return "same"
    return "better" if (change > 0) == higher_is_better else "worse"


def _norm(value: object) -> object:
    """Key values that compare equal across runs: 1, 1.0 and '1' are one rtt_ms."""
    try:
        number = float(str(value))
    except ValueError:
        return str(value)
    return int(number) if number.is_integer() else number


def key_order(key: tuple[object, ...]) -> tuple[tuple[int, object], ...]:
    """Sort keys with numbers as numbers (size 200 before 1000)."""
    return tuple((0, v) if isinstance(v, int | float) else (1, str(v)) for v in key)


def point_label(keys: Sequence[str], values: Sequence[object]) -> str:
    """``variant=fused workers=4 concurrency=8 rtt_ms=1``; a key at its default (KEY_DEFAULTS)
    is left out, so a point names what sets it apart."""
    return " ".join(
        f"{k}={v}" for k, v in zip(keys, values, strict=True) if k not in KEY_DEFAULTS or v != KEY_DEFAULTS[k]
    )


def samples(stage: str, frame: pd.DataFrame) -> dict[tuple[object, ...], dict[str, Sample]]:
    """Per point (the stage's key values), each metric's Sample."""
    keys = STAGE_KEYS[stage]
    if frame.empty or any(k not in frame.columns for k in keys):
        return {}
    out: dict[tuple[object, ...], dict[str, Sample]] = {}
    for raw_key, group in frame.groupby(list(keys), sort=True, dropna=False):
        key = tuple(_norm(v) for v in raw_key)
        metrics: dict[str, Sample] = {}
        for metric in STAGE_METRICS[stage]:
            if metric.column not in group.columns or group[metric.column].isna().all():
                continue
            metrics[metric.column] = _sample(stage, metric.column, group)
        out[key] = metrics
    return out


def _sample(stage: str, column: str, group: pd.DataFrame) -> Sample:
    if stage == "sweep" and column in SWEEP_SPREAD_FROM_STDEV and "sweep_ms_stdev" in group.columns:
        row = group.iloc[0]
        median, stdev = float(row["sweep_ms_median"]), float(row["sweep_ms_stdev"])
        scale = float(row[column]) / median if median and not _missing(row[column]) else 1.0
        return Sample.with_stdev(median, stdev, scale)
    return Sample.of(group[column].tolist())


@dataclass
class Comparison:
    rows: pd.DataFrame  # stage, point, metric, a, b, ratio, cv_a, cv_b, verdict, note
    notes: list[str]

    def count(self, what: str) -> int:
        return int((self.rows["verdict"] == what).sum()) if not self.rows.empty else 0


COMPARISON_COLUMNS = ("stage", "point", "metric", "a", "b", "ratio", "cv_a", "cv_b", "verdict", "note")


def _flags(frame: pd.DataFrame, stage: str, key: tuple[object, ...]) -> list[str]:
    """Why a point's numbers may not be valid: saturated repetitions, failed audits."""
    if stage != "finish_fetch":
        return []
    keys = STAGE_KEYS[stage]
    mask = pd.Series(True, index=frame.index)
    for k, v in zip(keys, key, strict=True):
        mask &= frame[k].map(_norm) == v
    rows = frame[mask]
    flags = []
    if "saturated" in rows.columns and rows["saturated"].fillna(False).astype(bool).any():
        flags.append("saturated")
    if "audit_ok" in rows.columns and (~rows["audit_ok"].fillna(True).astype(bool)).any():
        flags.append("audit failed")
    return flags


def compare_runs(a: Mapping[str, pd.DataFrame], b: Mapping[str, pd.DataFrame]) -> Comparison:
    """Every metric both runs have, matched on the stage's key columns."""
    rows: list[dict[str, object]] = []
    notes: list[str] = []
    for stage, keys in STAGE_KEYS.items():
        if stage not in a or stage not in b:
            missing = " and ".join(name for name, run in (("A", a), ("B", b)) if stage not in run)
            notes.append(f"{stage}: absent from run {missing}; not compared")
            continue
        frame_a, frame_b = _usable(stage, a[stage], notes, "A"), _usable(stage, b[stage], notes, "B")
        points_a, points_b = samples(stage, frame_a), samples(stage, frame_b)
        for side, only in (("A", points_a.keys() - points_b), ("B", points_b.keys() - points_a)):
            if only:
                labels = "; ".join(point_label(keys, k) for k in sorted(only, key=key_order))
                notes.append(f"{stage}: only in run {side}: {labels}")
        for key in sorted(points_a.keys() & points_b.keys(), key=key_order):
            flags = [f"{f} in A" for f in _flags(frame_a, stage, key)]
            flags += [f"{f} in B" for f in _flags(frame_b, stage, key)]
            for metric in STAGE_METRICS[stage]:
                sa, sb = points_a[key].get(metric.column), points_b[key].get(metric.column)
                if sa is None or sb is None:
                    continue
                rows.append(
                    {
                        "stage": stage,
                        "point": point_label(keys, key),
                        "metric": metric.column,
                        "a": sa.mean,
                        "b": sb.mean,
                        "ratio": ratio(sa.mean, sb.mean),
                        "cv_a": sa.cv,
                        "cv_b": sb.cv,
                        "verdict": verdict(sa, sb, metric.higher_is_better),
                        "note": ", ".join(flags),
                    }
                )
    return Comparison(pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS)), notes)


def _usable(stage: str, frame: pd.DataFrame, notes: list[str], side: str) -> pd.DataFrame:
    """Drop skipped sweep points (no measurement to compare), saying so."""
    if stage != "sweep" or "skipped" not in frame.columns:
        return frame
    skipped = frame["skipped"].fillna("").astype(str).str.strip() != ""
    if skipped.any():
        notes.append(f"sweep: {int(skipped.sum())} skipped point(s) in run {side} not compared")
    return frame[~skipped]
