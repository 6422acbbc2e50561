"""A comparison's markdown (`bench compare`): the runs, what they ran on, headline ratios, verdicts."""

from __future__ import annotations

import math

import pandas as pd

from bench.report.compare.metrics import Comparison, key_order, norm_key, point_label
from bench.report.load import RunData
from bench.report.markdown import markdown_table, percent
from bench.report.ratios import BASE, POINT_COLUMNS, RTT_MISSED, paired_ratios
from bench.report.verdict import SHOWN, VERDICTS, ratio
from bench.results.fits import PairedRatio
from bench.results.meta import RunMeta

# meta.json's fields (bench.results.meta.RunMeta) a comparison names when they differ between A and B
CHANGED_KEYS = (
    "git_sha", "git_dirty", "server_name", "server_version", "redis_version", "redis_source", "profile",
    "python", "redis_py", "hiredis", "cpu_model", "cores",
)  # fmt: skip
CALIBRATION_DIFFERS = 0.10  # a calibration figure this far apart: the machines (or moments) differ


def compare_markdown(a: RunData, b: RunData, comparison: Comparison, changed_only: bool = False) -> str:
    lines = [f"A: {describe(a)}", f"B: {describe(b)}"]
    for key in CHANGED_KEYS:
        if getattr(a.meta, key) != getattr(b.meta, key):
            lines.append(f"changed: {key}: {getattr(a.meta, key)} -> {getattr(b.meta, key)}")
    for run, name in ((a, "A"), (b, "B")):
        if not run.complete:
            lines.append(f"run {name} is INCOMPLETE: {run.meta.reason or 'no reason recorded'}")
    lines += ["", *context_lines(a.meta, b.meta), ""]
    if ratios := headline_lines(a.frames.get("finish_fetch"), b.frames.get("finish_fetch")):
        lines += [*ratios, ""]
    rows = comparison.rows.copy()
    if changed_only:
        # Rows with a note (contended, saturated, audit failed) stay: their numbers are suspect.
        # A shown row (a maximum, a single value) is no change anyone can claim.
        shown = rows["verdict"] == SHOWN
        keep = ((rows["verdict"] != "same") | (rows["note"] != "")) & ~shown
        lines.append(
            f"(rows judged same and without a note left out: {int((~keep & ~shown).sum())}; "
            f"maxima and single values, shown and never judged, left out: {int(shown.sum())})"
        )
        rows = rows[keep]
    if not rows.empty:
        rows["ratio"] = rows["ratio"].map(
            lambda r: "—" if math.isnan(r) else "∞" if math.isinf(r) else f"{r:.3f}"
        )
        rows["cv_a"] = rows["cv_a"].map(percent)
        rows["cv_b"] = rows["cv_b"].map(percent)
        rows = rows.rename(columns={"a": "A", "b": "B", "ratio": "B/A", "cv_a": "cv A", "cv_b": "cv B"})
    lines += [markdown_table(rows), ""]
    lines += [f"note: {n}" for n in comparison.notes]
    lines += [f"thresholds: {line}" for line in comparison.thresholds()]
    counts = ", ".join(f"{v} {comparison.count(v)}" for v in VERDICTS)
    lines.append(f"verdicts: {counts}; judged {comparison.judged_share():.0%} of the rows that could be")
    return "\n".join(lines) + "\n"


def describe(run: RunData) -> str:
    meta = run.meta
    sha = str(meta.git_sha or "?")[:10]
    return (
        f"{run.run_id} (profile {meta.profile or '?'}, {meta.server} {meta.server_release or '?'}, "
        f"git {sha}{'+dirty' if meta.git_dirty else ''})"
    )


def headline_lines(frame_a: pd.DataFrame | None, frame_b: pd.DataFrame | None) -> list[str]:
    """Each run's fused/other ratios at every point both ran, and whether their ranges overlap: ratios
    within one run hold where absolute figures drift (one whose rtt missed: not compared)."""
    if frame_a is None or frame_b is None:
        return []
    a, b = _ratios_by_point(frame_a), _ratios_by_point(frame_b)
    lines: list[str] = []
    for other in dict.fromkeys(other for *_, other in sorted(a.keys() & b.keys(), key=key_order)):
        shared = sorted((k for k in a.keys() & b.keys() if k[-1] == other), key=key_order)
        lines += [f"| {BASE}/{other} jobs/s | A | B | ranges |", "|---|---|---|---|"]
        for key in shared:
            ra, rb = a[key], b[key]
            label = point_label(POINT_COLUMNS, key[:-1])
            texts = (RTT_MISSED if r is None else r.text() for r in (ra, rb))
            ranges = (
                "—" if ra is None or rb is None else "apart" if ra.hi < rb.lo or rb.hi < ra.lo else "overlap"
            )
            lines.append(f"| {label} | {' | '.join(texts)} | {ranges} |")
    return lines


def _ratios_by_point(frame: pd.DataFrame) -> dict[tuple[object, ...], PairedRatio | None]:
    """(point..., other strategy) -> fused/other jobs/s at that point (None: its rtt missed)."""
    ratios = paired_ratios(frame)
    return {
        (*(norm_key(r[c]) for c in POINT_COLUMNS), str(r["other"])): None
        if r["rtt_missed"]
        else PairedRatio(float(r["median"]), float(r["lo"]), float(r["hi"]), int(r["pairs"]))
        for r in ratios.to_dict("records")
    }


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _shown(value: object) -> str:
    if (number := _num(value)) is None:
        return "—" if value is None else str(value)
    return f"{number:.3g}" if abs(number) < 100 else f"{number:,.0f}"


def calibration_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """The two runs' calibrations side by side with B/A, and a line when they differ."""
    cal_a, cal_b = meta_a.calibration, meta_b.calibration
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


def package_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """Every installed package whose version differs between the runs, or that only one has."""
    va, vb = ({str(k): str(v) for k, v in meta.packages.items()} for meta in (meta_a, meta_b))
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


def context_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """All compare says about the two runs' machines and software before its first verdict: the
    calibrations, a busy machine before a run, the system settings and the packages that differ."""
    lines = calibration_lines(meta_a, meta_b)
    for name, meta in (("A", meta_a), ("B", meta_b)):
        before = meta.machine_before
        if before.get("contended"):
            busiest = ", ".join(str(b) for b in before.get("busiest") or []) or "other work"
            lines.append(f"run {name} started on a busy machine: {busiest}")
    sys_a, sys_b = meta_a.system, meta_b.system
    if sys_a and sys_b:
        for key in dict.fromkeys([*sys_a, *sys_b]):
            if sys_a.get(key) != sys_b.get(key):
                lines.append(f"system changed: {key}: {sys_a.get(key)} -> {sys_b.get(key)}")
    return lines + package_lines(meta_a, meta_b)
