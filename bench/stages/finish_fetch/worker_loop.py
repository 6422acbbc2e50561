"""A worker's jobs in flight as one state machine on one connection, a round at a time.

Each round sends the calls of every ready job in one exchange, reads every reply, and moves each
job on: a BullMQ worker's auto-pipeline without a flow of control a job. Job time is kept by a timer
heap, so a held job costs nothing until it is due. Locust and the raw loops run it. No Locust or
gevent import.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.protocol.autopipe import AutoPipeline
from bench.protocol.base import ScriptCall
from bench.protocol.queue import (
    LABEL_FETCH,
    LABEL_FINISH,
    LABEL_FUSED,
    LABEL_PIPELINED,
    Call,
    FinishRefused,
    Job,
    Queue,
    Sender,
    Worker,
    now_us,
    raised,
)
from bench.stages.finish_fetch.seats import for_queue
from bench.stages.finish_fetch.timed import NO_HOOKS, LoadHooks, Meter, count_error
from bench.stages.finish_fetch.trial_settings import TrialSettings

IDLE_WAIT_S = 0.05  # a worker with every job slot empty blocks on the marker this long at most
IDLE_RETRY_S = 0.002  # an empty slot asks again this long after its fetch found nothing
ROUND_LABEL = "round"  # a round whose calls are of several kinds (Locust's table names it so)

# A slot's next call. FETCH: it holds no job (its first fetch, or after an empty one).
# FINISH: it holds a job whose job-ms is over. FETCH_NEXT: two_call, its finish done.
FETCH, FINISH, FETCH_NEXT = 0, 1, 2


@dataclass(slots=True)
class JobSlot:
    """One job in flight: the job held, what it sends next, and when its cycle began."""

    index: int
    job: Job | None = None
    next_call: int = FETCH
    taken_at: float = 0.0  # perf_counter when its job's reply came back
    idle_until: float = 0.0  # an empty fetch: not asked again before this


@dataclass(frozen=True)
class Sent:
    """One slot's part of a round: its calls, where they sit in the exchange, their kind."""

    slot: JobSlot
    at: int
    calls: int
    label: str
    token: str
    cycle: bool  # these calls end its job's cycle (the finish, and the fetch after it)


class WorkerLoop:
    """One worker: ``concurrency`` job slots driven in rounds over one AutoPipeline.

    ``step`` is one round: it sleeps until a job is due when none is ready (or blocks on
    the marker when every slot is empty), else sends every ready slot's calls in one
    exchange. A failed exchange drops the jobs its calls carried (they stay active, as a
    crashed worker's would; the audit counts them there) and raises, for run_steps to count.
    """

    def __init__(self, queue: Queue, trial: TrialSettings, meter: Meter, hooks: LoadHooks = NO_HOOKS) -> None:
        self.pipe: AutoPipeline = hooks.pipe(queue, trial.rtt_ms, meter, "worker")
        self.sender: Sender = self.pipe
        self.on_call = hooks.on_call
        self.overdue = hooks.overdue
        # its calls are built by the Worker; its marker wait goes through the one connection
        self.worker = Worker(queue, trial.strategy, sender=self.sender)  # type: ignore[arg-type]
        self.strategy = trial.strategy
        self.meter = meter
        self.job_s = trial.job_ms / 1000.0
        self.queue_jobs = for_queue(queue.keys.name)
        self.slots = [JobSlot(i) for i in range(trial.concurrency)]
        self.ready: list[JobSlot] = list(self.slots)
        self.timers: list[tuple[float, int, JobSlot]] = []  # (due, slot index, slot): a heap
        self.idle: list[JobSlot] = []
        self.rounds = 0
        self.done = 0  # jobs this round finished

    @property
    def holding(self) -> int:
        """Jobs held now (being processed, or on their way to be finished)."""
        return sum(1 for slot in self.slots if slot.job is not None)

    def step(self) -> None:
        now = time.perf_counter()
        self._due(now)
        if not self.ready:
            self._wait(now)
            return
        ready, self.ready = self.ready, []
        self._round(ready)

    def _due(self, now: float) -> None:
        """Timers that have fired, and empty slots whose pause is over, join the ready list."""
        while self.timers and self.timers[0][0] <= now:
            self.ready.append(heapq.heappop(self.timers)[2])
        if self.idle and (self.ready or self.timers) and self.idle[0].idle_until <= now:
            # others are busy: an empty slot asks again now and then (a marker wait would hold
            # the connection the busy slots need)
            self.ready += self.idle
            self.idle = []

    def _wait(self, now: float) -> None:
        """Nothing ready: sleep to the first timer, or, every slot empty, block on the marker."""
        if self.timers:
            wake = self.timers[0][0]
            if self.idle:
                wake = min(wake, self.idle[0].idle_until)
            self.pipe.sleep(max(0.0, wake - now))  # its connection's sleep: on time under Locust
            return
        self.meter.count("idle_waits")
        self.ready, self.idle = self.idle, []  # woken or not, the empty slots ask again
        self.worker.wait_for_work(IDLE_WAIT_S)

    def _plan(self, slot: JobSlot) -> tuple[list[ScriptCall], str, str, bool]:
        """The slot's calls this round: (calls, label, the fetch's token or "", ends a cycle)."""
        worker, job = self.worker, slot.job
        if slot.next_call == FETCH or job is None:
            token = worker.new_token()
            return [worker.fetch_call(token)], LABEL_FETCH, token, False
        if slot.next_call == FETCH_NEXT:
            token = worker.new_token()
            return [worker.fetch_call(token)], LABEL_FETCH, token, True
        if self.strategy == "fused":
            return [worker.finish_call(job, fetch_next=True)], LABEL_FUSED, job.token, True
        if self.strategy == "two_call":
            return [worker.finish_call(job, fetch_next=False)], LABEL_FINISH, "", False
        token = worker.new_token()
        calls = [worker.finish_call(job, fetch_next=False), worker.fetch_call(token)]
        return calls, LABEL_PIPELINED, token, True

    def _round(self, ready: list[JobSlot]) -> None:
        calls: list[Call] = []
        parts: list[Sent] = []
        for slot in ready:
            planned, label, token, cycle = self._plan(slot)
            parts.append(Sent(slot, len(calls), len(planned), label, token, cycle))
            calls += planned
        labels = {part.label for part in parts}
        label = labels.pop() if len(labels) == 1 else ROUND_LABEL
        started = time.perf_counter()
        try:
            replies = self.sender.send(calls, label)
        except Exception as exc:
            for part in parts:  # its jobs are dropped: active in Redis, as a crashed worker's
                part.slot.job, part.slot.next_call = None, FETCH
                self.ready.append(part.slot)
            self._timed(calls, label, started, exc)
            raise
        back = time.perf_counter()
        self.rounds += 1
        self._timed(calls, label, started, None, parts)
        finished_us = now_us()
        started_jobs = 0
        overdue = self.overdue
        for part in parts:
            if overdue is not None:
                overdue()  # another connection's wait may be over: its exchange before our work
            try:
                started_jobs += self._settle(part, replies[part.at : part.at + part.calls], back, finished_us)
            except Exception as exc:  # a refused call: counted; the slot holds what it was left
                count_error(self.meter, exc)
                kept = part.slot.job if isinstance(exc, FinishRefused) else None
                started_jobs += self._hold(part.slot, back, kept)
        if self.done:
            self.meter.count("jobs", self.done)
            self.meter.count(self.queue_jobs, self.done)  # the queue's part: a hot shard shows
            self.done = 0
        if started_jobs:
            # each worker's jobs in flight as these start: their mean shows the slots overlap
            self.meter.count("in_flight_samples", started_jobs)
            self.meter.count("in_flight_sum", started_jobs * self.holding)

    def _timed(
        self,
        calls: Sequence[Call],
        label: str,
        started: float,
        error: BaseException | None,
        parts: Sequence[Sent] = (),
    ) -> None:
        """The round's exchange as each job saw it (one value, counted once a job), and Locust's
        event for it, once a round."""
        elapsed = time.perf_counter() - started
        if error is None:
            by_label: dict[str, int] = {}
            for part in parts:
                by_label[part.label] = by_label.get(part.label, 0) + 1
            for name, jobs in by_label.items():
                self.meter.record(f"call:{name}", elapsed * 1e6, jobs)
        if self.on_call is not None:
            self.on_call(calls, label, elapsed, error)

    def _settle(self, part: Sent, replies: list[Any], back: float, finished_us: int) -> int:
        """Move one slot on by its replies; 1 when it took a job to hold."""
        slot, worker = part.slot, self.worker
        job = slot.job
        next_job: Job | None = None
        if part.label == LABEL_FETCH:
            first = raised(replies[0])
            next_job = worker.read_job(first, part.token)
            if not part.cycle:
                self.meter.count("fetches_alone")  # not a job's cycle: its first fetch, or after none came
        else:
            assert job is not None
            slot.job = None  # from here on, a refused call drops it (active in Redis)
            fetched = replies[1] if part.label == LABEL_PIPELINED else None
            if fetched is not None and not isinstance(fetched, Exception):
                next_job = worker.read_job(fetched, part.token)
            outcome = worker.read_finish(raised(replies[0]), job)
            if outcome.code < 0:
                # two_call_pipelined: the fetch beside it may have taken a job, now this slot's
                slot.job = next_job
                raise FinishRefused(outcome.code, job.id, next_job)
            if part.label == LABEL_FINISH:  # two_call: the fetch goes in the next round
                slot.job, slot.next_call = job, FETCH_NEXT
                self.ready.append(slot)
                return 0
            if part.label == LABEL_FUSED:
                next_job = outcome.next_job
            else:
                raised(fetched)  # two_call_pipelined: its fetch refused, the job finished all the same
        if part.cycle:
            assert job is not None
            self._finished(job, slot, back, finished_us)
        if next_job is None:
            self.meter.count("empty_fetches")
        return self._hold(slot, back, next_job)

    def _hold(self, slot: JobSlot, back: float, job: Job | None) -> int:
        """The slot holds ``job`` for job-ms (a timer), or, with none, rests before asking again."""
        if job is None:
            slot.job, slot.next_call, slot.idle_until = None, FETCH, back + IDLE_RETRY_S
            self.idle.append(slot)
            return 0
        slot.job, slot.next_call, slot.taken_at = job, FINISH, back
        if self.job_s > 0:
            heapq.heappush(self.timers, (back + self.job_s, slot.index, slot))
        else:
            self.ready.append(slot)
        return 1

    def _finished(self, job: Job, slot: JobSlot, back: float, finished_us: int) -> None:
        """A job's cycle is over: taken, held job-ms, finished, and the next fetch back."""
        meter = self.meter
        meter.record("cycle", (back - slot.taken_at) * 1e6)
        self.done += 1  # counted once a round (_round)
        if (enqueued := job.enqueued_us) is not None:
            meter.record("e2e", finished_us - enqueued)
