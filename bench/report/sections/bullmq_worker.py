"""The BullMQ worker section: BullMQ's own workers, Node and Python, beside the suite's loops."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.columns import flag
from bench.report.load import RunData
from bench.report.markdown import figure, fmt, markdown_table, missing_note
from bench.report.plots.bullmq_worker import DRIVER_NAMES, driver_order, worker_drivers
from bench.report.quiet import contended_note
from bench.report.ratios import values_by_rep
from bench.results.bullmq_worker import BullmqWorkerMeta
from bench.results.fits import headline_ratio

# A fused driver and the two-call driver of the same client: their jobs/s paired by repetition
FUSED_OVER_TWO_CALL = {"node_manual_fused": "node_manual_two_call", "fused": "two_call"}
# The per-job columns: the median of the repetitions, each with its own number form
MEDIANS = {
    "Redis calls per job": ("redis_calls_per_job", "{:.2f}"),
    "Redis µs per job": ("redis_us_per_job", "{:,.1f}"),
    "client CPU µs per job": ("client_cpu_us_per_job", "{:,.0f}"),
    "Redis CPU %": ("redis_cpu_pct", "{:.0f}"),
}
# A repetition's flags, each said in its reps cell by its column's name: "3 (1 saturated)"
FLAGS = ("contended", "saturated")


def _spread(values: pd.Series) -> str:
    middle = f"{values.median():,.0f}"
    return middle if len(values) < 2 else f"{middle} [{values.min():,.0f}-{values.max():,.0f}]"


def _median(frame: pd.DataFrame, column: str, form: str) -> str:
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return form.format(float(values.median())) if len(values) else "—"


def _ratio(frame: pd.DataFrame, driver: str, concurrency: int) -> str:
    if (other := FUSED_OVER_TWO_CALL.get(driver)) is None:
        return ""
    at = frame["concurrency"] == concurrency
    ratio = headline_ratio(
        values_by_rep(frame[at & (frame["driver"] == driver)]),
        values_by_rep(frame[at & (frame["driver"] == other)]),
    )
    return f"{ratio.median:.2f} [{ratio.lo:.2f}-{ratio.hi:.2f}]" if ratio else ""


def _flagged(frame: pd.DataFrame) -> str:
    """A reps cell's tail: ``" (1 contended, 2 saturated)"``; "" when none is marked."""
    said = [f"{n} {name}" for name in FLAGS if name in frame and (n := int(flag(frame, name).sum()))]
    return f" ({', '.join(said)})" if said else ""


def worker_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A row a concurrency and driver: jobs/s median [min-max], per-job medians, fused ÷ two-call."""
    rows: list[dict[str, Any]] = []
    for concurrency, at in frame.groupby(frame["concurrency"].astype(int)):
        for driver in driver_order(at["driver"]):
            mine = at[at["driver"] == driver]
            rows.append(
                {
                    "concurrency": concurrency,
                    "worker": DRIVER_NAMES.get(driver, driver),
                    "jobs/s median [min-max]": _spread(mine["jobs_per_s"]),
                    **{name: _median(mine, column, form) for name, (column, form) in MEDIANS.items()},
                    "fused ÷ two-call jobs/s, paired": _ratio(frame, driver, concurrency),
                    "window s": _median(mine, "duration_s", "{:.2f}"),
                    "reps": f"{len(mine)}" + _flagged(mine),
                }
            )
    return pd.DataFrame(rows)


def versions_lines(about: BullmqWorkerMeta) -> list[str]:
    """Which BullMQ packages ran, and the scripts BullMQ's Node package called (SHA1, as sent)."""
    node = about.node
    if node.get("absent"):
        return [f"> **No Node rows**: BullMQ's Node package did not run here: {node['absent']}.", ""]
    if not node:
        return []
    given = node.get("scripts_called")
    called = given if isinstance(given, dict) else {}
    shas = ", ".join(f"`{name}` `{sha}`" for name, sha in called.items())
    same = [f"`{name}`" for name, sha in about.scripts_called.items() if called.get(name) == sha]
    alike = f" The same SHA1 (the same Lua) in the Python port: {', '.join(same)}." if same else ""
    return [
        f"BullMQ's Node package {node.get('bullmq')} (ioredis {node.get('ioredis')}, "
        f"node {node.get('node')}); its Python port {about.python_bullmq or '—'}. "
        f"The scripts the Node drivers called, with the SHA1 they were sent by: {shas or '—'}.{alike}",
        "",
    ]


def bullmq_worker_section(data: RunData) -> list[str]:
    """BullMQ's own workers (its Node package's and its Python port's) beside the suite's loops."""
    if (frame := data.frames.get("bullmq_worker")) is None:
        return []  # absent, or not run: the run section's list says which
    lines = ["## BullMQ's own workers against the suite's loops on BullMQ's scripts", ""]
    lines += missing_note(data, "bullmq_worker")
    lines += contended_note(frame, "run(s)")
    about = data.meta.bullmq_worker or BullmqWorkerMeta()
    window = about.window_s
    sized = f"; a run's jobs are sized so its window lasts {fmt(window)} s or more" if window else ""
    lines += [
        "Each worker processes a pre-filled queue in a process of its own, timed from completion "
        f"{fmt(about.window_from or 1000)} to the last{sized}. BullMQ's Node package runs three "
        "ways: its `Worker` (fetch next on: what most BullMQ users run), and its documented manual "
        "processing, `getNextJob` then `moveToCompleted` with fetch next on (fused) or off (two-call), "
        "each job in flight with its own token. The Python Worker is BullMQ's Python port; the suite's "
        "loops call the Python port's scripts at concurrency 1. Redis calls are client-sent commands "
        "(EVALSHA, BZPOPMIN) as INFO commandstats counts them; µs are Redis's own.",
        "",
    ]
    lines += versions_lines(about)
    if about.options:
        lines += [f"*{about.options}.*", ""]
    if saturated := int(flag(frame, "saturated").sum()):
        lines += [f"> **{saturated} run(s) saturated**: the worker driver used its whole core, so it, not "
                  "Redis, set the pace; their jobs/s measure the client.", ""]  # fmt: skip
    if failed := int((~frame["audit_ok"].fillna(True).astype(bool)).sum()):
        lines += [f"> **Audit FAILED in {failed} run(s)**: a job not completed exactly once.", ""]
    lines += [markdown_table(worker_table(frame)), ""]
    lines += figure(worker_drivers(frame, data.path), "no jobs_per_s values")
    return lines
