"""The protocol client: a queue handle, a producer, and a worker with two strategies.

Every call is built by the queue's protocol (bench/protocol/protocol.py), so
the same Producer and Worker drive any protocol registered there.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.errors import BenchError, ProtocolError
from bench.protocol.connection import CountingRedis
from bench.protocol.keys import QueueKeys
from bench.protocol.protocol import (
    JOB_EXISTS,
    JOB_MISSING,
    LOCK_MISMATCH,
    LOCK_MISSING,
    NOT_ACTIVE,
    QueueProtocol,
    ScriptCall,
    protocol_named,
)
from bench.protocol.protocol import text as _text
from bench.protocol.scripts import Scripts, load_scripts

Strategy = Literal["fused", "two_call"]
STRATEGIES: tuple[Strategy, ...] = ("fused", "two_call")

__all__ = ["JOB_EXISTS", "JOB_MISSING", "LOCK_MISMATCH", "LOCK_MISSING", "NOT_ACTIVE"]


def now_ms() -> int:
    return int(time.time() * 1000)


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class Queue:
    """One queue on one client: its protocol, its keys and its loaded scripts."""

    client: CountingRedis
    keys: QueueKeys
    scripts: Scripts
    protocol: QueueProtocol

    @classmethod
    def open(
        cls,
        client: CountingRedis,
        name: str,
        extra_scripts: tuple[str, ...] = (),
        protocol: str | QueueProtocol = "echomq",
    ) -> Queue:
        proto = protocol_named(protocol) if isinstance(protocol, str) else protocol
        scripts = load_scripts(client, extra_scripts, proto.script_sources())
        return cls(client, proto.keys(name), scripts, proto)

    def with_client(self, client: CountingRedis) -> Queue:
        """The same queue on another connection (scripts re-registered on it)."""
        return Queue.open(client, self.keys.name, tuple(self.scripts.extra), self.protocol)

    def call(self, call: ScriptCall) -> Any:
        """Send one call (EVALSHA; redis-py loads the script again after a NOSCRIPT)."""
        return self.scripts.by_step(call.script)(call.keys, call.args)

    def pipeline_call(self, pipe: Any, call: ScriptCall) -> None:
        """Queue one call on a pipeline. EVALSHA with the known SHA: a pipeline holding a
        Script object would first send SCRIPT EXISTS, a second round trip."""
        pipe.evalsha(self.scripts.by_step(call.script).sha, len(call.keys), *call.keys, *call.args)

    def pause(self, paused: bool = True) -> None:
        self.client.hset(self.keys.meta, "paused", "1" if paused else "0")

    def key_names(self) -> Iterator[str]:
        """Every key of this queue that exists now (SCAN, never KEYS)."""
        for key in self.client.scan_iter(match=self.keys.prefix + "*", count=1000):
            yield _text(key)

    def delete(self) -> int:
        """Remove this queue's keys and nothing else. Returns how many were removed."""
        removed = 0
        batch: list[str] = []
        for key in self.key_names():
            batch.append(key)
            if len(batch) >= 1000:
                removed += int(self.client.unlink(*batch))
                batch.clear()
        if batch:
            removed += int(self.client.unlink(*batch))
        return removed


@dataclass
class Job:
    """A job a worker holds: its id, its hash at fetch time, and the token of its lock."""

    id: str
    fields: dict[str, str]
    token: str

    @property
    def enqueued_us(self) -> int | None:
        """The enqueue time the producer put in the job's data, in µs."""
        try:
            value = json.loads(self.fields.get("data", "{}")).get("t_us")
        except (ValueError, AttributeError):
            return None
        return int(value) if isinstance(value, int | float) else None


def job_payload(payload_bytes: int = 0, enqueued_us: int | None = None) -> str:
    """Job data: the enqueue time in µs (now, or ``enqueued_us``), padded to about ``payload_bytes``."""
    t_us = now_us() if enqueued_us is None else enqueued_us
    return json.dumps({"t_us": t_us, "pad": "x" * max(0, payload_bytes)})


class Producer:
    """Adds jobs, one at a time or in pipelined batches."""

    def __init__(self, queue: Queue, name: str = "bench") -> None:
        self.queue = queue
        self.name = name

    def _call(self, data: str, job_id: str, priority: int, delay_ms: int) -> ScriptCall:
        return self.queue.protocol.add_job(
            self.queue.keys,
            name=self.name,
            data=data,
            job_id=job_id,
            priority=priority,
            delay_ms=delay_ms,
            now_ms=now_ms(),
        )

    def add(self, data: str | None = None, *, job_id: str = "", priority: int = 0, delay_ms: int = 0) -> str:
        """Add one job; returns its id. An id that exists is an error (-5)."""
        payload = data if data is not None else job_payload()
        reply = self.queue.call(self._call(payload, job_id, priority, delay_ms))
        added = self.queue.protocol.read_added(reply, job_id)
        if added.code < 0:
            raise ProtocolError("addJob", added.code, job_id)
        return added.job_id

    def add_batch(self, count: int, payload_bytes: int = 0, *, enqueued_us: int | None = None) -> list[str]:
        """Add ``count`` jobs in one pipeline (one round trip); returns their ids.

        ``enqueued_us`` stamps the jobs with an intended enqueue time instead of
        now: an open-loop producer behind schedule passes its slot's time, so
        end-to-end latency includes the time spent behind (no coordinated omission).

        The pipeline calls EVALSHA with the known SHA: a pipeline holding a
        Script object would first send SCRIPT EXISTS, a second round trip.
        """
        if count <= 0:
            return []
        pipe = self.queue.client.pipeline(transaction=False)
        for _ in range(count):
            self.queue.pipeline_call(pipe, self._call(job_payload(payload_bytes, enqueued_us), "", 0, 0))
        return [self.queue.protocol.read_added(r, "").job_id for r in pipe.execute()]


@dataclass
class WorkerOptions:
    lock_ms: int = 30_000
    keep: int = -1  # -1 every finished job, 0 none, N the newest N
    metrics_minutes: int = 0
    limiter_max: int = 0
    limiter_ms: int = 0


@dataclass
class FinishOutcome:
    """What a finish returned: the next job (fused fetch), or none."""

    next_job: Job | None
    code: int = 0


@dataclass
class Worker:
    """Finishes jobs and fetches the next, by one of two strategies.

    ``fused``: one moveToFinished with fetch next = 1, one round trip a job.
    ``two_call``: moveToFinished with fetch next = 0, then moveToActive.
    """

    queue: Queue
    strategy: Strategy = "fused"
    options: WorkerOptions = field(default_factory=WorkerOptions)
    worker_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _fetches: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise BenchError(f"unknown worker strategy {self.strategy!r}; use one of {', '.join(STRATEGIES)}")

    def _new_token(self) -> str:
        # A token per fetch, so a lock can be traced to the fetch that took it.
        self._fetches += 1
        return f"{self.worker_id}:{self._fetches}"

    def _fetch_call(self, token: str) -> ScriptCall:
        return self.queue.protocol.move_to_active(
            self.queue.keys, token=token, options=self.options, now_ms=now_ms()
        )

    def _job(self, reply: Any, token: str) -> Job | None:
        fetched = self.queue.protocol.read_fetched(reply)
        return Job(fetched[0], fetched[1], token) if fetched is not None else None

    def fetch(self) -> Job | None:
        """moveToActive: take the next job and lock it; None when there is none."""
        token = self._new_token()
        return self._job(self.queue.call(self._fetch_call(token)), token)

    def fetch_batch(self, count: int) -> list[Job]:
        """moveToActive ``count`` times in one pipeline (one round trip); the jobs taken,
        in order, each under its own token: fewer than ``count`` when wait ran short.

        As in Producer.add_batch, the pipeline calls EVALSHA with the known SHA."""
        if count <= 0:
            return []
        tokens = [self._new_token() for _ in range(count)]
        pipe = self.queue.client.pipeline(transaction=False)
        for token in tokens:
            self.queue.pipeline_call(pipe, self._fetch_call(token))
        jobs = (self._job(reply, token) for reply, token in zip(pipe.execute(), tokens, strict=True))
        return [job for job in jobs if job is not None]

    def finish(
        self,
        job: Job,
        *,
        fetch_next: bool,
        failed: bool = False,
        value: str = "ok",
    ) -> FinishOutcome:
        """moveToFinished. With ``fetch_next`` the next job comes back locked with the same token."""
        call = self.queue.protocol.move_to_finished(
            self.queue.keys,
            job,
            fetch_next=fetch_next,
            failed=failed,
            value=value,
            options=self.options,
            now_ms=now_ms(),
        )
        reply = self.queue.call(call)
        code = self.queue.protocol.finish_code(reply)
        if code < 0:
            return FinishOutcome(None, code)
        return FinishOutcome(self._job(reply, job.token))

    def complete_and_next(self, job: Job, want_next: bool = True) -> Job | None:
        """Finish ``job`` and, when ``want_next``, get the next one by this worker's strategy."""
        fused = self.strategy == "fused" and want_next
        outcome = self.finish(job, fetch_next=fused)
        if outcome.code < 0:
            raise ProtocolError("moveToFinished", outcome.code, job.id)
        if fused:
            return outcome.next_job
        return self.fetch() if want_next else None

    def wait_for_work(self, timeout_s: float) -> bool:
        """Block on the marker (BZPOPMIN) instead of spinning; True when woken by it."""
        return self.queue.client.bzpopmin(self.queue.keys.marker, timeout=timeout_s) is not None

    def extend_lock(self, job: Job) -> bool:
        call = self.queue.protocol.extend_lock(self.queue.keys, job, options=self.options)
        return self.queue.protocol.lock_extended(self.queue.call(call))

    def run(self, max_jobs: int, idle_timeout_s: float = 0.2) -> int:
        """Process up to ``max_jobs``; stops when the queue stays empty. Returns jobs finished."""
        done = 0
        job = self.fetch()
        while done < max_jobs:
            if job is None:
                woke = self.wait_for_work(idle_timeout_s)
                job = self.fetch()
                if job is None and not woke:
                    break
                continue
            job = self.complete_and_next(job, want_next=done + 1 < max_jobs)
            done += 1
        return done
