"""The stage's short table on stdout: medians over repetitions, and the A/B ratios of each point."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from bench.fits import paired_ratio
from bench.results import FinishFetchRow

# (header, attribute of a TableRow, format)
TABLE_METRICS = (
    ("jobs/s", "row.jobs_per_s", "{:.0f}"),
    ("rt/job", "row.round_trips_per_job", "{:.2f}"),
    ("cmd/job", "row.commands_per_job", "{:.2f}"),
    ("cycle p50 µs", "row.cycle_p50_us", "{:.0f}"),
    ("cycle p99 µs", "row.cycle_p99_us", "{:.0f}"),
    ("redis µs/job", "row.server_us_per_job", "{:.1f}"),
    ("redis ceiling/s", "row.redis_ceiling_jobs_per_s", "{:.0f}"),
    ("loadgen cpu µs/job", "loadgen_cpu_us_per_job", "{:.0f}"),  # the harness's own cost
    ("raw cpu µs/job", "row.raw_cpu_us_per_job", "{:.0f}"),  # the same loops without Locust
    ("locust/raw", "row.locust_raw_jobs_ratio", "{:.2f}"),
)
POINT_HEADER = ["workers", "conc", "job ms", "rtt ms*", "slept ms"]


@dataclass(frozen=True)
class TableRow:
    """A run as the table shows it: its CSV row, and two figures only the table shows."""

    row: FinishFetchRow
    rtt_slept_ms: float  # the mean time a simulated round trip actually slept
    loadgen_cpu_us_per_job: float


def _median_spread(values: Sequence[float], form: str, spread: bool = True) -> str:
    if not values:
        return "-"
    middle = form.format(statistics.median(values))
    if len(values) == 1 or not spread:
        return middle
    return f"{middle} [{form.format(min(values))}-{form.format(max(values))}]"


def _limit(runs: Sequence[TableRow]) -> str:
    """The side most repetitions named as the limit."""
    named = Counter(r.row.limit for r in runs if r.row.limit)
    return named.most_common(1)[0][0] if named else "-"


def _point(r: TableRow) -> tuple[int, int, float, float]:
    return (r.row.workers, r.row.concurrency, r.row.job_ms, r.row.rtt_ms)


def table(runs: Sequence[TableRow], strategies: Sequence[str], notes: Sequence[str] = ()) -> str:
    """Medians over repetitions; a ratio row pairs the runs of each A B C round, [min-max] of the
    pairs: the first strategy over each other one."""
    names = [name for name, _, _ in TABLE_METRICS]
    header = [*POINT_HEADER, "strategy", *names, "limit", "saturated", "audit"]
    lines = [header]
    metrics = [(attrgetter(key), form) for _, key, form in TABLE_METRICS]
    for point in sorted({_point(r) for r in runs}):
        workers, concurrency, job_ms, rtt = point
        here = [r for r in runs if _point(r) == point]
        by_strategy = {
            s: sorted((r for r in here if r.row.variant == s), key=lambda r: r.row.rep) for s in strategies
        }
        for strategy, of_strategy in by_strategy.items():
            # the spread of jobs/s here; of every metric in the ratio rows
            cells = [
                _median_spread(
                    [float(get(r)) for r in of_strategy if get(r) is not None], form, spread=i == 0
                )
                for i, (get, form) in enumerate(metrics)
            ]
            saturated = sum(1 for r in of_strategy if r.row.saturated)
            audited = sum(1 for r in of_strategy if r.row.audit_ok)
            slept = [r.rtt_slept_ms for r in of_strategy if r.rtt_slept_ms]
            lines.append(
                [
                    str(workers),
                    str(concurrency),
                    f"{job_ms:g}",
                    f"{rtt:g}",
                    _median_spread(slept, "{:.2f}", spread=False) if slept else "-",
                    strategy,
                    *cells,
                    _limit(of_strategy),
                    f"{saturated}/{len(of_strategy)}",
                    f"ok {audited}/{len(of_strategy)}",
                ]
            )
        first = strategies[0] if strategies else ""
        for other in strategies[1:]:
            a, b = by_strategy[first], by_strategy[other]
            cells = []
            for get, _ in metrics:
                ratio = paired_ratio((get(x), get(y)) for x, y in zip(a, b, strict=False))
                cells.append(ratio.text("{:.2f}") if ratio else "-")
            lines.append(["", "", "", "", "", f"{first}/{other}", *cells, "", "", ""])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join(
        [
            "finish-then-fetch: medians of the repetitions; ratios pair the runs of each A B C round "
            "[min-max]",
            *text,
            "* rtt is simulated: each exchange on the wire waits rtt ms once, whatever it carries "
            "(slept: the mean it took); conc: jobs in flight per worker connection, auto-pipelined",
            "redis µs/job counts every client-sent command in the window, producers' addJob included; "
            "redis ceiling = 1e6 / redis µs/job; limit: the side that used the most of its capacity "
            "(latency: none used 70%); "
            "locust/raw: Locust's jobs/s over the raw driver's (no Locust) at the same point",
            *notes,
        ]
    )
