"""The markdown of a comparison, printed and written by `python -m bench compare`: the two runs
named, what they ran on (compare.machines), each run's headline ratios (bench.report.ratios) at
every point both ran, then the verdict rows and their counts."""

from __future__ import annotations

import math

import pandas as pd

from bench.report.compare.machines import context_lines
from bench.report.compare.metrics import Comparison, key_order, norm_key, point_label
from bench.report.load import RunData
from bench.report.markdown import markdown_table, percent
from bench.report.ratios import BASE, POINT_COLUMNS, RTT_MISSED, paired_ratios
from bench.report.verdict import SHOWN, VERDICTS
from bench.results.fits import PairedRatio

# meta.json's fields (bench.results.meta.RunMeta) a comparison names when they differ between A and B
CHANGED_KEYS = (
    "git_sha", "git_dirty", "server_name", "server_version", "redis_version", "redis_source", "profile",
    "python", "redis_py", "hiredis", "cpu_model", "cores",
)  # fmt: skip


def compare_markdown(a: RunData, b: RunData, comparison: Comparison, changed_only: bool = False) -> str:
    lines = [f"A: {describe(a)}", f"B: {describe(b)}"]
    for key in CHANGED_KEYS:
        if getattr(a.meta, key) != getattr(b.meta, key):
            lines.append(f"changed: {key}: {getattr(a.meta, key)} -> {getattr(b.meta, key)}")
    for run, name in ((a, "A"), (b, "B")):
        if not run.complete:
            lines.append(f"run {name} is INCOMPLETE: {run.meta.reason or 'no reason recorded'}")
    lines += ["", *context_lines(a.meta, b.meta), ""]
    ratios = headline_lines(a.frames.get("finish_fetch"), b.frames.get("finish_fetch"))
    if ratios:
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
    """Each run's fused/other ratios (median of its A B pairs [min-max], bench.report.ratios) at
    every point both ran, and whether the two ranges overlap: ratios within one run hold where
    absolute figures drift ("rtt missed" in place of one whose rtt missed: not compared)."""
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
