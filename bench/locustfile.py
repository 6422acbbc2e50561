"""Finish-then-fetch under load: `locust -f bench/locustfile.py` (web UI, or --headless).

Producers add jobs in pipelined batches; workers finish each job and fetch the
next, `fused` (one moveToFinished with fetch next) or `two_call`
(moveToFinished, then moveToActive). Every option of a profile is a Locust
option, so `--config profiles/default.conf` works; the run's single values are
the first of each list, and `--strategy` picks one strategy.

    locust -f bench/locustfile.py --config profiles/smoke.conf --headless --strategy fused

With no --run-time, a headless run measures for warmup-s + measure-s and
stops. The summary (merged µs histograms, round trips, Redis commandstats,
saturation) goes to --summary-json, or <--csv prefix>_summary.json.
"""

from __future__ import annotations

import contextlib
import sys
import time
from importlib.util import find_spec
from pathlib import Path

if find_spec("bench") is None:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent
from locust import task
from redis.exceptions import NoScriptError, RedisError

from bench.errors import ProtocolError
from bench.finish_fetch import hooks
from bench.finish_fetch.current import RECORDER
from bench.finish_fetch.user import RedisUser
from bench.protocol.queue import Job, Producer, Worker, now_us

IDLE_WAIT_S = 0.05  # a worker with nothing to do blocks on the marker this long at most
BACKLOG_BATCHES = 10  # closed loop: producers keep the wait list below this many batches
BACKLOG_POLL_S = 0.002

hooks.install()  # the options, the user counts, the measured window (bench/finish_fetch/)


class ProducerUser(RedisUser):
    """Adds jobs in pipelined batches: closed loop (keep a backlog), or open loop at target-rate."""

    role = "producer"

    def on_start(self) -> None:
        super().on_start()
        self.producer = Producer(self.queue)
        per_user_rate = self.load.target_rate / self.load.producers
        self.interval_s = self.load.batch_size / per_user_rate if per_user_rate > 0 else 0.0
        self.next_slot = time.perf_counter()

    @task
    def add_batch(self) -> None:
        if self.interval_s > 0:
            slot = self.wait_for_slot()
        else:
            self.wait_for_room()
            slot = time.perf_counter()
        # The jobs carry the slot's time: when the producer is behind schedule,
        # end-to-end latency includes the time it spent behind.
        slot_us = now_us() - int((time.perf_counter() - slot) * 1e6)
        n = self.load.batch_size
        try:
            ids = self.timed(
                "PIPELINE",
                f"addJob x{n}",
                self.producer.add_batch,
                n,
                self.load.payload_bytes,
                enqueued_us=slot_us,
                size=n,
            )
        except NoScriptError:
            # SCRIPT FLUSH dropped addJob (the pipeline sends its known SHA, so redis-py does not
            # reload it): load it for the next batch. This one is counted failed, not re-sent.
            with contextlib.suppress(RedisError):  # if this fails too, the next batch says so
                self.queue.scripts.load(self.client)
            raise
        RECORDER.record("enqueue", (time.perf_counter() - slot) * 1e6)
        RECORDER.count("jobs_added", len(ids))
        RECORDER.count("producer_calls", n)

    def wait_for_slot(self) -> float:
        """Open loop: the batch's intended start time; sleeps until it when ahead."""
        slot = self.next_slot
        self.next_slot += self.interval_s
        delay = slot - time.perf_counter()
        if delay > 0:
            gevent.sleep(delay)
        return slot

    def wait_for_room(self) -> None:
        """Closed loop: add as fast as possible, but keep the backlog bounded."""
        limit = BACKLOG_BATCHES * self.load.batch_size
        while self.timed("LLEN", "backlog check", self.client.llen, self.queue.keys.wait) >= limit:
            gevent.sleep(BACKLOG_POLL_S)


class WorkerUser(RedisUser):
    """Finishes its job and fetches the next, by the run's strategy."""

    role = "worker"

    def on_start(self) -> None:
        super().on_start()
        self.worker = Worker(self.queue, self.load.strategy)  # type: ignore[arg-type]
        self.fused = self.load.strategy == "fused"
        self.job: Job | None = None

    @task
    def finish_then_fetch(self) -> None:
        if self.job is None:
            self.job = self.fetch()
            if self.job is None:
                RECORDER.count("idle_waits")
                self.timed("BZPOPMIN", "marker wait (idle)", self.worker.wait_for_work, IDLE_WAIT_S)
            return
        job, self.job = self.job, None
        started = time.perf_counter()
        if self.fused:
            next_job = self.timed("EVALSHA", "moveToFinished+fetch", self.finish, job, True)
            finished_us = now_us()
        else:
            self.timed("EVALSHA", "moveToFinished", self.finish, job, False)
            finished_us = now_us()
            next_job = self.fetch()
        RECORDER.record("cycle", (time.perf_counter() - started) * 1e6)
        RECORDER.count("jobs")
        if job.enqueued_us is not None:
            RECORDER.record("e2e", finished_us - job.enqueued_us)
        self.job = next_job

    def fetch(self) -> Job | None:
        job = self.timed("EVALSHA", "moveToActive", self.worker.fetch)
        if job is None:
            RECORDER.count("empty_fetches")
        return job

    def finish(self, job: Job, fetch_next: bool) -> Job | None:
        outcome = self.worker.finish(job, fetch_next=fetch_next)
        if outcome.code < 0:
            raise ProtocolError("moveToFinished", outcome.code, job.id)
        return outcome.next_job
