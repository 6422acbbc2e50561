"""The BullMQ worker section: BullMQ's own Worker beside the suite's loops on the same scripts."""

from __future__ import annotations

import math

import pandas as pd

from bench.fits import headline_ratio
from bench.report.compare.metrics import STAGE_KEYS, samples
from bench.report.load import RunData
from bench.report.machine import contended_note
from bench.report.markdown import figure, flag_rows, fmt, markdown_table, missing_note, present
from bench.report.plots.bullmq_worker import worker_drivers
from bench.report.ratios import values_by_rep


def bullmq_worker_section(data: RunData) -> list[str]:
    """BullMQ's own asyncio Worker beside the suite's loops over the same scripts."""
    frame = data.frames.get("bullmq_worker")
    if frame is None:
        return []  # absent, or not run: the run section's list says which
    lines = ["## BullMQ's own worker against the suite's loops on BullMQ's scripts", ""]
    lines += missing_note(data, "bullmq_worker")
    lines += contended_note(frame, "run(s)")
    about = data.meta.get("bullmq_worker") or {}
    options = about.get("options") if isinstance(about, dict) else None
    lines += [
        "BullMQ's asyncio `Worker` and the suite's synchronous fused and two_call loops each process a "
        "pre-filled queue in a process of their own, timed from completion "
        f"{fmt(about.get('window_from', 1000))} "
        "to the last. What a BullMQ Python user gets today is the Worker; what the fused call would give "
        "them is the fused loop.",
        "",
    ]
    if options:
        lines += [f"*{options}.*", ""]
    failed = int((~frame["audit_ok"].fillna(True).astype(bool)).sum())
    if failed:
        lines += [f"> **Audit FAILED in {failed} run(s)**: a job not completed exactly once.", ""]
    rows = []
    for key, metrics in samples("bullmq_worker", frame).items():
        row: dict[str, object] = dict(zip(STAGE_KEYS["bullmq_worker"], key, strict=True))
        jobs = metrics.get("jobs_per_s")
        row["reps"] = jobs.n if jobs else 0
        row["jobs/s mean"] = jobs.mean if jobs else math.nan
        row["jobs/s min..max"] = f"{fmt(jobs.lo)}..{fmt(jobs.hi)}" if jobs else "—"
        for column in ("client_cpu_us_per_job", "redis_calls_per_job", "redis_us_per_job"):
            row[column] = metrics[column].mean if column in metrics else math.nan
        rows.append(row)
    lines += ["Per driver, mean over repetitions:", "", markdown_table(pd.DataFrame(rows)), ""]
    base = frame[(frame["driver"] == "bullmq_worker") & (frame["concurrency"] == 1)]
    ratios = []
    for loop in ("fused", "two_call"):
        other = frame[frame["driver"] == loop]
        ratio = headline_ratio(values_by_rep(other), values_by_rep(base))  # the one A/B definition
        if ratio:
            ratios.append({"suite loop": loop, "÷ BullMQ Worker, concurrency 1": ratio.median,
                           "[min-max]": f"[{ratio.lo:.2f}-{ratio.hi:.2f}]",
                           "pairs": ratio.pairs})  # fmt: skip
    if ratios:
        lines += ["jobs/s of the suite's loops over BullMQ's Worker (per repetition pair):", "",
                  markdown_table(pd.DataFrame(ratios)), ""]  # fmt: skip
    lines += figure(worker_drivers(frame, data.path), "no jobs_per_s values")
    lines += ["All runs:", "", markdown_table(flag_rows(present(data, "bullmq_worker", frame))), ""]
    return lines
