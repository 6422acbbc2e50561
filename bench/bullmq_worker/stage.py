"""The bullmq_worker stage: what a BullMQ Python user gets today, and what the fused call would give.

Runs when bullmq is one of the profile's protocols. Each run pre-fills a fresh
bullmq queue (through the protocol: BullMQ's own addStandardJob arguments),
then one driver processes every job in a process of its own
(bench/bullmq_worker/driver.py): BullMQ's asyncio Worker at each of the
profile's concurrencies, and the suite's fused and two_call loops over the same
scripts. The drivers alternate within each repetition (A B C A B C). After a
run the queue is audited: every job completed exactly once. The machine is
watched while a driver runs (its process is a child: own, as an embedded
redis-server is). One row a run in bullmq_worker.csv; a table on stdout.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import replace

from bench.bullmq_worker.driver import PROGRAM, URL_ENV, WINDOW_FROM, DriverResult
from bench.bullmq_worker.plan import PROTOCOL, Run, runs_of
from bench.bullmq_worker.rows import csv_row
from bench.bullmq_worker.table import table
from bench.errors import BenchError
from bench.harness.children import reap_group, spawn
from bench.harness.context import RunContext
from bench.harness.machine import watch_run
from bench.harness.profile import BullmqWorkerOptions, Profile
from bench.paths import REPO
from bench.protocol.audit import audit
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Producer, Queue
from bench.results import BullmqWorkerRow, update_meta, write_rows

FILL_CHUNK = 1000  # jobs a pipeline while pre-filling
START_ALLOWANCE_S = 60.0  # the driver's imports, connections and close
SLOWEST_JOB_S = 0.05  # a run gets this long a job (at concurrency 1), beyond its sleeps
OPTIONS = (
    "BullMQ Worker defaults: lock 30 s, every completed job kept (removeOnComplete unset), no metrics, "
    "no limiter, maxStalledCount 1, stalledInterval 30 s; a no-op processor unless job_ms > 0"
)


def called_scripts() -> dict[str, str]:
    """The scripts the drivers call, by file, with their SHA1: BullMQ's Worker registers all of
    its package's, but on jobs shorter than its lock renewal it calls only these two."""
    from bench.protocol.base import protocol_named

    protocol = protocol_named(PROTOCOL)
    files, sources = protocol.script_files(), protocol.script_sources()
    return {
        files[step]: hashlib.sha1(sources[step].encode()).hexdigest()
        for step in ("move_to_active", "move_to_finished")
    }


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """No estimate: a run lasts as long as its driver takes to drain the queue, unknown before."""
    return ()


def check_profile(profile: Profile) -> None:
    """Nothing to check beyond the profile's own minimums; the package when bullmq is asked for."""
    if PROTOCOL in profile.protocols:
        from bench.protocol.base import protocol_named

        protocol_named(PROTOCOL)


def prefill(queue: Queue, jobs: int) -> list[str]:
    ids: list[str] = []
    producer = Producer(queue, name="noop")
    for start in range(0, jobs, FILL_CHUNK):
        ids.extend(producer.add_batch(min(FILL_CHUNK, jobs - start)))
    return ids


def run_driver(settings: RedisSettings, run: Run, queue: str, options: BullmqWorkerOptions) -> DriverResult:
    """The driver's process, to its end; its one JSON line read back. A failure is a BenchError."""
    command = [
        sys.executable, "-m", PROGRAM, "--driver", run.driver, "--queue", queue,
        "--jobs", str(options.bullmq_worker_jobs), "--concurrency", str(run.concurrency),
        "--job-ms", f"{options.bullmq_worker_job_ms:g}",
    ]  # fmt: skip
    per_job_s = SLOWEST_JOB_S + options.bullmq_worker_job_ms / 1000.0
    timeout = START_ALLOWANCE_S + options.bullmq_worker_jobs * per_job_s
    env = {**os.environ, URL_ENV: settings.url, "PYTHONUNBUFFERED": "1"}
    process = spawn(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(
            f"{run.label} did not finish {options.bullmq_worker_jobs} jobs in {timeout:.0f}s"
        ) from None
    finally:
        reap_group(process)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"{run.label} failed (exit {process.returncode}): {last}")
    result = DriverResult.from_line(lines[-1])
    if result.errors:
        raise BenchError(f"{run.label}: {result.errors[0]}")
    return result


def one_run(
    settings: RedisSettings, run: Run, rep: int, options: BullmqWorkerOptions, watch_pids: Sequence[int] = ()
) -> BullmqWorkerRow:
    """A fresh queue, pre-filled; the driver, with the machine watched; the audit; the queue deleted."""
    client = settings.connect()
    queue = Queue.open(client, f"bw-{uuid.uuid4().hex[:10]}", protocol=PROTOCOL)
    try:
        ids = prefill(queue, options.bullmq_worker_jobs)
        with watch_run(watch_pids) as watch:
            result = run_driver(settings, run, queue.keys.name, options)
        audited = audit(queue, ids)
        complete = audited.ok and audited.counts.get("completed") == len(ids)
        row = csv_row(run, rep, result, options.bullmq_worker_job_ms, complete)
        assert watch.sample is not None
        return replace(row, **watch.sample.row_fields())
    finally:
        queue.delete()
        client.close()


def run_stage(ctx: RunContext) -> None:
    if PROTOCOL not in ctx.profile.protocols:
        ctx.progress(f"skipped: {PROTOCOL} is not one of the profile's protocols")
        return
    options = ctx.profile.bullmq_worker
    runs = runs_of(options)
    update_meta(
        ctx.run_dir,
        bullmq_worker={
            "window_from": WINDOW_FROM,
            "jobs": options.bullmq_worker_jobs,
            "options": OPTIONS,
            "scripts_called": called_scripts(),
        },
    )
    rows: list[BullmqWorkerRow] = []
    total = len(runs) * options.bullmq_worker_reps
    for rep in range(1, options.bullmq_worker_reps + 1):
        for run in runs:  # A B C A B C: drift hits every driver alike
            ctx.progress(f"run {len(rows) + 1}/{total}: {run.label} rep {rep}")
            row = one_run(ctx.settings, run, rep, options, ctx.watch_pids)
            rows.append(row)
            write_rows(ctx.run_dir, BullmqWorkerRow, rows)
            audit_note = "" if row.audit_ok else " (AUDIT FAILED)"
            if row.contended:
                audit_note += f" (contended: foreign CPU {row.foreign_cpu_pct:.0f}% of a core)"
            ctx.progress(
                f"{run.label} rep {rep}: {row.jobs_per_s:.0f} jobs/s, {row.client_cpu_us_per_job:.0f} µs "
                f"client CPU, {row.redis_calls_per_job:.2f} calls/job{audit_note}"
            )
    ctx.progress.done()
    print(table(rows))
