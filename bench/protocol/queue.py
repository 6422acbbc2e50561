"""The protocol client: a queue handle, a producer, and a worker with three strategies.

Every call is built by the queue's protocol (base.py), so the same Producer and Worker
drive any protocol. They send through a ``Sender``: the queue, or an ``AutoPipeline``.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import redis

from bench.errors import BenchError, ProtocolError
from bench.protocol.base import Job, QueueProtocol, ScriptCall, WorkerOptions, protocol_named
from bench.protocol.base import text as _text
from bench.protocol.connection import Client
from bench.protocol.keys import QueueKeys
from bench.protocol.scripts import Scripts, load_scripts

Strategy = Literal["fused", "two_call", "two_call_pipelined"]
STRATEGIES: tuple[Strategy, ...] = ("fused", "two_call", "two_call_pipelined")


def now_ms() -> int:
    return int(time.time() * 1000)


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Command:
    """A plain Redis command to send beside script calls (BZPOPMIN, a probe's EVALSHA)."""

    args: tuple[Any, ...]


Call = ScriptCall | Command


class Sender(Protocol):
    """Sends calls to Redis, together and in order (an auto-pipelined connection: beside other
    callers' calls). One reply a call; a call Redis refused comes back as its exception, while
    an exchange that failed (connection, timeout) raises. ``label`` names it for a timer."""

    def send(self, calls: Sequence[Call], label: str = "") -> list[Any]: ...


@dataclass
class Queue:
    """One queue on one client: its protocol, its keys and its loaded scripts."""

    client: Client
    keys: QueueKeys
    scripts: Scripts
    protocol: QueueProtocol
    # The ms timestamp every call of this queue's producers, workers and sweepers passes: the
    # wall clock, or a fixed one where the same calls must cost the same (instruction counts).
    clock: Callable[[], int] = now_ms

    @classmethod
    def open(
        cls,
        client: Client,
        name: str,
        extra_scripts: tuple[str, ...] = (),
        protocol: str | QueueProtocol = "echomq",
        clock: Callable[[], int] = now_ms,
    ) -> Queue:
        proto = protocol_named(protocol) if isinstance(protocol, str) else protocol
        scripts = load_scripts(client, extra_scripts, proto.script_sources())
        return cls(client, proto.keys(name), scripts, proto, clock)

    def with_client(self, client: Client) -> Queue:
        """The same queue on another connection (scripts re-registered on it)."""
        return Queue.open(client, self.keys.name, tuple(self.scripts.extra), self.protocol, self.clock)

    def call(self, call: ScriptCall) -> Any:
        """Send one call (EVALSHA; redis-py loads the script again after a NOSCRIPT)."""
        return self.scripts.by_step(call.script)(call.keys, call.args)

    def pipeline_call(self, pipe: Any, call: ScriptCall) -> None:
        """Queue one call on a pipeline. EVALSHA with the known SHA: a pipeline holding a
        Script object would first send SCRIPT EXISTS, a second round trip. Through
        execute_command: a cluster pipeline refuses its evalsha method, not the command
        (it routes it by its keys, which share the queue's slot)."""
        sha = self.scripts.by_step(call.script).sha
        pipe.execute_command("EVALSHA", sha, len(call.keys), *call.keys, *call.args)

    def queue_on(self, pipe: Any, call: Call) -> None:
        if isinstance(call, Command):
            pipe.execute_command(*call.args)
        else:
            self.pipeline_call(pipe, call)

    def send(self, calls: Sequence[Call], label: str = "") -> list[Any]:
        """The queue as a Sender: one call on its own (a script reloads itself after a
        NOSCRIPT), several in one pipeline; one round trip either way."""
        if len(calls) == 1:
            (call,) = calls
            try:
                if isinstance(call, Command):
                    return [self.client.execute_command(*call.args)]
                return [self.call(call)]
            except redis.ResponseError as exc:
                return [exc]
        pipe = self.client.pipeline(transaction=False)
        for call in calls:
            self.queue_on(pipe, call)
        return list(pipe.execute(raise_on_error=False))

    def pause(self) -> None:
        self.client.hset(self.keys.meta, "paused", "1")

    def key_names(self) -> Iterator[str]:
        """Every key of this queue that exists now (SCAN, never KEYS)."""
        for key in self.client.scan_iter(match=self.keys.prefix + "*", count=1000):
            yield _text(key)

    def delete(self) -> int:
        """Remove this queue's keys and nothing else. Returns how many were removed."""
        removed, names = 0, self.key_names()
        while batch := list(itertools.islice(names, 1000)):
            removed += int(self.client.unlink(*batch))
        return removed


def job_payload(payload_bytes: int = 0, enqueued_us: int | None = None) -> str:
    """Job data: the enqueue time in µs (now, or ``enqueued_us``), padded to about ``payload_bytes``."""
    t_us = now_us() if enqueued_us is None else enqueued_us
    return json.dumps({"t_us": t_us, "pad": "x" * max(0, payload_bytes)})


def raised(reply: Any) -> Any:
    """A reply, or the exception of a call Redis refused, raised."""
    if isinstance(reply, Exception):
        raise reply
    return reply


class Producer:
    """Adds jobs, one at a time or in pipelined batches, through ``sender`` (default: the queue)."""

    def __init__(self, queue: Queue, name: str = "bench", sender: Sender | None = None) -> None:
        self.queue = queue
        self.name = name
        self.sender = sender

    def _call(self, data: str, job_id: str, priority: int, delay_ms: int) -> ScriptCall:
        return self.queue.protocol.add_job(
            self.queue.keys,
            name=self.name,
            data=data,
            job_id=job_id,
            priority=priority,
            delay_ms=delay_ms,
            now_ms=self.queue.clock(),
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
        """Add ``count`` jobs in one pipeline (one round trip); returns their ids. An open-loop
        producer behind schedule passes its slot's time as ``enqueued_us``, so end-to-end
        latency includes the time spent behind (no coordinated omission)."""
        if count <= 0:
            return []
        calls = self.batch_calls(count, payload_bytes, enqueued_us)
        replies = (self.sender or self.queue).send(calls, f"addJob x{count}")
        return self.read_ids(replies)

    def batch_calls(
        self, count: int, payload_bytes: int = 0, enqueued_us: int | None = None
    ) -> list[ScriptCall]:
        """``count`` addJob calls carrying one payload: a batch's jobs share its enqueue time, so
        the data is encoded once (a load generator sends these beside other calls)."""
        data = job_payload(payload_bytes, enqueued_us)
        return [self._call(data, "", 0, 0) for _ in range(count)]

    def read_ids(self, replies: Sequence[Any]) -> list[str]:
        """The ids of a batch's addJob replies (a refused call raises)."""
        return [self.queue.protocol.read_added(raised(r), "").job_id for r in replies]


@dataclass
class FinishOutcome:
    """What a finish returned: the next job (fused fetch), or none."""

    next_job: Job | None
    code: int = 0


class FinishRefused(ProtocolError):
    """moveToFinished refused a job. With two_call_pipelined the fetch went out beside it and
    may still have taken the next job: ``next_job``, now the caller's to hold."""

    def __init__(self, code: int, job_id: str, next_job: Job | None = None) -> None:
        super().__init__("moveToFinished", code, job_id)
        self.next_job = next_job


# Each exchange's name, as a timer shows it (Locust's request names).
LABEL_FUSED = "moveToFinished+fetch"
LABEL_FINISH = "moveToFinished"
LABEL_FETCH = "moveToActive"
LABEL_PIPELINED = "moveToFinished+moveToActive"
LABEL_IDLE = "marker wait (idle)"
FINISH_LABELS = frozenset({LABEL_FUSED, LABEL_FINISH, LABEL_PIPELINED})  # exchanges that finish a job


@dataclass
class Worker:
    """Finishes jobs and fetches the next, by one of three strategies.

    ``fused``: one moveToFinished with fetch next = 1, one call a job.
    ``two_call``: moveToFinished with fetch next = 0; on its reply, moveToActive.
    ``two_call_pipelined``: the same two calls in one exchange: one round trip, two
    scripts, and a gap between them where other clients' commands run.
    Calls go through ``sender`` (default: the queue itself, one exchange each).
    """

    queue: Queue
    strategy: Strategy = "fused"
    options: WorkerOptions = field(default_factory=WorkerOptions)
    worker_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    sender: Sender | None = None
    _fetches: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise BenchError(f"unknown worker strategy {self.strategy!r}; use one of {', '.join(STRATEGIES)}")

    def _send(self, calls: Sequence[Call], label: str) -> list[Any]:
        return (self.sender or self.queue).send(calls, label)

    def new_token(self) -> str:
        # A token per fetch, so a lock can be traced to the fetch that took it.
        self._fetches += 1
        return f"{self.worker_id}:{self._fetches}"

    def fetch_call(self, token: str) -> ScriptCall:
        return self.queue.protocol.move_to_active(
            self.queue.keys, token=token, options=self.options, now_ms=self.queue.clock()
        )

    def read_job(self, reply: Any, token: str) -> Job | None:
        """A fetch reply as the job taken under ``token``; None when none was."""
        fetched = self.queue.protocol.read_fetched(reply)
        return Job(fetched[0], fetched[1], token) if fetched is not None else None

    def fetch(self) -> Job | None:
        """moveToActive: take the next job and lock it; None when there is none."""
        token = self.new_token()
        (reply,) = self._send([self.fetch_call(token)], LABEL_FETCH)
        return self.read_job(raised(reply), token)

    def fetch_batch(self, count: int) -> list[Job]:
        """moveToActive ``count`` times in one exchange (one round trip); the jobs taken,
        in order, each under its own token: fewer than ``count`` when wait ran short."""
        if count <= 0:
            return []
        tokens = [self.new_token() for _ in range(count)]
        replies = self._send([self.fetch_call(token) for token in tokens], f"{LABEL_FETCH} x{count}")
        jobs = (self.read_job(raised(reply), token) for reply, token in zip(replies, tokens, strict=True))
        return [job for job in jobs if job is not None]

    def finish_call(
        self, job: Job, *, fetch_next: bool, failed: bool = False, value: str = "ok"
    ) -> ScriptCall:
        return self.queue.protocol.move_to_finished(
            self.queue.keys,
            job,
            fetch_next=fetch_next,
            failed=failed,
            value=value,
            options=self.options,
            now_ms=self.queue.clock(),
        )

    def read_finish(self, reply: Any, job: Job) -> FinishOutcome:
        """A moveToFinished reply: its refusal code (negative), or the next job (fused)."""
        if isinstance(reply, int) and reply < 0:
            return FinishOutcome(None, reply)
        return FinishOutcome(self.read_job(reply, job.token))

    def finish(self, job: Job, *, fetch_next: bool, failed: bool = False, value: str = "ok") -> FinishOutcome:
        """moveToFinished. With ``fetch_next`` the next job comes back locked with the same token."""
        call = self.finish_call(job, fetch_next=fetch_next, failed=failed, value=value)
        (reply,) = self._send([call], LABEL_FUSED if fetch_next else LABEL_FINISH)
        return self.read_finish(raised(reply), job)

    def _finished(self, job: Job, fetch_next: bool) -> Job | None:
        outcome = self.finish(job, fetch_next=fetch_next)
        if outcome.code < 0:
            raise FinishRefused(outcome.code, job.id)
        return outcome.next_job

    def complete_and_next(self, job: Job, want_next: bool = True) -> Job | None:
        """Finish ``job`` (a refusal raises FinishRefused) and, when ``want_next``, get the next
        one by this worker's strategy."""
        if not want_next:
            self._finished(job, fetch_next=False)
            return None
        if self.strategy == "fused":
            return self._finished(job, fetch_next=True)
        if self.strategy == "two_call":
            self._finished(job, fetch_next=False)
            return self.fetch()
        token = self.new_token()
        calls = [self.finish_call(job, fetch_next=False), self.fetch_call(token)]
        finished, fetched = self._send(calls, LABEL_PIPELINED)
        next_job = None if isinstance(fetched, Exception) else self.read_job(fetched, token)
        if isinstance(finished, Exception):
            raise finished
        outcome = self.read_finish(finished, job)
        if outcome.code < 0:
            raise FinishRefused(outcome.code, job.id, next_job)
        raised(fetched)
        return next_job

    def wait_for_work(self, timeout_s: float) -> bool:
        """Block on the marker (BZPOPMIN) instead of spinning; True when woken by it."""
        (reply,) = self._send([Command(("BZPOPMIN", self.queue.keys.marker, timeout_s))], LABEL_IDLE)
        return raised(reply) is not None

    def extend_lock(self, job: Job) -> bool:
        call = self.queue.protocol.extend_lock(
            self.queue.keys, job, options=self.options, now_ms=self.queue.clock()
        )
        (reply,) = self._send([call], "extendLock")
        return int(raised(reply)) == 1

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
