"""The bullmq_worker stage's terminal table: medians [min-max] of the repetitions, a row a run."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from bench.harness.machine import SATURATED_CPU_PCT
from bench.harness.terminal import contended_note, table_width
from bench.results.bullmq_worker import BullmqWorkerRow
from bench.results.fits import headline_ratio
from bench.stages.bullmq_worker.plan import Point
from bench.stages.bullmq_worker.worker_process import WINDOW_FROM


def _median_spread(values: Sequence[float], form: str) -> str:
    middle = form.format(statistics.median(values))
    if len(values) < 2:
        return middle
    return f"{middle} [{form.format(min(values))}-{form.format(max(values))}]"


def _median_of(values: Iterable[float | None]) -> str:
    """The median of the values measured, whole; "-" when none was."""
    measured = [v for v in values if v is not None]
    return f"{statistics.median(measured):.0f}" if measured else "-"


def _by_rep(rows: Sequence[BullmqWorkerRow], run: Point) -> dict[int, float]:
    return {r.rep: r.jobs_per_s for r in rows if Point(r.driver, r.concurrency) == run}


def ratio_lines(rows: Sequence[BullmqWorkerRow]) -> list[str]:
    """Node's fused over its two-call at each concurrency, and the suite's loops over the Python
    Worker at concurrency 1: jobs/s paired by repetition, as every A/B figure is."""
    lines = []
    for concurrency in dict.fromkeys(r.concurrency for r in rows):
        fused = _by_rep(rows, Point("node_manual_fused", concurrency))
        ratio = headline_ratio(fused, _by_rep(rows, Point("node_manual_two_call", concurrency)))
        if ratio:
            lines.append(
                f"  Node manual fused / two-call at concurrency {concurrency}, jobs/s: {ratio.text()}"
            )
    base = _by_rep(rows, Point("bullmq_worker", 1))
    for loop in ("fused", "two_call"):
        if ratio := headline_ratio(_by_rep(rows, Point(loop, 1)), base):
            lines.append(f"  suite {loop} loop / Python Worker at concurrency 1, jobs/s: {ratio.text()}")
    return lines


def table(rows: Sequence[BullmqWorkerRow], node_absent: str | None = None) -> str:
    """Medians over repetitions per driver and concurrency, then the paired ratios."""
    lines = [
        "BullMQ's own workers beside the suite's loops over its scripts",
        f"(window: completion {WINDOW_FROM:,} to the last; medians [min-max] of the repetitions)",
        f"  {'driver':<21}{'conc':>5}{'jobs/s':>20}{'win s':>7}{'cpu µs':>8}{'calls':>7}"
        f"{'redis µs':>9}{'redis %':>8}  audit  busy  sat",
    ]
    runs = sorted(dict.fromkeys(Point(r.driver, r.concurrency) for r in rows), key=lambda r: r.concurrency)
    for run in runs:
        mine = [r for r in rows if Point(r.driver, r.concurrency) == run]
        audited = sum(1 for r in mine if r.audit_ok)
        rate = _median_spread([r.jobs_per_s for r in mine], "{:.0f}")
        lines.append(
            f"  {run.driver:<21}{run.concurrency:>5}{rate:>20}"
            f"{statistics.median(r.duration_s for r in mine):>7.2f}"
            f"{statistics.median(r.client_cpu_us_per_job for r in mine):>8.0f}"
            f"{statistics.median(r.redis_calls_per_job for r in mine):>7.2f}"
            f"{statistics.median(r.redis_us_per_job for r in mine):>9.1f}"
            f"{_median_of(r.redis_cpu_pct for r in mine):>8}  ok {audited}/{len(mine)}"
            f"  {sum(r.contended for r in mine)}/{len(mine)}  {sum(r.saturated for r in mine)}/{len(mine)}"
        )
    lines += ratio_lines(rows)
    if node_absent:
        lines.append(f"  No Node rows: {node_absent}")
    if saturated := sum(r.saturated for r in rows):
        lines.append(
            f"  SATURATED: in {saturated} of {len(rows)} runs the driver used {SATURATED_CPU_PCT:g}% of a "
            "core or more: it, not Redis, set the pace"
        )
    if contended := [r for r in rows if r.contended]:
        foreign, steal = [r.foreign_cpu_pct for r in contended], [r.steal_pct for r in contended]
        note = contended_note(len(contended), len(rows), "runs", foreign, steal, width=table_width() - 2)
        lines += [f"  {line}" for line in note.splitlines()]
    return "\n".join(lines)
