"""One run of a race setting (one repetition), on a fresh queue, then its counts:

1. N jobs are fetched under a 1 ms lock and left there: stalled (in active, lock expired).
2. With workers, N more "live" jobs wait; W worker threads fetch and finish exactly N jobs from
   the right of wait, so a job an app-side sweep requeues (LPUSH, to the left) stays visible in
   wait at the end (an atomic sweep RPUSHes: the workers take and finish those too).
3. K sweeper threads start together at a barrier and sweep until every stalled job is reclaimed
   and the workers are done (so an atomic sweep gets its two passes, mark then move; a sliced
   sweep's passes span calls others interleave with). Past the deadline a run counts an error.

Each thread has a connection of its own.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial

from bench.errors import BenchError
from bench.protocol.audit import audit, server_run_id
from bench.protocol.connection import RedisSettings
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions
from bench.protocol.refusal import refusal, refused
from bench.protocol.sweep import Sweeper, SweepResult, make_sweeper
from bench.stages.race.count import Anomalies, count_anomalies, read_state
from bench.stages.race.plan import Point, extra_scripts

STALL_LOCK_MS = 1  # the crashed worker's lock: gone almost at once
STALL_CHUNK = 1000  # jobs a pipeline while stalling
WORKER_LOCK_MS = 60_000  # a live worker's lock never expires during a run
JOIN_GRACE_S = 35.0  # beyond the deadline: one socket timeout (30 s) and a margin


class RaceLog:
    """What the sweeper and worker threads saw, shared under one lock."""

    def __init__(self, stalled_ids: Iterable[str], fetch_budget: int, deadline: float) -> None:
        self._lock = threading.Lock()
        self.remaining = set(stalled_ids)
        self.reclaims: Counter[str] = Counter()
        self.finishes: Counter[str] = Counter()
        self.fetched_finished = 0
        self.refused_finishes = 0
        self.sweeps = 0
        self.errors: list[str] = []
        self.refused: Exception | None = None  # a reply every later call gets too (refusal.py)
        self.deadline = deadline
        self._budget = fetch_budget
        self._unfinished = fetch_budget
        self.stop = threading.Event()  # an error or the deadline: every thread stops
        self.all_reclaimed = threading.Event()
        self.workers_done = threading.Event()
        if not self.remaining:
            self.all_reclaimed.set()
        if fetch_budget == 0:
            self.workers_done.set()

    def record_sweep(self, result: SweepResult) -> None:
        with self._lock:
            self.sweeps += 1
            for job_id in (*result.moved, *result.failed):
                self.reclaims[job_id] += 1
                self.remaining.discard(job_id)
            if not self.remaining:
                self.all_reclaimed.set()

    def take_fetch(self) -> bool:
        with self._lock:
            if self._budget == 0:
                return False
            self._budget -= 1
            return True

    def give_back_fetch(self) -> None:
        with self._lock:
            self._budget += 1

    def record_finish(self, job_id: str, was_finished: bool, code: int) -> None:
        with self._lock:
            self.fetched_finished += was_finished
            if code >= 0:
                self.finishes[job_id] += 1
            else:
                self.refused_finishes += 1
            self._unfinished -= 1
            if self._unfinished == 0:
                self.workers_done.set()

    def fail(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
        self.stop.set()

    def past_deadline(self) -> bool:
        """True past the deadline; the first thread to see it counts one error and stops the run."""
        if time.monotonic() <= self.deadline:
            return False
        with self._lock:
            if not self.stop.is_set():
                self.errors.append(f"deadline passed with {len(self.remaining)} stalled jobs unreclaimed")
                self.stop.set()
        return True

    @property
    def finished(self) -> bool:
        return self.all_reclaimed.is_set() and self.workers_done.is_set()


def _guarded(log: RaceLog, what: str, start: threading.Barrier, loop: Callable[[], None]) -> None:
    """Run a thread's loop after the barrier; any error is counted and stops the run."""
    try:
        start.wait()
        loop()
    except threading.BrokenBarrierError:
        log.fail(f"{what}: the start barrier broke")
    except Exception as exc:  # counted, not raised: the run ends and says so
        if refusal(exc) is not None:  # every thread's next call would be refused too: the run ends
            log.refused = log.refused or exc
        log.fail(f"{what}: {type(exc).__name__}: {exc}")
        start.abort()


def _sweep_loop(sweeper: Sweeper, log: RaceLog) -> None:
    while not log.stop.is_set():
        log.record_sweep(sweeper.sweep())
        if log.finished or log.past_deadline():
            return


def _work_loop(worker: Worker, log: RaceLog) -> None:
    while not log.stop.is_set() and log.take_fetch():
        job = worker.fetch()
        if job is None:  # wait is momentarily empty
            log.give_back_fetch()
            if log.past_deadline():
                return
            log.stop.wait(0.001)
            continue
        # A job its sweep marked to fail (BullMQ's defa, past max stalled) is failed, as BullMQ's Worker does.
        reason = worker.queue.protocol.deferred_failure(job.fields)
        outcome = worker.finish(job, fetch_next=False, failed=reason is not None, value=reason or "ok")
        log.record_finish(job.id, "finishedOn" in job.fields, outcome.code)


def stall_jobs(queue: Queue, count: int) -> list[str]:
    """``count`` jobs fetched under a 1 ms lock and left: in active, their locks expired."""
    ids: list[str] = []
    producer = Producer(queue)
    crashed = Worker(queue, "two_call", WorkerOptions(lock_ms=STALL_LOCK_MS))
    fetched: list[str] = []
    for start in range(0, count, STALL_CHUNK):
        ids.extend(producer.add_batch(min(STALL_CHUNK, count - start)))
        fetched.extend(job.id for job in crashed.fetch_batch(min(STALL_CHUNK, count - start)))
    if set(fetched) != set(ids):
        raise BenchError(f"queue {queue.keys.name} was not empty: could not stall exactly {count} jobs")
    deadline = time.monotonic() + 5.0
    while any(
        queue.client.exists(*(queue.keys.lock(j) for j in ids[s : s + STALL_CHUNK]))
        for s in range(0, count, STALL_CHUNK)
    ):
        if time.monotonic() > deadline:
            raise BenchError("the 1 ms locks of the stalled jobs did not expire within 5 s")
        time.sleep(0.005)
    return ids


def run_trial(settings: RedisSettings, setting: Point) -> Anomalies:
    """One repetition of ``setting`` on a fresh queue, deleted afterwards."""
    client = settings.connect()
    queue = Queue.open(client, fresh_queue_name("race"), extra_scripts([setting.variant]), setting.protocol)
    clients = [client]
    try:
        run_id = server_run_id(queue)
        stalled = stall_jobs(queue, setting.stalled_jobs)
        live = Producer(queue).add_batch(setting.stalled_jobs) if setting.workers else []
        log = RaceLog(stalled, len(live), time.monotonic() + setting.deadline_s)
        start = threading.Barrier(setting.sweepers + setting.workers)

        def on_own_connection() -> Queue:
            clients.append(settings.connect())
            return queue.with_client(clients[-1])

        def guarded(what: str, loop: Callable[[], None]) -> threading.Thread:
            return threading.Thread(target=_guarded, args=(log, what, start, loop), daemon=True)

        sweepers = [
            make_sweeper(
                setting.variant,
                on_own_connection(),
                max_stalled=setting.max_stalled,
                act_delay_ms=setting.delay_ms,
                slice_size=setting.slice_size,
            )
            for _ in range(setting.sweepers)
        ]
        options = WorkerOptions(lock_ms=WORKER_LOCK_MS)
        workers = [Worker(on_own_connection(), "two_call", options) for _ in range(setting.workers)]
        sweeper_threads = [
            guarded(f"sweeper {i}", partial(_sweep_loop, s, log)) for i, s in enumerate(sweepers)
        ]
        worker_threads = [guarded(f"worker {i}", partial(_work_loop, w, log)) for i, w in enumerate(workers)]
        threads = [*sweeper_threads, *worker_threads]
        for thread in threads:
            thread.start()
        for thread in sweeper_threads:
            thread.join(max(0.0, log.deadline - time.monotonic()) + JOIN_GRACE_S)
        log.stop.set()
        for thread in worker_threads:
            thread.join(JOIN_GRACE_S)
        if log.refused is not None:  # not audited: the server would not take the run's calls
            raise refused(log.refused, settings.where, client) or log.refused
        if any(t.is_alive() for t in threads):
            log.fail("a sweeper or worker did not return: it is left running, its counts are not final")
        audited = audit(queue, [*stalled, *live], run_id)
        if audited.server_restarted:
            raise BenchError("Redis restarted during the race audit, so its counts are gone; run again")
        found = count_anomalies(
            read_state(queue, [*stalled, *live]), audited, log.reclaims, log.finishes, log.fetched_finished
        )
        found.unrecovered = len(log.remaining)
        found.errors = len(log.errors)
        found.audit_violations += found.unrecovered + found.errors
        found.reclaimed = len(stalled) - found.unrecovered
        found.sweeps = log.sweeps
        for message in log.errors:
            print(f"echomq-bench: race {setting.label()}: {message}", file=sys.stderr)
        return found
    finally:
        queue.delete()
        for own in clients:
            own.close()
