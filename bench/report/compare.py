"""Run against run: every metric both runs have, A, B, the ratio B/A and a verdict that does not cry wolf.

Rows are matched on their key columns (``STAGE_KEYS``), the protocol first: a
bullmq point is compared with the same bullmq point only (a file from before the
protocol column is echomq's, and echomq's points are labelled without it, as they
always were). finish_fetch rows are one per repetition, so each point's value is
the mean over its repetitions; sweep_cost rows carry a median and a stdev over
``reps`` repetitions for the sweep time (and us_per_active_job, which is it
divided by the size); every other sweep column and every race count is measured
once per point. Sweep points skipped in either run are left out and named in a note.

A verdict needs evidence. It is decided in this order (``verdict``):

1. ``unstable`` when the point was ``contended`` in either run (something
   outside the run used the CPU during its window): its numbers say nothing.
2. ``no spread`` when either run measured the metric once per point (a max, a
   p99 of one window, a race count): one value against one value cannot tell a
   change from noise. Two equal values are ``same``. Counts the code fixes
   (``exact``, as the sweep's round trips) are judged by the thresholds alone.
3. ``unstable`` when either run's coefficient of variation (stdev / mean over
   the repetitions) exceeds 10%.
4. ``same`` when B is within 3% of A (the noise threshold of Redis's own
   performance CI), or when Welch's t-test over the repetitions does not find
   the change significant at 95% (as pyperf's compare_to), or when the change is
   significant but at most 5% (the regression threshold: not claimed).
5. ``better`` / ``worse`` beyond 5% and significant, by the metric's direction:
   more jobs/s is better; more µs, ms, round trips, calls, BUSY replies or
   anomalies is worse. A count going from zero to anything is ``worse``.

``unstable`` and ``no spread`` are not regressions: ``--fail-on-regression``
fails on ``worse`` only. Before any verdict, ``context_lines`` shows the two
runs' machine calibrations side by side and every package version that differs,
and ``headline_lines`` each run's headline ratios (bench.report.ratios) at
every point both ran.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.fits import PairedRatio
from bench.report.ratios import BASE, POINT_COLUMNS, paired_ratios

UNSTABLE_CV = 0.10
SAME_WITHIN = 0.03
CLAIM_BEYOND = 0.05
NO_SPREAD = "no spread"
VERDICTS = ("better", "worse", "same", "unstable", NO_SPREAD)

STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "finish_fetch": ("protocol", "strategy", "workers", "concurrency", "job_ms", "rtt_ms"),
    "sweep": ("protocol", "variant", "scenario", "active_size"),
    "race": ("protocol", "variant", "sweepers", "stalled_jobs", "delay_ms"),
    "bullmq_worker": ("protocol", "driver", "concurrency", "job_ms"),
    "sweep_hazard": ("protocol", "client", "stalled_jobs"),
}
# A key value left out of a point's label: echomq's points read as they did before protocols.
LABEL_DEFAULTS = {"protocol": "echomq"}


@dataclass(frozen=True)
class Metric:
    column: str
    higher_is_better: bool = False
    exact: bool = False  # a count the code fixes, not a measurement: no noise to test against


# A key at this value is left out of a point's name (a run from before the key ran at it).
KEY_DEFAULTS: dict[str, object] = {"concurrency": 1, "job_ms": 0}

# Lower is better for every metric but jobs/s, the Redis ceiling and the Locust/raw ratio. The raw
# driver's own columns are left out: it runs once a point, every repetition carries its one value.
FINISH_FETCH_LOWER = (
    "round_trips_per_job", "server_calls_per_job", "server_us_per_job", "cycle_p50_us", "cycle_p90_us",
    "cycle_p99_us", "cycle_p999_us", "cycle_max_us", "e2e_p50_us", "e2e_p99_us",
    "server_commands_per_job", "loadgen_cpu_us_per_job",
)  # fmt: skip
FINISH_FETCH_HIGHER = ("redis_ceiling_jobs_per_s", "locust_raw_jobs_ratio")
FINISH_FETCH_EXACT = ("commands_per_job",)  # the strategy fixes it: 1 fused, 2 two-call
SWEEP_LOWER = (
    "sweep_ms_median", "us_per_active_job", "round_trips", "server_us", "hold_ms_max", "probe_p99_us",
    "probe_max_us", "probe_busy",
)  # fmt: skip
RACE_LOWER = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish", "audit_violations")
WORKER_LOWER = ("client_cpu_us_per_job", "redis_calls_per_job", "redis_us_per_job")
HAZARD_LOWER = ("server_executions", "server_rejected", "probe_busy", "probe_max_us")

STAGE_METRICS: dict[str, tuple[Metric, ...]] = {
    "finish_fetch": (
        Metric("jobs_per_s", higher_is_better=True),
        *map(Metric, FINISH_FETCH_LOWER),
        *(Metric(column, higher_is_better=True) for column in FINISH_FETCH_HIGHER),
        *(Metric(column, exact=True) for column in FINISH_FETCH_EXACT),
    ),
    "sweep": tuple(Metric(c, exact=c == "round_trips") for c in SWEEP_LOWER),
    "race": tuple(map(Metric, RACE_LOWER)),
    "bullmq_worker": (Metric("jobs_per_s", higher_is_better=True), *map(Metric, WORKER_LOWER)),
    "sweep_hazard": tuple(map(Metric, HAZARD_LOWER)),
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
    stdev: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        clean = [float(v) for v in values if not is_missing(v)]
        if not clean:
            return cls(math.nan, math.nan, math.nan, None, 0)
        mean = sum(clean) / len(clean)
        cv = sd = None
        if len(clean) >= 2:
            sd = math.sqrt(sum((v - mean) ** 2 for v in clean) / (len(clean) - 1))
            cv = sd / abs(mean) if mean else (0.0 if sd == 0 else math.inf)
        return cls(mean, min(clean), max(clean), cv, len(clean), sd)

    @classmethod
    def with_stdev(cls, centre: float, stdev: float, scale: float = 1.0, n: int = 2) -> Sample:
        """A median ± stdev over ``n`` repetitions (sweep_cost rows); ``scale`` converts both."""
        if is_missing(stdev) or n < 2:
            return cls(centre * scale, centre * scale, centre * scale)
        cv = stdev / abs(centre) if centre else None
        lo, hi = (centre - stdev) * scale, (centre + stdev) * scale
        return cls(centre * scale, lo, hi, cv, n, abs(stdev * scale))

    @property
    def has_spread(self) -> bool:
        return self.n >= 2 and self.stdev is not None


def is_missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def ratio(a: float, b: float) -> float:
    """B/A; nan when both are zero, inf when only A is."""
    if a == 0:
        return math.nan if b == 0 else math.inf
    return b / a


# Two-sided 95% critical values of Student's t by degrees of freedom; between rows, linear in 1/df.
T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}  # fmt: skip
T95_INFINITE = 1.960


def t_critical(df: float) -> float:
    """The 95% two-sided critical t for ``df`` degrees of freedom (fractional, as Welch gives)."""
    if df <= 1:
        return T95[1]
    rows = sorted(T95.items())
    for (d0, t0), (d1, t1) in itertools.pairwise(rows):
        if d0 <= df <= d1:
            w = (1 / df - 1 / d0) / (1 / d1 - 1 / d0)
            return t0 + w * (t1 - t0)
    last_df, last_t = rows[-1]
    return T95_INFINITE + (last_t - T95_INFINITE) * last_df / df


def significant(a: Sample, b: Sample) -> bool:
    """Welch's t-test at 95%: is the difference of the means beyond the repetitions' noise?"""
    assert a.stdev is not None and b.stdev is not None
    va, vb = a.stdev**2 / a.n, b.stdev**2 / b.n
    if va + vb == 0:
        return a.mean != b.mean  # no noise at all: any difference is real
    t = abs(b.mean - a.mean) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    return t > t_critical(df)


def verdict(
    a: Sample, b: Sample, higher_is_better: bool, *, exact: bool = False, contended: bool = False
) -> str:
    """better | worse | same | unstable | no spread, by the rules of the module docstring."""
    if contended:
        return "unstable"
    if not (a.has_spread and b.has_spread):
        if a.mean == b.mean:
            return "same"
        return _by_threshold(a, b, higher_is_better) if exact else NO_SPREAD
    if any(cv is not None and cv > UNSTABLE_CV for cv in (a.cv, b.cv)):
        return "unstable"
    if a.mean == b.mean or abs(ratio(a.mean, b.mean) - 1) <= SAME_WITHIN or not significant(a, b):
        return "same"
    return _by_threshold(a, b, higher_is_better)


def _by_threshold(a: Sample, b: Sample, higher_is_better: bool) -> str:
    change = ratio(a.mean, b.mean) - 1
    if abs(change) <= CLAIM_BEYOND:
        return "same"
    return "better" if (change > 0) == higher_is_better else "worse"


def norm_key(value: object) -> object:
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
    """``strategy=fused workers=4 concurrency=8 rtt_ms=1``; a key at its default (KEY_DEFAULTS,
    LABEL_DEFAULTS: echomq goes unnamed) is left out, so a point names what sets it apart."""
    defaults = {**KEY_DEFAULTS, **LABEL_DEFAULTS}
    return " ".join(
        f"{k}={v}" for k, v in zip(keys, values, strict=True) if k not in defaults or v != defaults[k]
    )


def with_known_keys(stage: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each key column it lacks whose value is known (a file from before the
    protocol column is echomq's)."""
    missing = {k: v for k, v in LABEL_DEFAULTS.items() if k in STAGE_KEYS[stage] and k not in frame.columns}
    return frame.assign(**missing) if missing else frame


def samples(stage: str, frame: pd.DataFrame) -> dict[tuple[object, ...], dict[str, Sample]]:
    """Per point (the stage's key values), each metric's Sample."""
    keys = STAGE_KEYS[stage]
    frame = with_known_keys(stage, frame)
    if frame.empty or any(k not in frame.columns for k in keys):
        return {}
    out: dict[tuple[object, ...], dict[str, Sample]] = {}
    for raw_key, group in frame.groupby(list(keys), sort=True, dropna=False):
        key = tuple(norm_key(v) for v in raw_key)
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
        scale = float(row[column]) / median if median and not is_missing(row[column]) else 1.0
        reps: Any = row["reps"] if "reps" in group.columns else None
        n = 2 if is_missing(reps) else int(float(reps))  # an older file without reps: at least two
        return Sample.with_stdev(median, stdev, scale, n)
    return Sample.of(group[column].tolist())


@dataclass
class Comparison:
    rows: pd.DataFrame  # stage, point, metric, a, b, ratio, cv_a, cv_b, verdict, note
    notes: list[str]

    def count(self, what: str) -> int:
        return int((self.rows["verdict"] == what).sum()) if not self.rows.empty else 0


COMPARISON_COLUMNS = ("stage", "point", "metric", "a", "b", "ratio", "cv_a", "cv_b", "verdict", "note")


def _flags(frame: pd.DataFrame, stage: str, key: tuple[object, ...]) -> list[str]:
    """Why a point's numbers may not be valid: contended or saturated repetitions, failed audits."""
    keys = STAGE_KEYS[stage]
    mask = pd.Series(True, index=frame.index)
    for k, v in zip(keys, key, strict=True):
        mask &= frame[k].map(norm_key) == v
    rows = frame[mask]
    flags = []
    for column in ("contended", "saturated"):
        if column in rows.columns and any(_truthy(v) for v in rows[column]):
            flags.append(column)
    if "audit_ok" in rows.columns and not all(_truthy(v, missing=True) for v in rows["audit_ok"]):
        flags.append("audit failed")
    return flags


def _truthy(value: object, missing: bool = False) -> bool:
    """A CSV flag as pandas may read it: bool, "True"/"False", 1/0; an empty cell is ``missing``."""
    if is_missing(value):
        return missing
    return str(value).strip().lower() in ("true", "1", "1.0", "yes")


def compare_runs(a: Mapping[str, pd.DataFrame], b: Mapping[str, pd.DataFrame]) -> Comparison:
    """Every metric both runs have, matched on the stage's key columns."""
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
        for key in sorted(points_a.keys() & points_b.keys(), key=key_order):
            flags_a, flags_b = _flags(frame_a, stage, key), _flags(frame_b, stage, key)
            flags = [f"{f} in A" for f in flags_a] + [f"{f} in B" for f in flags_b]
            contended = "contended" in flags_a or "contended" in flags_b
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
                        "verdict": verdict(
                            sa, sb, metric.higher_is_better, exact=metric.exact, contended=contended
                        ),
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


# ---- what the two runs ran on, said before any verdict ----------------------------------------

CALIBRATION_DIFFERS = 0.10  # a calibration figure this far apart: the machines (or moments) differ


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _shown(value: object) -> str:
    number = _num(value)
    if number is None:
        return "—" if value is None else str(value)
    return f"{number:.3g}" if abs(number) < 100 else f"{number:,.0f}"


def calibration_lines(meta_a: Mapping[str, object], meta_b: Mapping[str, object]) -> list[str]:
    """The two runs' calibrations side by side with B/A, and a line when they differ."""
    cal_a, cal_b = meta_a.get("calibration"), meta_b.get("calibration")
    cal_a = cal_a if isinstance(cal_a, Mapping) else {}
    cal_b = cal_b if isinstance(cal_b, Mapping) else {}
    if not cal_a and not cal_b:
        return ["calibration: absent from both runs (runs made before it was recorded)"]
    lines = ["| calibration | A | B | B/A |", "|---|---|---|---|"]
    differ = []
    for key in dict.fromkeys([*cal_a, *cal_b]):
        if key == "took_s":  # how long the calibration took: not a figure of the machine
            continue
        va, vb = _num(cal_a.get(key)), _num(cal_b.get(key))
        r = ratio(va, vb) if va is not None and vb is not None else math.nan
        lines.append(f"| {key} | {_shown(cal_a.get(key))} | {_shown(cal_b.get(key))} | {_shown(r)} |")
        if not math.isnan(r) and abs(r - 1) > CALIBRATION_DIFFERS:
            differ.append(f"{key} x{r:.2f}")
    for name, cal in (("A", cal_a), ("B", cal_b)):
        if not cal:
            lines.append(f"calibration: absent from run {name}")
    if differ:
        lines.append(
            f"the machines (or moments) differ: {', '.join(differ)}; absolute figures are not "
            "comparable, ratios within each run are"
        )
    return lines


def _versions(meta: Mapping[str, object]) -> dict[str, str]:
    packages = meta.get("packages")
    return {str(k): str(v) for k, v in packages.items()} if isinstance(packages, Mapping) else {}


def package_lines(meta_a: Mapping[str, object], meta_b: Mapping[str, object]) -> list[str]:
    """Every installed package whose version differs between the runs, or that only one has."""
    va, vb = _versions(meta_a), _versions(meta_b)
    if not va or not vb:
        missing = " and ".join(n for n, v in (("A", va), ("B", vb)) if not v)
        return [f"packages: not recorded in run {missing}; versions cannot be compared"]
    lines = []
    for name in sorted(va.keys() | vb.keys(), key=str.lower):
        a, b = va.get(name), vb.get(name)
        if a == b:
            continue
        if a is None:
            lines.append(f"package only in B: {name} {b}")
        elif b is None:
            lines.append(f"package only in A: {name} {a}")
        else:
            lines.append(f"package changed: {name} {a} -> {b}")
    return lines


def machine_lines(meta_a: Mapping[str, object], meta_b: Mapping[str, object]) -> list[str]:
    """What the machine looked like before each run, and the system settings that differ."""
    lines = []
    for name, meta in (("A", meta_a), ("B", meta_b)):
        before = meta.get("machine_before")
        if isinstance(before, Mapping) and before.get("contended"):
            busiest = ", ".join(str(b) for b in before.get("busiest") or []) or "other work"
            lines.append(f"run {name} started on a busy machine: {busiest}")
    sys_a, sys_b = meta_a.get("system"), meta_b.get("system")
    if isinstance(sys_a, Mapping) and isinstance(sys_b, Mapping):
        for key in dict.fromkeys([*sys_a, *sys_b]):
            if sys_a.get(key) != sys_b.get(key):
                lines.append(f"system changed: {key}: {sys_a.get(key)} -> {sys_b.get(key)}")
    return lines


def context_lines(meta_a: Mapping[str, object], meta_b: Mapping[str, object]) -> list[str]:
    """All compare says about the two runs' machines and software before its first verdict."""
    return [
        *calibration_lines(meta_a, meta_b),
        *machine_lines(meta_a, meta_b),
        *package_lines(meta_a, meta_b),
    ]


def headline_lines(frame_a: pd.DataFrame | None, frame_b: pd.DataFrame | None) -> list[str]:
    """Each run's fused/other ratios (median of its A B pairs [min-max], bench.report.ratios) at
    every point both ran, and whether the two ranges overlap: ratios within one run hold where
    absolute figures drift."""
    if frame_a is None or frame_b is None:
        return []
    a, b = _ratios_by_point(frame_a), _ratios_by_point(frame_b)
    lines: list[str] = []
    for other in dict.fromkeys(other for *_, other in sorted(a.keys() & b.keys(), key=key_order)):
        shared = sorted((k for k in a.keys() & b.keys() if k[-1] == other), key=key_order)
        lines += [f"| {BASE}/{other} jobs/s | A | B | ranges |", "|---|---|---|---|"]
        for key in shared:
            ra, rb = a[key], b[key]
            apart = ra.hi < rb.lo or rb.hi < ra.lo
            label = point_label(POINT_COLUMNS, key[:-1])
            lines.append(f"| {label} | {ra.text()} | {rb.text()} | {'apart' if apart else 'overlap'} |")
    return lines


def _ratios_by_point(frame: pd.DataFrame) -> dict[tuple[object, ...], PairedRatio]:
    """(point..., other strategy) -> fused/other jobs/s at that point."""
    ratios = paired_ratios(frame)
    return {
        (*(norm_key(r[c]) for c in POINT_COLUMNS), str(r["other"])): PairedRatio(
            float(r["median"]), float(r["lo"]), float(r["hi"]), int(r["pairs"])
        )
        for r in ratios.to_dict("records")
    }
