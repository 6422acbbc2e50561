"""A worker as BullMQ runs one: ``concurrency`` jobs in flight on one auto-pipelined connection.

Each slot holds its job for job-ms (the processing time: a sleep, so the other
slots go on meanwhile), then finishes it and takes the next by the strategy.
The slots' calls share the worker's one connection (an AutoPipeline): calls
issued while an exchange is in flight go out together in the next one.
Whoever drives the slots gives each its own flow of control: a greenlet under
Locust, a thread in the raw driver. No Locust or gevent import here.
"""

from __future__ import annotations

import threading
import time

from bench.finish_fetch.loadstats import RunSettings
from bench.finish_fetch.seats import for_queue
from bench.finish_fetch.timed import NO_HOOKS, LoadHooks, Meter, TimedSender
from bench.protocol.queue import FinishRefused, Job, Queue, Worker

IDLE_WAIT_S = 0.05  # a worker with nothing to do blocks on the marker this long at most


class IdleGate:
    """One slot of a worker blocks on the marker; the other idle slots wait for it.

    A blocking call holds the shared connection (the calls behind it wait), so
    one at a time, as a BullMQ worker keeps one blocking call whatever its
    concurrency."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def wait(self, worker: Worker, timeout_s: float = IDLE_WAIT_S) -> None:
        if self._lock.acquire(blocking=False):
            try:
                worker.wait_for_work(timeout_s)
            finally:
                self._lock.release()
        elif self._lock.acquire(timeout=2 * timeout_s):  # woken with the one that blocked
            self._lock.release()


class InFlight:
    """How many of a worker's slots hold a job being processed or finished (for the counters)."""

    def __init__(self) -> None:
        self.now = 0


class Slot:
    """One job in flight: fetch, hold it job-ms, finish it and take the next."""

    def __init__(
        self, worker: Worker, timer: TimedSender, meter: Meter, gate: IdleGate, job_s: float, held: InFlight
    ) -> None:
        self.worker = worker
        self.queue_jobs = for_queue(worker.queue.keys.name)
        self.timer = timer
        self.meter = meter
        self.gate = gate
        self.job_s = job_s
        self.held = held
        self.job: Job | None = None

    def step(self) -> None:
        """One turn: take a job when the slot holds none (or wait for one), else work one job."""
        if self.job is None:
            self.meter.count("fetches_alone")  # not a job's cycle: its first fetch, or after none came
            self.job = self.worker.fetch()
            if self.job is None:
                self.meter.count("empty_fetches")
                self.meter.count("idle_waits")
                self.gate.wait(self.worker)
            return
        job, self.job = self.job, None
        started = time.perf_counter()
        self.held.now += 1
        # the worker's jobs in flight as this one starts: their mean shows the slots overlap
        self.meter.count("in_flight_samples")
        self.meter.count("in_flight_sum", self.held.now)
        try:
            if self.job_s > 0:
                time.sleep(self.job_s)  # processing: cooperative under gevent, the other slots run
            next_job = self.worker.complete_and_next(job)
        except FinishRefused as refused:
            self.job = refused.next_job  # two_call_pipelined: the fetch beside it may have taken one
            raise
        finally:
            self.held.now -= 1
        # a slot's cycle: processing, finish and fetch; e2e: enqueued to finished
        self.meter.record("cycle", (time.perf_counter() - started) * 1e6)
        self.meter.count("jobs")
        self.meter.count(self.queue_jobs)  # the queue's part: a hot shard shows
        if job.enqueued_us is not None:
            self.meter.record("e2e", self.timer.finished_us - job.enqueued_us)
        if next_job is None:
            self.meter.count("empty_fetches")
        self.job = next_job


class WorkerConnection:
    """One worker: its connection's AutoPipeline and its ``concurrency`` slots."""

    def __init__(self, queue: Queue, run: RunSettings, meter: Meter, hooks: LoadHooks = NO_HOOKS) -> None:
        self.pipe = hooks.pipe(queue, run.rtt_ms, meter, "worker")
        gate, held = IdleGate(), InFlight()
        self.slots: list[Slot] = []
        for _ in range(run.concurrency):
            timer = hooks.timer(self.pipe, meter)
            worker = Worker(queue, run.strategy, sender=timer)  # type: ignore[arg-type]
            self.slots.append(Slot(worker, timer, meter, gate, run.job_ms / 1000.0, held))
