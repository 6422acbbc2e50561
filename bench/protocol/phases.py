"""What each script costs Redis, alone on a small queue: calls, µs and commands per call.

Each phase runs one script ``calls`` times; INFO commandstats deltas give the EVALSHA calls
and µs (inside Redis) and every command the phase ran, the scripts' own included (so
echomq-deadline's extra ZADD and ZREM show). The statistics are not reset, so nothing else
may use the server meanwhile.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import redis

from bench.errors import first_line
from bench.protocol.base import QueueProtocol
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Job, Producer, Queue, Worker, job_payload, now_ms
from bench.protocol.sweep import AtomicSweeper

# A phase's commands per call: command name -> calls / the phase's calls.
Commands = dict[str, float]
Row = tuple[str, int, float, Commands]
T = TypeVar("T")
Meter = Callable[[Callable[[], object], int], T]  # meter(action, calls): what calls of action measured


def _measure(client: Client, action: Callable[[], object], calls: int) -> tuple[int, float, Commands]:
    before = CommandStats.read(client)
    for _ in range(calls):
        action()
    delta = CommandStats.read(client).since(before)
    n = delta.calls.get("evalsha", 0)
    per_call = {name: count / max(calls, 1) for name, count in delta.calls.items() if count}
    return n, delta.usec.get("evalsha", 0) / max(n, 1), per_call


def measure_phases(client: Client, calls: int, protocol: str | QueueProtocol = "echomq") -> list[Row]:
    """(phase, EVALSHA calls, server µs per call, commands per call) for each phase, on a
    queue of ``calls`` jobs. Every phase of one protocol runs on one queue, in this order."""
    found = run_phases(client, calls, protocol, lambda action, n: _measure(client, action, n))
    return [(name, *measured) for name, measured in found]


# The instant a fixed clock starts at (2023-11-14T22:13:20Z): a 13-digit ms timestamp like a real one.
FIXED_START_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Inputs:
    """What the phases' calls carry besides the queue's state: the time, the worker, the queue's name.
    Live by default (the wall clock, a random worker and queue: a shared server); ``fixed`` ones
    make the same calls carry the same bytes, so they cost the same instructions."""

    clock: Callable[[], int] = now_ms
    worker_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    queue_name: str = field(default_factory=lambda: fresh_queue_name("cost"))

    @classmethod
    def fixed(cls, queue_name: str) -> Inputs:
        """A clock ticking 1 ms a call from FIXED_START_MS, one worker id, ``queue_name``."""
        return cls(itertools.count(FIXED_START_MS).__next__, "phases-work0", queue_name)


def run_phases(
    client: Client,
    calls: int,
    protocol: str | QueueProtocol,
    meter: Meter[T],
    inputs: Inputs | None = None,
    lead: int = 0,
    settle: Callable[[], object] = lambda: None,
    until: str | None = None,
) -> list[tuple[str, T]]:
    """Each phase's ``meter(action, calls)`` (commandstats deltas, or instructions counted), on a
    queue of ``calls`` jobs, in this order, ending after ``until`` (None: every phase).

    Each phase calls ``settle()``, then runs ``lead`` calls unmetered (the healthy sweep at most
    SWEEP_LEAD: its calls are long), so the metered calls start past the first calls' one-time
    work (a list or a stream created) and with Lua's collector in its rhythm."""
    inputs = inputs or Inputs()
    rows: list[tuple[str, T]] = []

    def phase(name: str, action: Callable[[], object], lead_calls: int = lead) -> bool:
        """Whether the phases end here, once ``name``'s are measured."""
        settle()
        for _ in range(lead_calls):
            action()
        rows.append((name, meter(action, calls)))
        return name == until

    queue = Queue.open(client, inputs.queue_name, protocol=protocol, clock=inputs.clock)
    try:
        producer = Producer(queue)
        worker = Worker(queue, "two_call", worker_id=inputs.worker_id)
        data = job_payload(0, inputs.clock() * 1000)
        if phase("addJob", lambda: producer.add(data)):
            return rows
        held: list[Job] = []
        if phase("moveToActive", lambda: held.append(worker.fetch())):  # type: ignore[arg-type]
            return rows
        to_finish = iter(held)
        if phase("moveToFinished (fetch next = 0)", lambda: worker.finish(next(to_finish), fetch_next=False)):
            return rows
        producer.add_batch(lead + calls + 1, enqueued_us=inputs.clock() * 1000)
        current = [worker.fetch()]

        def fused() -> None:
            job = current[0]
            assert job is not None
            current[0] = worker.finish(job, fetch_next=True).next_job

        if phase("moveToFinished (fetch next = 1)", fused):
            return rows
        job = current[0]
        assert job is not None
        if phase("extendLock", lambda: worker.extend_lock(job)):
            return rows
        producer.add_batch(HEALTHY_ACTIVE - 1, enqueued_us=inputs.clock() * 1000)
        while worker.fetch() is not None:
            pass
        sweeper = AtomicSweeper(queue)
        sweeper.sweep()  # a protocol's first sweep may do more (echomq-deadline's full pass)
        phase(HEALTHY_SWEEP, sweeper.sweep, min(lead, SWEEP_LEAD))
    finally:
        queue.delete()
    return rows


HEALTHY_SWEEP = "moveStalledJobsToWait (100 active, healthy)"
# The healthy sweep's lead at most: Redis steps Lua's collector every 50 script calls, so 50
# calls past a full collection reach its rhythm, and a sweep's call is the longest of the phases.
SWEEP_LEAD = 50
HEALTHY_ACTIVE = 100  # the healthy sweep's active list: the fused phase's last job and 99 more
QUEUE_KEYS = 20  # a queue's own keys (wait, active, events, its counters...), at most


def keys_added(calls: int, lead: int) -> int:
    """The most keys run_phases holds at once on a server: each job's hash (addJob's, the fused
    phase's and the sweep's), the locks held at once (the healthy sweep's active list), and the
    queue's own."""
    jobs = 2 * (lead + calls) + 1 + HEALTHY_ACTIVE - 1
    return jobs + HEALTHY_ACTIVE + QUEUE_KEYS


def refusal(client: Client, protocol: str | QueueProtocol) -> str | None:
    """Why this server refuses the protocol's scripts (a command it lacks, a flag it rejects), in
    its own first line; None where every phase runs. Each phase twice, on a queue of its own."""
    try:
        run_phases(client, 2, protocol, lambda action, calls: [action() for _ in range(calls)])
    except redis.ResponseError as exc:
        return first_line(exc)
    return None


# A worker's cycle, as phases of measure_phases: the fused one is one moveToFinished with
# fetch next; the two-call one is moveToFinished without it, then moveToActive.
CYCLES: dict[str, tuple[str, ...]] = {
    "fused cycle": ("moveToFinished (fetch next = 1)",),
    "two-call cycle": ("moveToFinished (fetch next = 0)", "moveToActive"),
    "extendLock": ("extendLock",),
    "healthy sweep (100 active)": (HEALTHY_SWEEP,),
}


def cycle_commands(rows: Sequence[Row]) -> dict[str, Commands]:
    """Commands a worker's cycle runs (CYCLES), from one protocol's phases."""
    by_name = {row[0]: Counter(row[3]) for row in rows}  # a phase's counts are all above 0
    return {cycle: dict(sum((by_name[p] for p in phases), Counter())) for cycle, phases in CYCLES.items()}


def cycle_usec(rows: Sequence[Row]) -> dict[str, float]:
    """Redis µs a worker's cycle (CYCLES) spends inside its scripts, from one protocol's phases:
    the sum of its phases' µs per call (each phase ran once a cycle)."""
    by_name = {row[0]: row[2] for row in rows}
    return {cycle: sum(by_name[phase] for phase in phases) for cycle, phases in CYCLES.items()}


def command_difference(base: Commands, other: Commands) -> Commands:
    """Per command, what ``other`` runs a call beyond ``base`` (negative: fewer); zeros left out."""
    names = set(base) | set(other)
    diff = {n: other.get(n, 0.0) - base.get(n, 0.0) for n in names}
    return {n: d for n, d in diff.items() if abs(d) > 1e-9}
