"""The stage's short table on stdout: medians over repetitions, and the A/B ratio of each point."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from bench.fits import paired_ratio
from bench.results import FinishFetchRow

# (header, attribute of a TableRow, format)
TABLE_METRICS = (
    ("jobs/s", "row.jobs_per_s", "{:.0f}"),
    ("rt/job", "row.round_trips_per_job", "{:.2f}"),
    ("cycle p50 µs", "row.cycle_p50_us", "{:.0f}"),
    ("cycle p99 µs", "row.cycle_p99_us", "{:.0f}"),
    ("redis µs/job", "row.server_us_per_job", "{:.1f}"),
    ("loadgen cpu µs/job", "loadgen_cpu_us_per_job", "{:.0f}"),  # the harness's own cost
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


def table(runs: Sequence[TableRow], strategies: Sequence[str]) -> str:
    """Medians over repetitions; a ratio row pairs the runs of each A B round, [min-max] of the pairs.
    Each protocol's runs of a point are rows of their own, in the order they ran."""
    names = [name for name, _, _ in TABLE_METRICS]
    header = ["workers", "rtt ms*", "protocol", "slept ms", "strategy", *names, "saturated", "audit"]
    lines = [header]
    metrics = [(attrgetter(key), form) for _, key, form in TABLE_METRICS]
    protocols = list(dict.fromkeys(r.row.protocol for r in runs))
    points = sorted({(r.row.workers, r.row.rtt_ms, protocols.index(r.row.protocol)) for r in runs})
    for workers, rtt, which in points:
        protocol = protocols[which]
        here = [
            r for r in runs if r.row.workers == workers and r.row.rtt_ms == rtt and r.row.protocol == protocol
        ]
        by_strategy = {
            s: sorted((r for r in here if r.row.variant == s), key=lambda r: r.row.rep) for s in strategies
        }
        for strategy, of_strategy in by_strategy.items():
            # the spread of jobs/s here; of every metric in the ratio row
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
                    f"{rtt:g}",
                    protocol,
                    _median_spread(slept, "{:.2f}", spread=False) if slept else "-",
                    strategy,
                    *cells,
                    f"{saturated}/{len(of_strategy)}",
                    f"ok {audited}/{len(of_strategy)}",
                ]
            )
        if len(strategies) == 2:
            a, b = (by_strategy[s] for s in strategies)
            cells = []
            for get, _ in metrics:
                ratio = paired_ratio((get(x), get(y)) for x, y in zip(a, b, strict=False))
                cells.append(ratio.text("{:.2f}") if ratio else "-")
            lines.append(["", "", "", "", f"{strategies[0]}/{strategies[1]}", *cells, "", ""])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join(
        [
            "finish-then-fetch: medians of the repetitions; ratios pair the runs of each A B round [min-max]",
            *text,
            "* rtt is simulated: the client sleeps rtt ms before each round trip (slept: the mean it took); "
            "redis µs/job counts every client-sent command in the window, producers' addJob included",
        ]
    )
