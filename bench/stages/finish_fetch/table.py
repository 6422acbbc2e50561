"""The stage's short table on stdout: medians over repetitions, and the A/B ratios of each point;
under it, each master's jobs/s and Redis µs a job at each point and strategy, so a hot shard
shows (medians of the repetitions)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from textwrap import indent

from bench.harness.terminal import contended_note, render_table, table_width, wrap_note
from bench.results.finish_fetch import FinishFetchRow, FinishFetchShardRow
from bench.results.fits import headline_ratio
from bench.stages.finish_fetch.plan import Point

# (header, attribute of a TableRow, format)
TABLE_METRICS = (
    ("jobs/s", "row.jobs_per_s", "{:.0f}"),
    ("rt/job", "row.round_trips_per_job", "{:.2f}"),
    ("cmd/job", "row.commands_per_job", "{:.2f}"),
    ("cycle p50 µs", "row.cycle_p50_us", "{:.0f}"),
    ("cycle p99 µs", "row.cycle_p99_us", "{:.0f}"),
    ("redis µs/job", "row.server_us_per_job", "{:.1f}"),
    ("redis ceiling/s", "row.redis_ceiling_jobs_per_s", "{:.0f}"),
    ("load gen cpu µs/job", "loadgen_cpu_us_per_job", "{:.0f}"),  # the harness's own cost
    ("raw cpu µs/job", "row.raw_cpu_us_per_job", "{:.0f}"),  # the same loops without Locust
    ("locust/raw jobs/s", "row.locust_raw_jobs_ratio", "{:.2f}"),
    ("reference cpu µs/job", "row.reference_cpu_us_per_job", "{:.0f}"),  # the least the builders allow
    ("raw/reference cpu", "row.raw_reference_cpu_ratio", "{:.2f}"),
)


@dataclass(frozen=True)
class TableRow:
    """A run as the table shows it: its CSV row, and two figures only the table shows."""

    row: FinishFetchRow
    rtt_slept_ms: float  # the mean time a simulated round trip actually slept
    loadgen_cpu_us_per_job: float


def _median_spread(given: Sequence[float | None], form: str, spread: bool = True) -> str:
    if not (values := [v for v in given if v is not None]):
        return "-"
    middle = form.format(statistics.median(values))
    if len(values) == 1 or not spread:
        return middle
    return f"{middle} [{form.format(min(values))}-{form.format(max(values))}]"


def _limit(runs: Sequence[TableRow]) -> str:
    """The side most repetitions named as the limit."""
    named = Counter(r.row.limit for r in runs if r.row.limit)
    return named.most_common(1)[0][0] if named else "-"


# protocol, workers, queues, concurrency, job_ms, rtt_ms, regime, load
TablePoint = tuple[str, int, int, int, float, float, str, float]


_POINT = attrgetter("protocol", "workers", "queues", "concurrency", "job_ms", "rtt_ms", "regime")


def _point(r: TableRow) -> TablePoint:
    return (*_POINT(r.row), r.row.load or 0.0)


def _heading(protocol: str, point: TablePoint, slept: Sequence[float]) -> str:
    """[bullmq: ]backlog, workers 4, rtt 1 ms*, 3 queues, 8 jobs in flight each, job 5 ms (slept
    1.07): the regime (open: at its share of the backlog capacity), the protocol when the run
    measured several, the last four when set."""
    _, workers, queues, concurrency, job_ms, rtt, regime, load = point
    shown = f"open at {load:.0%} of the backlog capacity" if regime == "open" and load else regime
    text = f"{protocol + ': ' if protocol else ''}{shown}, workers {workers}, rtt {rtt:g} ms*"
    if queues != 1:
        text += f", {queues} queues"
    if concurrency != 1:
        text += f", {concurrency} jobs in flight each"
    if job_ms:
        text += f", job {job_ms:g} ms"
    return text + (f" (slept {statistics.median(slept):.2f})" if slept else "")


CONTENDED_MARK, SATURATED_MARK = "c", "s"


def judged(runs: Sequence[TableRow]) -> tuple[list[TableRow], str]:
    """The repetitions a cell's figures rest on, and its mark: the clean ones when there are any;
    else every one, marked c (contended); s when one of those saturated the load generator."""
    clean = [r for r in runs if not r.row.contended]
    used = clean or list(runs)
    mark = "" if clean or not runs else CONTENDED_MARK
    if any(r.row.saturated for r in used):
        mark += SATURATED_MARK
    return used, mark


def _marked(text: str, mark: str) -> str:
    return f"{text} {mark}" if mark and text != "-" else text


def _wait_rows(by_strategy: dict[str, list[TableRow]], regime: str) -> list[list[str]]:
    """Enqueue to finish, named by the regime: queue latency in open loop, the backlog's wait in a
    closed one; in the backlog regime, the samples that found the wait list empty."""
    name = "queue latency" if regime == "open" else "backlog wait"
    percentiles = (("p50", "e2e_p50_us"), ("p99", "e2e_p99_us"), ("p99.9", "e2e_p999_us"))
    rows = []
    for label, column in percentiles if regime == "open" else percentiles[:1]:
        cells = []
        for of in by_strategy.values():
            used, mark = judged(of)
            values = [float(v) for r in used if (v := getattr(r.row, column)) is not None]
            cells.append(_marked(_median_spread(values, "{:.0f}", spread=False), mark))
        rows.append([f"{name} {label} µs", *cells])
    if regime == "backlog":
        empty = [
            f"{sum(r.row.wait_empty_samples or 0 for r in of)} of {sum(r.row.wait_samples or 0 for r in of)}"
            for of in by_strategy.values()
        ]
        rows.append(["wait list empty", *empty])
    return rows


def table(
    runs: Sequence[TableRow], strategies: Sequence[str], width: int | None = None, notes: Sequence[str] = ()
) -> str:
    """One block a point: a row a metric, a column a strategy (medians over repetitions, jobs/s with
    its [min-max]), and the first strategy over each other one, pairing the runs of each A B C
    round, [min-max] of the pairs: a column beside the strategies when there is one ratio, a table
    of their own below them when there are more. Narrow enough for 100 columns; it folds below."""
    metrics = [(name, attrgetter(key), form) for name, key, form in TABLE_METRICS]
    first, others = (strategies[0], list(strategies[1:])) if strategies else ("", [])
    ratio_names = [f"{first}/{other}" for other in others]
    inline = len(others) == 1
    header = ["", *strategies, *(ratio_names if inline else [])]
    inner = (width or table_width()) - 2
    pairs = f"{', '.join(ratio_names)} pair the runs of each round [min-max]" if ratio_names else ""
    blocks = [wrap_note(f"finish-then-fetch: medians of the repetitions, jobs/s [min-max]; {pairs}", width)]
    protocols = list(dict.fromkeys(r.row.protocol for r in runs))  # in the order they ran
    for point in sorted({_point(r) for r in runs}, key=lambda p: (protocols.index(p[0]), *p[1:])):
        here = [r for r in runs if _point(r) == point]
        by_strategy = {
            s: sorted((r for r in here if r.row.strategy == s), key=lambda r: r.row.rep) for s in strategies
        }
        rows: list[list[str]] = []
        ratio_rows: list[list[str]] = []
        for i, (name, get, form) in enumerate(metrics):
            cells = []
            for of in by_strategy.values():
                used, mark = judged(of)
                values = [float(get(r)) for r in used if get(r) is not None]
                cells.append(_marked(_median_spread(values, form, spread=i == 0), mark))
            ratios = []
            for other in others:
                a, b = (
                    {r.row.rep: get(r) for r in judged(of)[0]}
                    for of in (by_strategy[first], by_strategy[other])
                )
                ratio = headline_ratio(a, b)
                ratios.append(ratio.text("{:.2f}") if ratio else "-")
            rows.append([name, *cells, *(ratios if inline else [])])
            ratio_rows.append([name, *ratios])
        rows += _wait_rows(by_strategy, point[6])
        rows.append(["limit", *(_limit(judged(of)[0]) for of in by_strategy.values())])
        rows.append(["clean", *(_clean(of) for of in by_strategy.values())])
        rows.append(
            ["saturated", *(f"{sum(r.row.saturated for r in of)}/{len(of)}" for of in by_strategy.values())]
        )
        rows.append(
            ["audit", *(f"ok {sum(r.row.audit_ok for r in of)}/{len(of)}" for of in by_strategy.values())]
        )
        body = render_table(header, rows, right=range(1, len(header)), width=inner)
        slept = [r.rtt_slept_ms for r in here if r.rtt_slept_ms]
        named = point[0] if len(protocols) > 1 else ""
        blocks += [_heading(named, point, slept), indent(body, "  ")]
        if not inline and others:
            ratio_header = ["", *ratio_names]
            right = range(1, len(ratio_header))
            blocks.append(indent(render_table(ratio_header, ratio_rows, right=right, width=inner), "  "))
    blocks.append(
        wrap_note(
            "* rtt is simulated: each exchange on the wire waits rtt ms once, whatever it carries (slept: "
            "the mean it took); jobs in flight share their worker's one connection, auto-pipelined. "
            "cmd/job: script calls a job's cycle sends; redis µs/job counts every client-sent command "
            "in the window, producers' addJob included; redis ceiling = 1e6 / redis µs/job; limit: the "
            "side that used the most of its capacity (latency: none used 70%); locust/raw: Locust's "
            "jobs/s over the raw driver's (the same loops without Locust) at the same point",
            width,
        )
    )
    blocks += [wrap_note(note, width) for note in notes]
    if marks := mark_note(runs, width):
        blocks.append(marks)
    if contended := [r.row for r in runs if r.row.contended]:
        foreign, steal = [r.foreign_cpu_pct for r in contended], [r.steal_pct for r in contended]
        blocks.append(contended_note(len(contended), len(runs), "runs", foreign, steal, width=width))
    return "\n".join(blocks)


def _clean(runs: Sequence[TableRow]) -> str:
    """clean k of n: the repetitions whose window was clean (neither contended nor saturated), and
    the windows measured again for them (a contended one only: a saturated point saturates again)."""
    clean = sum(r.row.clean for r in runs)
    extra = sum(max(r.row.tries - 1, 0) for r in runs)
    return f"{clean} of {len(runs)}" + (f" (+{extra} again)" if extra else "")


def mark_note(runs: Sequence[TableRow], width: int | None = None) -> str:
    """The note under the table for its marked cells: "" when no cell is marked."""
    marks = "".join(judged(of)[1] for of in _cells(runs))
    parts = []
    if CONTENDED_MARK in marks:
        parts.append(
            f"{CONTENDED_MARK}: every window of the cell was contended (the re-measuring's budget spent): "
            "its figures are not comparable"
        )
    if SATURATED_MARK in marks:
        parts.append(f"{SATURATED_MARK}: the load generator saturated in a window of the cell, not Redis")
    parts = parts and [*parts, "figures rest on a cell's uncontended windows when it has any"]
    return wrap_note("; ".join(parts), width) if parts else ""


def _cells(runs: Sequence[TableRow]) -> list[list[TableRow]]:
    """The table's cells: the repetitions of one strategy at one point."""
    cells: dict[tuple[object, ...], list[TableRow]] = {}
    for r in runs:
        cells.setdefault((*_point(r), r.row.strategy), []).append(r)
    return list(cells.values())


def _run(row: FinishFetchShardRow) -> str:
    lead = "" if row.protocol == "echomq" else f"{row.protocol} "
    point = Point(row.workers, row.rtt_ms, row.concurrency, row.job_ms, row.queues)
    return f"{lead}{row.strategy} {point.label}"


def shard_table(rows: Sequence[FinishFetchShardRow], width: int | None = None) -> str:
    """One line a master at each run's point and strategy; "" when every run had one master
    and one queue (the stage's table says it all)."""
    if not rows or (all(r.queues == 1 for r in rows) and len({r.master for r in rows}) == 1):
        return ""
    # Keyed by the queues a master held too: each repetition names its queues afresh, so at one
    # queue the queue sits on another master each time; a master that held none is left out.
    groups: dict[tuple[str, str, int], list[FinishFetchShardRow]] = {}
    for row in rows:
        if row.master_queues:
            groups.setdefault((_run(row), row.master, row.master_queues), []).append(row)
    lines = [
        [run, master, str(queues), str(len(of)), _median_spread([r.jobs_per_s for r in of], "{:.0f}", False),
         _median_spread([r.server_us_per_job for r in of], "{:.1f}", False)]
        for (run, master, queues), of in groups.items()
    ]  # fmt: skip
    header = ["run", "master", "queues", "reps", "jobs/s", "redis µs/job"]
    body = render_table(header, lines, right=range(2, 6), width=(width or table_width()) - 2)
    note = wrap_note(
        "per master holding queues of the run (medians of the repetitions it held them in): jobs "
        "finished on its queues, and its own Redis µs a job of them (INFO commandstats of that "
        "master); finish_fetch_shards.csv has every run",
        width,
    )
    return note + "\n" + "\n".join("  " + line for line in body.splitlines())
