"""The stage's short table on stdout: medians over repetitions, and the A/B ratio of each point."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from textwrap import indent

from bench.fits import headline_ratio
from bench.harness.terminal import render_table, table_width, wrap_note
from bench.results import FinishFetchRow

# (header, attribute of a TableRow, format)
TABLE_METRICS = (
    ("jobs/s", "row.jobs_per_s", "{:.0f}"),
    ("rt/job", "row.round_trips_per_job", "{:.2f}"),
    ("cycle p50 µs", "row.cycle_p50_us", "{:.0f}"),
    ("cycle p99 µs", "row.cycle_p99_us", "{:.0f}"),
    ("redis µs/job", "row.server_us_per_job", "{:.1f}"),
    ("load gen cpu µs/job", "loadgen_cpu_us_per_job", "{:.0f}"),  # the harness's own cost
)


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


def table(runs: Sequence[TableRow], strategies: Sequence[str], width: int | None = None) -> str:
    """One block a point and protocol: a row a metric, a column a strategy (medians over repetitions,
    jobs/s with its [min-max]), and, with two strategies, a ratio column that pairs the runs of each
    A B round, [min-max] of the pairs. Narrow enough for 100 columns; it folds below that."""
    metrics = [(name, attrgetter(key), form) for name, key, form in TABLE_METRICS]
    ratio_name = f"{strategies[0]}/{strategies[1]}" if len(strategies) == 2 else None
    header = ["", *strategies, *([ratio_name] if ratio_name else [])]
    blocks = [
        wrap_note(
            "finish-then-fetch: medians of the repetitions, jobs/s [min-max]; "
            + (f"{ratio_name} pairs the runs of each A B round [min-max]" if ratio_name else ""),
            width,
        )
    ]
    protocols = list(dict.fromkeys(r.row.protocol for r in runs))
    points = sorted({(r.row.workers, r.row.rtt_ms, protocols.index(r.row.protocol)) for r in runs})
    for workers, rtt, which in points:
        protocol = protocols[which]
        here = [
            r for r in runs if r.row.workers == workers and r.row.rtt_ms == rtt and r.row.protocol == protocol
        ]
        by_strategy = {
            s: sorted((r for r in here if r.row.strategy == s), key=lambda r: r.row.rep) for s in strategies
        }
        slept = [r.rtt_slept_ms for r in here if r.rtt_slept_ms]
        slept_text = f" (slept {statistics.median(slept):.2f})" if slept else ""
        rows: list[list[str]] = []
        for i, (name, get, form) in enumerate(metrics):
            cells = [
                _median_spread([float(get(r)) for r in of if get(r) is not None], form, spread=i == 0)
                for of in by_strategy.values()
            ]
            if ratio_name:
                a, b = ({r.row.rep: get(r) for r in of} for of in by_strategy.values())
                ratio = headline_ratio(a, b)
                cells.append(ratio.text("{:.2f}") if ratio else "-")
            rows.append([name, *cells])
        rows.append(
            ["contended", *(f"{sum(r.row.contended for r in of)}/{len(of)}" for of in by_strategy.values())]
        )
        rows.append(
            ["saturated", *(f"{sum(r.row.saturated for r in of)}/{len(of)}" for of in by_strategy.values())]
        )
        rows.append(
            ["audit", *(f"ok {sum(r.row.audit_ok for r in of)}/{len(of)}" for of in by_strategy.values())]
        )
        body = render_table(header, rows, right=range(1, len(header)), width=(width or table_width()) - 2)
        title = f"{protocol}: " if len(protocols) > 1 else ""
        blocks += [f"{title}workers {workers}, rtt {rtt:g} ms*{slept_text}", indent(body, "  ")]
    blocks.append(
        wrap_note(
            "* rtt is simulated: the client sleeps rtt ms before each round trip (slept: the mean it took); "
            "redis µs/job counts every client-sent command in the window, producers' addJob included",
            width,
        )
    )
    contended = [r.row for r in runs if r.row.contended]
    if contended:
        worst = max(r.foreign_cpu_pct or 0.0 for r in contended)
        blocks.append(
            wrap_note(
                f"CONTENDED: {len(contended)} of {len(runs)} runs shared the machine with other work "
                f"(foreign CPU up to {worst:.0f}% of a core): their figures are not comparable",
                width,
            )
        )
    return "\n".join(blocks)
