"""The stage's per-master lines under its table: each master's jobs/s and Redis µs a job at each
point and strategy, so a hot shard shows (medians of the repetitions)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.harness.terminal import render_table, table_width, wrap_note
from bench.results import FinishFetchShardRow


def _median(values: Sequence[float | None], form: str) -> str:
    known = [v for v in values if v is not None]
    return form.format(statistics.median(known)) if known else "-"


def _run(row: FinishFetchShardRow) -> str:
    lead = "" if row.protocol == "echomq" else f"{row.protocol} "
    point = f"w{row.workers}" + (f"-q{row.queues}" if row.queues != 1 else "")
    point += (f"-c{row.concurrency}" if row.concurrency != 1 else "") + (
        f"-j{row.job_ms:g}" if row.job_ms else ""
    )
    return f"{lead}{row.strategy} {point}-rtt{row.rtt_ms:g}"


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
        [run, master, str(queues), str(len(of)), _median([r.jobs_per_s for r in of], "{:.0f}"),
         _median([r.server_us_per_job for r in of], "{:.1f}")]
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
