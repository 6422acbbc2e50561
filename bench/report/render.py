"""Whole documents: a run's report.md (with its plots), and the markdown of a comparison."""

from __future__ import annotations

import math
from pathlib import Path

from bench.report.compare import NO_SPREAD, VERDICTS, Comparison, context_lines, headline_lines
from bench.report.load import RunData, load_run
from bench.report.machine import machine_section
from bench.report.markdown import markdown_table, percent
from bench.report.sections import (
    bullmq_worker_section,
    finish_fetch_section,
    meta_section,
    race_section,
    sweep_section,
)
from bench.results import write_atomic


def render(data: RunData) -> str:
    lines = meta_section(data)
    lines += machine_section(data)
    lines += finish_fetch_section(data)
    lines += bullmq_worker_section(data)
    lines += sweep_section(data)
    lines += race_section(data)
    return "\n".join(lines).rstrip() + "\n"


def write_report(path: Path) -> Path:
    """Write report.md and the plots into the run folder; returns report.md's path."""
    data = load_run(path)
    report = path / "report.md"
    write_atomic(report, render(data))
    return report


def compare_markdown(a: RunData, b: RunData, comparison: Comparison, changed_only: bool = False) -> str:
    lines = [f"A: {describe(a)}", f"B: {describe(b)}"]
    for key in ("git_sha", "git_dirty", "redis_version", "redis_source", "profile", "python", "redis_py",
                "hiredis", "cpu_model", "cores"):  # fmt: skip
        if a.meta.get(key) != b.meta.get(key):
            lines.append(f"changed: {key}: {a.meta.get(key)} -> {b.meta.get(key)}")
    for run, name in ((a, "A"), (b, "B")):
        if not run.complete:
            lines.append(f"run {name} is INCOMPLETE: {run.meta.get('reason') or 'no reason recorded'}")
    lines += ["", *context_lines(a.meta, b.meta), ""]
    ratios = headline_lines(a.frames.get("finish_fetch"), b.frames.get("finish_fetch"))
    if ratios:
        lines += [*ratios, ""]
    rows = comparison.rows.copy()
    if changed_only:
        # Rows with a note (contended, saturated, audit failed) stay: their numbers are suspect.
        # A `no spread` row is no change anyone can claim: one value against one value.
        spreadless = rows["verdict"] == NO_SPREAD
        keep = ((rows["verdict"] != "same") | (rows["note"] != "")) & ~spreadless
        lines.append(
            f"(rows judged same and without a note left out: {int((~keep & ~spreadless).sum())}; "
            f"rows with no spread to judge by left out: {int(spreadless.sum())})"
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
    counts = ", ".join(f"{v} {comparison.count(v)}" for v in VERDICTS)
    lines.append(f"verdicts: {counts}")
    return "\n".join(lines) + "\n"


def describe(run: RunData) -> str:
    meta = run.meta
    sha = str(meta.get("git_sha") or "?")[:10]
    return (
        f"{run.run_id} (profile {meta.get('profile', '?')}, Redis {meta.get('redis_version', '?')}, "
        f"git {sha}{'+dirty' if meta.get('git_dirty') else ''})"
    )
