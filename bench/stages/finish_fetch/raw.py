"""The raw driver: the Locust users' own loops, each on its connection, in plain threads of this
process (a thread a connection, never one a job) with no Locust: the harness's calibration at each
point. Its summary has the Locust run's shape (summary.py builds both), so its jobs/s and CPU per
job beside Locust's say what Locust itself costs. No Locust or gevent import here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

from bench.protocol.audit import audit_queues, master_run_ids
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Queue
from bench.protocol.refusal import LOADING_WAIT_S, ServerRefused, refusal, refusal_line
from bench.protocol.spread import homes, queue_names
from bench.stages.finish_fetch.loadstats import Aggregate, Recorder, issued_job_ids, server_figures
from bench.stages.finish_fetch.producer_loop import ProducerLoop
from bench.stages.finish_fetch.summary import ServerFigures, SummaryAudit, TrialSummary, build_summary
from bench.stages.finish_fetch.timed import run_steps
from bench.stages.finish_fetch.trial_settings import TrialSettings
from bench.stages.finish_fetch.wait_list import SAMPLE_EVERY_S, WaitSamples, wait_length
from bench.stages.finish_fetch.worker_loop import WorkerLoop

JOIN_ALLOWANCE_S = 5.0  # past the socket timeout, how long a thread may take to notice the stop
RAW_PROCESS = "raw"


class LockedRecorder(Recorder):
    """A Recorder many threads share: each update under one lock (a += is not atomic across threads)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def record(self, metric: str, value_us: float, count: int = 1) -> None:
        with self._lock:
            super().record(metric, value_us, count)

    def count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            super().count(name, amount)

    def reset(self, epoch: int) -> None:
        with self._lock:
            super().reset(epoch)

    def freeze(self) -> None:
        with self._lock:
            super().freeze()

    def take(self) -> dict[str, Any]:
        with self._lock:
            return super().take()


PARK_WAIT_S = 2.0  # how long a window's edge waits for every thread to finish its step


class Edge:
    """The window's edges, exact: the threads finish the step they are in and wait, while the
    server's counters are read and the recorder opened or closed, so the client and the server
    count the same exchanges (a read beside running threads waits for the GIL, many rounds long)."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self._parked = threading.Semaphore(0)

    def step(self, step: Callable[[], None]) -> Callable[[], None]:
        """``step``, first waiting at a closed edge."""

        def gated() -> None:
            if not self._open.is_set():
                self._parked.release()
                self._open.wait()
            step()

        return gated

    @contextlib.contextmanager
    def held(self, threads: int) -> Iterator[None]:
        """Every thread waits (or PARK_WAIT_S passed: one in a long call goes on) while inside."""
        self._open.clear()
        deadline = time.monotonic() + PARK_WAIT_S
        try:
            for _ in range(threads):
                if not self._parked.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    break
            yield
        finally:
            self._open.set()
            while self._parked.acquire(blocking=False):  # a thread parked late: its count dropped
                pass


class RawRun:
    """One raw run on a fresh queue: threads start, warm up, a window is measured, all stop."""

    def __init__(self, settings: RedisSettings, trial: TrialSettings) -> None:
        self.settings = settings
        self.run = trial
        self.recorder = LockedRecorder()
        self.stopping = threading.Event()
        self.edge = Edge()
        self.clients: list[Client] = []
        self.threads: list[threading.Thread] = []
        self.names: list[str] = []  # the run's queues (queue_names), known once measure starts
        self.refused: ServerRefused | None = None  # a reply every later call gets too: all stop
        self.loading_since: float | None = None
        self.wait = WaitSamples()
        self.sampling = threading.Event()  # set while the window is open

    def _sample_wait(self, queues: list[Queue]) -> None:
        """The wait list's length every SAMPLE_EVERY_S while the window is open (its own thread)."""
        while not self.stopping.wait(SAMPLE_EVERY_S):
            if self.sampling.is_set():
                with contextlib.suppress(redis.RedisError):  # a sample missed is no sample
                    self.wait.add(wait_length(queues), len(queues))

    def _queue(self, index: int = 0) -> Queue:
        """A connection of its own on the index-th queue (round robin: users spread evenly)."""
        client = self.settings.connect()
        self.clients.append(client)
        name = self.names[index % len(self.names)] if self.names else self.run.queue
        return Queue.open(client, name, protocol=self.run.protocol)

    def _start(self, name: str, step: Any) -> None:
        thread = threading.Thread(
            target=run_steps,
            args=(self.edge.step(step), self.recorder, self.stopping.is_set, self._on_error),
            name=name,
            daemon=True,
        )
        self.threads.append(thread)
        thread.start()

    def _on_error(self, exc: BaseException) -> None:
        """A refusal (OOM, READONLY, ...; LOADING once it lasted LOADING_WAIT_S) stops every thread."""
        found = refusal(exc)
        if found is None or self.refused is not None:
            self.loading_since = None
            return
        if found.kind == "loading":
            self.loading_since = self.loading_since or time.monotonic()
            if time.monotonic() - self.loading_since < LOADING_WAIT_S:
                return
        client = self.settings.connect()
        try:
            self.refused = ServerRefused(refusal_line(found, self.settings.where, client), found.kind)
        finally:
            client.close()
        self.stopping.set()

    def _sleep(self, seconds: float) -> None:
        """Warm-up or window: cut short when a refusal stopped the threads."""
        if self.stopping.wait(seconds) and self.refused is not None:
            raise self.refused  # the caller's finally stops the threads

    def measure(self) -> TrialSummary:
        """The run's summary (summary.py's shape, ``mode: raw``), audited after every thread stopped."""
        control = self._queue()
        self.names = queue_names(control.client, self.run.queue, self.run.queues)
        home = homes(control.client, self.names)
        run_ids = master_run_ids(control.client)
        try:
            for p in range(self.run.producers):
                queue = self._queue(p)
                loop = ProducerLoop(queue, self.run, self.recorder)
                self._start(f"producer-{p}", loop.step)
            for w in range(self.run.workers):
                self._start(f"worker-{w}", WorkerLoop(self._queue(w), self.run, self.recorder).step)
            workers = len(self.threads)
            watched = [self._queue(q) for q in range(len(self.names))]
            sampler = threading.Thread(target=self._sample_wait, args=(watched,), name="wait", daemon=True)
            self.threads.append(sampler)  # not gated by the edge: it counts only while sampling is set
            sampler.start()
            self._sleep(self.run.warmup_s)
            with self.edge.held(workers):
                before = server_figures(control.client)
                self.recorder.reset(1)
                self.sampling.set()
                started = time.perf_counter()
            self._sleep(self.run.measure_s)
            with self.edge.held(workers):
                self.sampling.clear()
                self.recorder.freeze()
                window_s = time.perf_counter() - started
                after = server_figures(control.client)
        finally:
            self._stop()
        aggregate = Aggregate()
        aggregate.reset(1)
        aggregate.absorb(RAW_PROCESS, "local", self.recorder.take(), final=True)
        queues = [Queue.open(control.client, n, protocol=self.run.protocol) for n in self.names]
        checked = audit_queues(queues, issued_job_ids, run_ids, home)
        by_master = {m: now.since(before[0][m]) for m, now in after[0].items() if m in before[0]}
        server = ServerFigures(by_master, after[1] - before[1], after[2] - before[2], home)
        audited = SummaryAudit(checked.ok, checked.verdict, checked.counts)
        return build_summary(self.run, aggregate, window_s, "raw", server, audit=audited, wait=self.wait)

    def _stop(self) -> None:
        self.stopping.set()
        deadline = time.monotonic() + self.settings.socket_timeout_s + JOIN_ALLOWANCE_S
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        with contextlib.suppress(redis.RedisError):
            if self.clients:
                for name in self.names or [self.run.queue]:
                    Queue.open(self.clients[0], name, protocol=self.run.protocol).delete()
        for client in self.clients:
            client.close()


def run_raw(settings: RedisSettings, trial: TrialSettings) -> TrialSummary:
    """One raw run of ``run`` (its queue name replaced by a fresh one, deleted after)."""
    fresh = dataclasses.replace(trial, queue=fresh_queue_name(f"ffraw-{trial.strategy}"))
    raw = RawRun(settings, fresh)
    try:
        return raw.measure()
    finally:
        raw.close()
