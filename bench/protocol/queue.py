"""The protocol client: a queue handle, a producer, and a worker with two strategies."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.errors import BenchError, ProtocolError
from bench.protocol.connection import CountingRedis
from bench.protocol.keys import QueueKeys
from bench.protocol.scripts import Scripts, load_scripts

Strategy = Literal["fused", "two_call"]
STRATEGIES: tuple[Strategy, ...] = ("fused", "two_call")

# Return codes of moveToFinished (protocol.md).
JOB_MISSING, LOCK_MISSING, NOT_ACTIVE, LOCK_MISMATCH, JOB_EXISTS = -1, -2, -3, -6, -5


def now_ms() -> int:
    return int(time.time() * 1000)


def now_us() -> int:
    return time.time_ns() // 1000


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Queue:
    """One queue on one client: its keys and its loaded scripts."""

    client: CountingRedis
    keys: QueueKeys
    scripts: Scripts

    @classmethod
    def open(cls, client: CountingRedis, name: str, extra_scripts: tuple[str, ...] = ()) -> Queue:
        return cls(client, QueueKeys(name), load_scripts(client, extra_scripts))

    def with_client(self, client: CountingRedis) -> Queue:
        """The same queue on another connection (scripts re-registered on it)."""
        return Queue.open(client, self.keys.name, tuple(self.scripts.extra))

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

    def _args(self, data: str, job_id: str, priority: int, delay_ms: int) -> list[Any]:
        return [self.queue.keys.prefix, job_id, self.name, data, now_ms(), priority, delay_ms]

    def add(self, data: str | None = None, *, job_id: str = "", priority: int = 0, delay_ms: int = 0) -> str:
        """Add one job; returns its id. An id that exists is an error (-5)."""
        payload = data if data is not None else job_payload()
        reply = self.queue.scripts.add_job(
            self.queue.keys.add_job_keys(), self._args(payload, job_id, priority, delay_ms)
        )
        if isinstance(reply, int) and reply == JOB_EXISTS:
            raise ProtocolError("addJob", reply, job_id)
        return _text(reply)

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
        sha = self.queue.scripts.add_job.sha
        keys = self.queue.keys.add_job_keys()
        pipe = self.queue.client.pipeline(transaction=False)
        for _ in range(count):
            data = job_payload(payload_bytes, enqueued_us)
            pipe.evalsha(sha, len(keys), *keys, *self._args(data, "", 0, 0))
        return [_text(r) for r in pipe.execute()]


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

    def _limiter_args(self) -> list[int]:
        return [self.options.limiter_max, self.options.limiter_ms]

    def _fetch_args(self, token: str) -> list[Any]:
        """moveToActive's ARGV, spelled once for a single fetch and a batch."""
        return [self.queue.keys.prefix, now_ms(), token, self.options.lock_ms, *self._limiter_args()]

    def fetch(self) -> Job | None:
        """moveToActive: take the next job and lock it; None when there is none."""
        token = self._new_token()
        reply = self.queue.scripts.move_to_active(
            self.queue.keys.move_to_active_keys(), self._fetch_args(token)
        )
        return _job_from_reply(reply, token)

    def fetch_batch(self, count: int) -> list[Job]:
        """moveToActive ``count`` times in one pipeline (one round trip); the jobs taken,
        in order, each under its own token: fewer than ``count`` when wait ran short.

        As in Producer.add_batch, the pipeline calls EVALSHA with the known SHA."""
        if count <= 0:
            return []
        sha = self.queue.scripts.move_to_active.sha
        keys = self.queue.keys.move_to_active_keys()
        tokens = [self._new_token() for _ in range(count)]
        pipe = self.queue.client.pipeline(transaction=False)
        for token in tokens:
            pipe.evalsha(sha, len(keys), *keys, *self._fetch_args(token))
        jobs = (_job_from_reply(reply, token) for reply, token in zip(pipe.execute(), tokens, strict=True))
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
        target = "failed" if failed else "completed"
        keys = self.queue.keys
        reply = self.queue.scripts.move_to_finished(
            keys.move_to_finished_keys(job.id, target),
            [
                job.id,
                now_ms(),
                "failedReason" if failed else "returnvalue",
                value,
                target,
                1 if fetch_next else 0,
                keys.prefix,
                job.token,
                self.options.lock_ms,
                self.options.keep,
                self.options.metrics_minutes,
                *self._limiter_args(),
            ],
        )
        if isinstance(reply, int):
            return FinishOutcome(None, reply)
        return FinishOutcome(_job_from_reply(reply, job.token))

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
        reply = self.queue.scripts.extend_lock(
            self.queue.keys.extend_lock_keys(job.id), [job.token, self.options.lock_ms, job.id]
        )
        return int(reply) == 1

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


def _job_from_reply(reply: Any, token: str) -> Job | None:
    """A fetch-step reply ``{fields, id, 0, 0}``; None when no job was taken."""
    if not isinstance(reply, Sequence) or len(reply) < 2 or not isinstance(reply[0], list):
        return None
    flat = [_text(v) for v in reply[0]]
    return Job(id=_text(reply[1]), fields=dict(zip(flat[::2], flat[1::2], strict=True)), token=token)
