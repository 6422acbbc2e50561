"""Stage 1 of `python -m bench run`: finish-then-fetch, fused against two_call, under Locust.

For each (workers, rtt_ms) point the strategies run alternately, A B A B, for
the profile's repetitions. Each run is a headless Locust subprocess on a fresh
queue, audited and deleted after (locust_run.py). Results: one row a run in
finish_fetch.csv and the merged histograms under hdr/ (rows.py), Locust's own
CSVs and the run's summary JSON and log beside them, and a short table on
stdout (table.py).
"""

from __future__ import annotations

import sys
from collections import Counter
from importlib.util import find_spec
from pathlib import Path

from bench.errors import BenchError
from bench.finish_fetch.locust_run import INTERRUPTED, Point, RunResult, run_once
from bench.finish_fetch.rows import csv_row, write_histograms
from bench.finish_fetch.table import TableRow, table
from bench.harness.context import RunContext
from bench.harness.profile import Profile
from bench.results import FINISH_FETCH_COLUMNS, FinishFetchRow, RunIds, row_dict, update_meta, write_csv

RTT_LABEL = "simulated: the client waits rtt_ms (gevent.sleep) before each round trip; loopback otherwise"


def check_profile(profile: Profile) -> None:
    """Before any stage starts: Locust is there (found, not imported: no gevent patching here)."""
    if find_spec("locust") is None:
        raise BenchError("Locust is not installed; run `make venv` (or pip install -e .)")
    strategies = profile.finish_fetch.strategies
    if len(set(strategies)) != len(strategies):
        raise BenchError(f"profile key strategies names one twice ({', '.join(strategies)}); list each once")


# Beyond its window, a run spends this long starting Locust, stopping it and auditing the queue.
RUN_OVERHEAD_S = 3.5


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """The seconds each run of the stage should take, in order: for the run's ETA."""
    opts = profile.finish_fetch
    runs = len(opts.workers) * len(opts.rtt_ms) * opts.repetitions * len(opts.strategies)
    return (opts.warmup_s + opts.measure_s + RUN_OVERHEAD_S,) * runs


def run_stage(ctx: RunContext) -> None:
    opts = ctx.profile.finish_fetch
    strategies = list(opts.strategies)
    protocols = ctx.profile.protocols
    points = [Point(w, rtt) for w in opts.workers for rtt in opts.rtt_ms]
    hdr_variant = "[<protocol>.]<strategy>-w<workers>-rtt<rtt_ms> (no protocol: echomq)"
    update_meta(ctx.run_dir, finish_fetch={"rtt_ms": RTT_LABEL, "hdr_variant": hdr_variant})
    rows: list[FinishFetchRow] = []  # finish_fetch.csv
    shown: list[TableRow] = []  # the same, and what only the table shows
    errors: Counter[str] = Counter()  # failed calls by kind, over every run: meta.json
    audits: dict[str, str] = {}  # the verdict of each run whose audit did not pass: meta.json
    total = len(points) * opts.repetitions * len(strategies) * len(protocols)
    # A B A B: drift on a shared machine hits every strategy and protocol alike.
    rounds = [(protocol, strategy) for protocol in protocols for strategy in strategies]
    for point in points:
        for rep in range(1, opts.repetitions + 1):
            for protocol, strategy in rounds:
                ctx.progress(f"run {len(rows) + 1}/{total}: {protocol} {strategy} {point.label} rep {rep}")
                run = run_once(
                    ctx.settings, opts, strategy, point, rep, ctx.run_dir, protocol, ctx.watch_pids
                )
                row = csv_row(run, opts, RunIds(ctx.run_dir.name, ctx.profile.name, protocol))
                rows.append(row)
                derived = run.summary["derived"]
                shown.append(
                    TableRow(row, derived["simulated_rtt_mean_ms"], derived["loadgen_cpu_us_per_job"])
                )
                write_histograms(ctx.run_dir, run)
                write_csv(ctx.run_dir / "finish_fetch.csv", FINISH_FETCH_COLUMNS, map(row_dict, rows))
                errors.update(derived.get("errors_by_kind", {}))
                if not row.audit_ok:
                    audits[f"{run.variant_id} r{run.rep}"] = _audit_note(run)
                update_meta(
                    ctx.run_dir,
                    finish_fetch_errors=dict(sorted(errors.items())),
                    finish_fetch_audit_failures=audits,
                )
                ctx.progress.step(_progress_line(run, row))
                _stop_if_stopped(run, ctx.run_dir)
    ctx.progress.done()
    print(table(shown, strategies))
    if errors:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items()))
        total = sum(errors.values())
        print(f"finish_fetch: {total} calls failed ({kinds}); see the runs' logs", file=sys.stderr)


def _audit_note(run: RunResult) -> str:
    """Why the run's audit_ok is false, in the audit's own words."""
    if not run.audit.ok:
        return run.audit.verdict
    missing = ", ".join(run.summary.get("missing_processes") or [])
    cut = run.stopped or (f"no final report from {missing}" if missing else "the summary is incomplete")
    return f"cut short ({cut}); the queue itself: {run.audit.verdict}"


def _stop_if_stopped(run: RunResult, run_dir: Path) -> None:
    """End the stage when a run stopped early: its row is written already, marked audit_ok false."""
    reason = run.stopped
    if reason is None:
        return
    if reason == INTERRUPTED:
        raise KeyboardInterrupt
    lead = "" if run.protocol == "echomq" else f"{run.protocol} "
    which = f"{lead}{run.strategy} {run.point.label} rep {run.rep}"
    raise BenchError(f"finish_fetch run {which} stopped: {reason}; what it measured is in {run_dir}")


def _progress_line(run: RunResult, row: FinishFetchRow) -> str:
    notes = []
    if run.machine is not None and run.machine.contended:
        notes.append(run.machine.note())
    if row.saturated:
        notes.append("saturated: " + "; ".join(run.summary["derived"]["saturated_because"]))
    if run.stopped:
        notes.append(f"STOPPED EARLY: {run.stopped}")
    if not row.audit_ok:
        notes.append(f"AUDIT FAILED: {run.audit.verdict}")
    errors = run.summary["derived"].get("errors", 0)
    if errors:
        kinds = ", ".join(f"{n} {k}" for k, n in run.summary["derived"].get("errors_by_kind", {}).items())
        notes.append(f"{errors} failed calls: {kinds or 'kinds not recorded'} (see {run.files}.log)")
    tail = f" ({'; '.join(notes)})" if notes else ""
    return (
        f"{run.protocol} {run.strategy} {run.point.label} rep {run.rep}: {row.jobs_per_s:.0f} jobs/s, "
        f"{row.round_trips_per_job:.2f} rt/job, cycle p50 {row.cycle_p50_us} µs{tail}"
    )
