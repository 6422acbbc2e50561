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
import statistics
import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bench.bullmq_worker.driver import PROGRAM, URL_ENV, WINDOW_FROM, DriverResult
from bench.errors import BenchError
from bench.fits import headline_ratio
from bench.harness.children import reap_group, spawn
from bench.harness.context import RunContext
from bench.harness.machine import watch_run
from bench.harness.profile import BullmqWorkerOptions, Profile
from bench.paths import REPO
from bench.protocol.audit import audit
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Producer, Queue
from bench.results import BULLMQ_WORKER_COLUMNS, BullmqWorkerRow, row_dict, update_meta, write_csv

PROTOCOL = "bullmq"
CSV_NAME = "bullmq_worker.csv"
FILL_CHUNK = 1000  # jobs a pipeline while pre-filling
START_ALLOWANCE_S = 60.0  # the driver's imports, connections and close
SLOWEST_JOB_S = 0.05  # a run gets this long a job (at concurrency 1), beyond its sleeps
OPTIONS = (
    "BullMQ Worker defaults: lock 30 s, every completed job kept (removeOnComplete unset), no metrics, "
    "no limiter, maxStalledCount 1, stalledInterval 30 s; a no-op processor unless job_ms > 0"
)


@dataclass(frozen=True)
class Run:
    """One driver at one concurrency."""

    driver: str
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.driver} c{self.concurrency}"


def runs_of(options: BullmqWorkerOptions) -> list[Run]:
    """BullMQ's Worker at each concurrency, then the suite's two loops (concurrency 1)."""
    workers = [Run("bullmq_worker", c) for c in dict.fromkeys(options.bullmq_worker_concurrency)]
    return [*workers, Run("fused", 1), Run("two_call", 1)]


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


def csv_row(run: Run, rep: int, result: DriverResult, job_ms: float, audit_ok: bool) -> BullmqWorkerRow:
    jobs = result.jobs
    return BullmqWorkerRow(
        protocol=PROTOCOL,
        driver=run.driver,
        concurrency=run.concurrency,
        job_ms=job_ms,
        rep=rep,
        jobs=jobs,
        duration_s=round(result.duration_s, 4),
        jobs_per_s=round(jobs / result.duration_s, 1),
        client_cpu_us_per_job=round(result.cpu_s * 1e6 / jobs, 1),
        redis_calls_per_job=round(sum(result.calls.values()) / jobs, 4),
        redis_us_per_job=round(sum(result.usec.values()) / jobs, 2),
        audit_ok=audit_ok,
    )


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
            write_csv(ctx.run_dir / CSV_NAME, BULLMQ_WORKER_COLUMNS, map(row_dict, rows))
            audit_note = "" if row.audit_ok else " (AUDIT FAILED)"
            if row.contended:
                audit_note += f" (contended: foreign CPU {row.foreign_cpu_pct:.0f}% of a core)"
            ctx.progress(
                f"{run.label} rep {rep}: {row.jobs_per_s:.0f} jobs/s, {row.client_cpu_us_per_job:.0f} µs "
                f"client CPU, {row.redis_calls_per_job:.2f} calls/job{audit_note}"
            )
    ctx.progress.done()
    print(table(rows))
