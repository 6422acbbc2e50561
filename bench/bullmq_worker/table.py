"""The bullmq_worker stage's table on stdout: medians over repetitions per driver."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.bullmq_worker.driver import WINDOW_FROM
from bench.bullmq_worker.plan import Run
from bench.fits import headline_ratio
from bench.results import BullmqWorkerRow


def _median_spread(values: Sequence[float], form: str) -> str:
    middle = form.format(statistics.median(values))
    if len(values) < 2:
        return middle
    return f"{middle} [{form.format(min(values))}-{form.format(max(values))}]"


def table(rows: Sequence[BullmqWorkerRow]) -> str:
    """Medians over repetitions per driver; the suite's loops against BullMQ's Worker at concurrency 1."""
    lines = [
        f"BullMQ's own Worker beside the suite's loops over the same scripts (window: completion "
        f"{WINDOW_FROM:,} to the last; medians [min-max] of the repetitions)",
        f"  {'driver':<16}{'conc':>5}{'jobs/s':>24}{'cpu µs/job':>12}{'calls/job':>11}"
        f"{'redis µs/job':>14}  audit  busy",
    ]
    runs = list(dict.fromkeys(Run(r.driver, r.concurrency) for r in rows))
    for run in runs:
        mine = [r for r in rows if Run(r.driver, r.concurrency) == run]
        audited = sum(1 for r in mine if r.audit_ok)
        rate = _median_spread([r.jobs_per_s for r in mine], "{:.0f}")
        lines.append(
            f"  {run.driver:<16}{run.concurrency:>5}{rate:>24}"
            f"{statistics.median(r.client_cpu_us_per_job for r in mine):>12.0f}"
            f"{statistics.median(r.redis_calls_per_job for r in mine):>11.2f}"
            f"{statistics.median(r.redis_us_per_job for r in mine):>14.1f}  ok {audited}/{len(mine)}"
            f"  {sum(r.contended for r in mine)}/{len(mine)}"
        )
    base = {r.rep: r.jobs_per_s for r in rows if (r.driver, r.concurrency) == ("bullmq_worker", 1)}
    for loop in ("fused", "two_call"):
        other = {r.rep: r.jobs_per_s for r in rows if r.driver == loop}
        ratio = headline_ratio(other, base)  # paired by repetition, as every A/B figure is
        if ratio:
            lines.append(f"  {loop} loop / BullMQ Worker at concurrency 1, jobs/s: {ratio.text()}")
    contended = [r for r in rows if r.contended]
    if contended:
        worst = max(r.foreign_cpu_pct or 0.0 for r in contended)
        lines.append(
            f"  CONTENDED: {len(contended)} of {len(rows)} runs shared the machine with other work "
            f"(foreign CPU up to {worst:.0f}% of a core): their figures are not comparable"
        )
    return "\n".join(lines)
