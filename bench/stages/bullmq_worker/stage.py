"""The bullmq_worker stage: what BullMQ's users get from its own workers, beside the suite's loops.

Runs when bullmq is one of the profile's protocols. At each concurrency: BullMQ's Node package
(peers/bullmq-node, when node can run it), its Worker and its manual processing, fused and
two-call; the Python port's Worker; then the suite's fused and two_call loops over its scripts.
Each run fills a fresh queue, one driver processes every job in a process of its own
(worker_process.py, driver.mjs), and the queue is audited: every job completed exactly once. The
drivers alternate (A B C A B C); a run whose window is shorter than bullmq-worker-window-s runs
again, sized from its rate.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bench.errors import BenchError
from bench.harness.children import reap_group, spawn
from bench.harness.context import RunContext
from bench.harness.machine import watch_run
from bench.harness.overrides import SectionFlags
from bench.harness.profile import BullmqWorkerOptions, Profile
from bench.harness.terminal import fold
from bench.paths import REPO
from bench.protocol.audit import audit
from bench.protocol.base import protocol_named
from bench.protocol.bullmq_package import installed_version
from bench.protocol.commandstats import CLIENT_COMMANDS
from bench.protocol.connection import RedisSettings
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Producer, Queue
from bench.results.bullmq_worker import BullmqWorkerMeta, BullmqWorkerRow
from bench.results.files import Ledger
from bench.stages.bullmq_worker.node import NodePeer, find_peer, last_line
from bench.stages.bullmq_worker.plan import (
    BULLMQ_DRIVERS,
    SIZING_ATTEMPTS,
    WINDOW_MARGIN,
    Point,
    expected_rate,
    jobs_for,
    points_of,
    short_window,
)
from bench.stages.bullmq_worker.rows import PROTOCOL, row_of
from bench.stages.bullmq_worker.table import table
from bench.stages.bullmq_worker.worker_process import PROGRAM, URL_ENV, WINDOW_FROM, WorkerProcessResult

FILL_CHUNK = 1000  # jobs a pipeline while pre-filling
START_ALLOWANCE_S = 60.0  # the driver's imports, connections and close
SLOWEST_JOB_S = 0.05  # a run gets this long a job (at concurrency 1), beyond its sleeps
# The Node driver connects as BullMQ's docs show, to one server: a cluster's queue would answer MOVED
CLUSTER_ABSENT = "the server is a Redis Cluster; the Node driver connects to a single server"
TRIAL_OVERHEAD_S = 2.0  # for the ETA: a driver's start, its queue's fill and audit, its warm-up
OPTIONS = (
    "BullMQ Worker defaults: lock 30 s, every completed job kept (removeOnComplete unset), no metrics, "
    "no limiter, maxStalledCount 1, stalledInterval 30 s; a no-op processor unless job_ms > 0"
)


def called_scripts() -> dict[str, str]:
    """The scripts the Python drivers call, by file, with their SHA1: BullMQ's Worker registers all
    of its package's, but on jobs shorter than its lock renewal it calls only these two."""
    protocol = protocol_named(PROTOCOL)
    files, sources = protocol.script_files(), protocol.script_sources()
    return {
        files[step]: hashlib.sha1(sources[step].encode()).hexdigest()
        for step in ("move_to_active", "move_to_finished")
    }


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """The seconds each run should take, in order, for the run's ETA: a driver's start, fill and
    audit, its warm-up and a window sized for bullmq-worker-window-s, its jobs' holds."""
    if PROTOCOL not in profile.protocols:
        return ()
    options = profile.bullmq_worker
    runs = points_of(options, node=isinstance(find_peer(), NodePeer))
    window_s = max(options.bullmq_worker_window_s * WINDOW_MARGIN, 1.0)
    held_s = options.bullmq_worker_jobs * options.bullmq_worker_job_ms / 1000.0
    return (
        tuple(TRIAL_OVERHEAD_S + window_s + held_s / run.concurrency for run in runs)
        * options.bullmq_worker_reps
    )


def check_profile(profile: Profile) -> None:
    """The drivers named are BullMQ's; the package when bullmq is asked for."""
    unknown = [d for d in profile.bullmq_worker.bullmq_worker_drivers if d not in BULLMQ_DRIVERS]
    if unknown:
        raise BenchError(
            f"profile key bullmq-worker-drivers: unknown driver {unknown[0]!r}; use some of "
            f"{', '.join(BULLMQ_DRIVERS)}"
        )
    if PROTOCOL in profile.protocols:
        protocol_named(PROTOCOL)


@dataclass(frozen=True)
class Drivers:
    """How to start a run's driver: the Python module, or the Node peer when it can run."""

    settings: RedisSettings
    options: BullmqWorkerOptions
    peer: NodePeer | None

    def command(self, run: Point, queue: Queue, jobs: int) -> list[str]:
        """The Python driver opens the queue by its name; BullMQ's Node package is given the name
        with its hash tag, the keys BullMQ's Python port uses (bull:{name}:...)."""
        args = ["--jobs", str(jobs), "--concurrency", str(run.concurrency),
                "--job-ms", f"{self.options.bullmq_worker_job_ms:g}"]  # fmt: skip
        if run.node:
            assert self.peer is not None
            counted = ",".join(CLIENT_COMMANDS)
            return self.peer.command(
                "run", "--mode", run.driver, "--queue", queue.keys.tag, "--count", counted, *args
            )
        return [sys.executable, "-m", PROGRAM, "--driver", run.driver, "--queue", queue.keys.name, *args]

    def line(self, label: str, command: list[str], timeout: float) -> dict[str, Any]:
        """The child's process, to its end; its last JSON line. A failure is a BenchError."""
        env = {**os.environ, URL_ENV: self.settings.url, "PYTHONUNBUFFERED": "1"}
        process = spawn(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{label} did not finish in {timeout:.0f}s") from None
        finally:
            reap_group(process)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if process.returncode != 0 or not lines:
            raise BenchError(f"{label} failed (exit {process.returncode}): {last_line(err)}")
        return dict(json.loads(lines[-1]))

    def fill(self, run: Point, queue: Queue, jobs: int) -> list[str]:
        """The run's jobs into its fresh queue: the Node package's own Queue.addBulk for a Node run."""
        if not run.node:
            producer = Producer(queue, name="noop")
            chunks = range(0, jobs, FILL_CHUNK)
            return [i for start in chunks for i in producer.add_batch(min(FILL_CHUNK, jobs - start))]
        assert self.peer is not None
        command = self.peer.command("fill", "--queue", queue.keys.tag, "--jobs", str(jobs))
        return [
            str(i) for i in self.line(f"{run.label} fill", command, START_ALLOWANCE_S + jobs * 0.01)["ids"]
        ]

    def drive(self, run: Point, queue: Queue, jobs: int) -> WorkerProcessResult:
        per_job_s = SLOWEST_JOB_S + self.options.bullmq_worker_job_ms / 1000.0
        timeout = START_ALLOWANCE_S + jobs * per_job_s
        result = WorkerProcessResult(**self.line(run.label, self.command(run, queue, jobs), timeout))
        if result.errors:
            raise BenchError(f"{run.label}: {result.errors[0]}")
        return result


def one_trial(
    drivers: Drivers, run: Point, rep: int, jobs: int, watch_pids: Sequence[int] = ()
) -> tuple[BullmqWorkerRow, WorkerProcessResult]:
    """A fresh queue, filled; the driver, with the machine watched; the audit; the queue deleted."""
    client = drivers.settings.connect()
    queue = Queue.open(client, fresh_queue_name("bw"), protocol=PROTOCOL)
    try:
        ids = drivers.fill(run, queue, jobs)
        with watch_run(watch_pids) as watch:
            result = drivers.drive(run, queue, jobs)
        audited = audit(queue, ids)
        complete = audited.ok and audited.counts.get("completed") == len(ids)
        row = row_of(run, rep, result, drivers.options.bullmq_worker_job_ms, complete, len(ids))
        assert watch.sample is not None
        return replace(row, **watch.sample.row_fields()), result
    finally:
        queue.delete()
        client.close()


def node_record(peer: NodePeer | str, called: set[str]) -> dict[str, object]:
    """meta.json's word on the Node package: its versions and every script its drivers called."""
    if isinstance(peer, str):
        return {"absent": peer}
    return {
        "bullmq": peer.bullmq,
        "ioredis": peer.ioredis,
        "node": peer.node_version,
        "scripts_called": peer.shas_of(sorted(called)),
    }


def sized_trial(
    drivers: Drivers, run: Point, rep: int, rates: dict[Point, float], ctx: RunContext
) -> tuple[BullmqWorkerRow, WorkerProcessResult]:
    """One run, sized from the rate expected of it; again, sized from this one's, while its
    window was short (at most SIZING_ATTEMPTS runs)."""
    options = drivers.options
    for attempt in range(1, SIZING_ATTEMPTS + 1):
        jobs = jobs_for(options, expected_rate(rates, run))
        row, result = one_trial(drivers, run, rep, jobs, ctx.watch_pids)
        rates[run] = row.jobs_per_s
        if not short_window(options, row.duration_s) or attempt == SIZING_ATTEMPTS:
            break
        short = f"window {row.duration_s:.3g} s, under {options.bullmq_worker_window_s:g} s"
        ctx.progress(f"{run.label} rep {rep}: {short}; again with {jobs_for(options, row.jobs_per_s):,} jobs")
    return row, result


def run_stage(ctx: RunContext) -> None:
    if PROTOCOL not in ctx.profile.protocols:
        ctx.progress(f"skipped: {PROTOCOL} is not one of the profile's protocols")
        return
    options = ctx.profile.bullmq_worker
    found = CLUSTER_ABSENT if ctx.settings.is_cluster() else find_peer()
    peer = found if isinstance(found, NodePeer) else None
    if peer is None:
        ctx.progress(f"no Node rows: {found}")
    drivers = Drivers(ctx.settings, options, peer)
    runs = points_of(options, node=peer is not None)
    called: set[str] = set()
    ledger = Ledger(ctx.run_dir, BullmqWorkerMeta)  # what the stage writes: its rows and section
    ledger.meta(
        window_from=WINDOW_FROM,
        jobs=options.bullmq_worker_jobs,
        window_s=options.bullmq_worker_window_s,
        options=OPTIONS,
        python_bullmq=installed_version(),
        scripts_called=called_scripts(),
        node=node_record(found, called),
    )
    rates: dict[Point, float] = {}  # each run's last jobs/s: the next one's size
    for rep in range(1, options.bullmq_worker_reps + 1):
        for run in runs:  # A B C A B C: drift hits every driver alike
            ctx.progress(f"{run.label} rep {rep}")  # the line's stage counter counts the runs
            row, result = sized_trial(drivers, run, rep, rates, ctx)
            called.update(result.scripts)
            ledger.add(BullmqWorkerRow, [row])
            note = "" if row.audit_ok else ", AUDIT FAILED"
            if row.saturated:
                note += ", saturated (the driver, not Redis, set the pace)"
            if row.contended:
                note += f", contended ({row.foreign_cpu_pct:.0f}% foreign CPU)"
            ctx.progress.step(
                f"{run.label} rep {rep}: {row.jobs_per_s:.0f} jobs/s in {row.duration_s:.2f} s, "
                f"{row.client_cpu_us_per_job:.0f} µs CPU, {row.redis_calls_per_job:.2f} calls a job, "
                f"Redis {row.redis_cpu_pct:.0f}% of a core{note}"
            )
    ledger.meta(node=node_record(found, called))
    ctx.progress.done()
    print(fold(table(ledger.rows(BullmqWorkerRow), None if peer else str(found))))


FLAGS = SectionFlags(BullmqWorkerOptions, prefix="bullmq-worker-")
ABOUT = "BullMQ's own workers alone, beside the suite's loops. Settings default to the profile's keys."
