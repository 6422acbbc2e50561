"""`python -m bench.stages.bullmq_worker.worker_process`: one driver over a pre-filled bullmq queue, in its
own process.

Drivers: ``bullmq_worker``, BullMQ's own asyncio ``Worker`` with its default options and a no-op
processor (or one that sleeps ``--job-ms``), at ``--concurrency`` (two script calls a job: it
finishes with fetch next off, then calls moveToActive); ``fused`` / ``two_call``, the suite's
loop (bench.protocol.queue.Worker) over the same scripts, at concurrency 1.

Timed from the 1,000th completion to the last: jobs/s, this process's CPU (getrusage), and the
server's client-sent commands, their µs (INFO commandstats) and its CPU (INFO cpu), read on a
connection of its own. One JSON line on stdout says what was measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.errors import BenchError
from bench.protocol.commandstats import CommandStats, client_side, redis_cpu_seconds
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Queue, Worker

PROGRAM = "bench.stages.bullmq_worker.worker_process"
URL_ENV = "EMQ_DRIVER_REDIS_URL"  # the URL (and any password) by environment, not argv
WINDOW_FROM = 1000  # completions before the window opens: the warm-up
DRIVERS = ("bullmq_worker", "fused", "two_call")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Mark:
    at_s: float
    cpu_s: float
    stats: CommandStats
    redis_cpu_s: float


@dataclass
class Window:
    """Counts completions; marks the 1,000th and the last."""

    total: int
    stats_client: Client
    done: int = 0
    start: Mark | None = None
    end: Mark | None = None
    errors: list[str] = field(default_factory=list)

    def _mark(self) -> Mark:
        stats, redis_cpu = CommandStats.read(self.stats_client), self.stats_client.info("cpu")
        return Mark(time.perf_counter(), cpu_s(), stats, redis_cpu_seconds(redis_cpu))

    def completed(self) -> bool:
        """One more job done; True at the last."""
        self.done += 1
        if self.done == WINDOW_FROM:
            self.start = self._mark()
        if self.done == self.total:
            self.end = self._mark()
            return True
        return False

    def result(self, driver: str, concurrency: int) -> dict[str, Any]:
        if self.start is None or self.end is None:
            raise BenchError(f"{driver} finished {self.done} of {self.total} jobs: no window to report")
        delta = client_side(self.end.stats.since(self.start.stats))
        return {
            "driver": driver,
            "concurrency": concurrency,
            "jobs": self.total - WINDOW_FROM,
            "duration_s": self.end.at_s - self.start.at_s,
            "cpu_s": self.end.cpu_s - self.start.cpu_s,
            "calls": dict(delta.calls),
            "usec": dict(delta.usec),
            "redis_cpu_s": self.end.redis_cpu_s - self.start.redis_cpu_s,
            "errors": self.errors,
        }


async def run_bullmq_worker(url: str, tag: str, concurrency: int, job_ms: float, window: Window) -> None:
    """BullMQ's Worker (its defaults, but concurrency) until ``window.total`` jobs completed."""
    from bullmq import Worker as BullWorker  # the package, only in this driver's process

    done = asyncio.Event()

    async def process(job: Any, token: str) -> None:
        if job_ms > 0:
            await asyncio.sleep(job_ms / 1000.0)

    def completed(job: Any, result: Any) -> None:
        if window.completed():
            done.set()

    def failed(job: Any, error: Any) -> None:
        window.errors.append(f"job {getattr(job, 'id', '?')} failed: {error}")
        done.set()

    worker = BullWorker(tag, process, {"connection": url, "concurrency": concurrency})
    worker.on("completed", completed)
    worker.on("failed", failed)
    worker.on("error", lambda error, *rest: failed(None, error))
    try:
        await done.wait()
    finally:
        await worker.close()


def run_suite_loop(client: Client, name: str, strategy: str, job_ms: float, window: Window) -> None:
    """The suite's Worker over the bullmq protocol, one job at a time."""
    worker = Worker(Queue.open(client, name, protocol="bullmq"), strategy)  # type: ignore[arg-type]
    job = worker.fetch()
    while job is not None:
        if job_ms > 0:
            time.sleep(job_ms / 1000.0)
        job = worker.complete_and_next(job, want_next=window.done + 1 < window.total)
        if window.completed():
            return
    window.errors.append(f"the queue ran dry after {window.done} of {window.total} jobs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", choices=DRIVERS, required=True)
    parser.add_argument("--queue", required=True, help="the pre-filled bullmq queue's name")
    parser.add_argument("--jobs", type=int, required=True, help="jobs in the queue; all are processed")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--job-ms", type=float, default=0.0)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not (url := os.environ.get(URL_ENV)):
        raise BenchError(f"{URL_ENV} is not set; the bullmq_worker stage runs this driver")
    settings = RedisSettings.from_url(url)
    client = settings.connect()
    stats_client = settings.connect()
    try:
        queue = Queue.open(client, args.queue, protocol="bullmq")  # its scripts loaded before the clock
        window = Window(args.jobs, stats_client)
        if args.driver == "bullmq_worker":
            asyncio.run(run_bullmq_worker(url, queue.keys.tag, args.concurrency, args.job_ms, window))
        else:
            run_suite_loop(client, args.queue, args.driver, args.job_ms, window)
        print(json.dumps(window.result(args.driver, args.concurrency)), flush=True)
    finally:
        client.close()
        stats_client.close()
    return 0


@dataclass(frozen=True)
class WorkerProcessResult:
    """What the driver printed, as the stage reads it back."""

    driver: str
    concurrency: int
    jobs: int
    duration_s: float
    cpu_s: float
    calls: dict[str, int]
    usec: dict[str, int]
    redis_cpu_s: float  # the server's CPU over the window (INFO cpu)
    errors: list[str]
    scripts: dict[str, int] = field(default_factory=dict)  # the Node driver's EVALSHAs by script file


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"echomq-bench: error: {exc}", file=sys.stderr)
        sys.exit(2)
