"""The calls the instructions stage counts beside the phases (bench.protocol.phases): two
baselines a queue's scripts are read against, and one sweep of an active list whose every lock
lapsed.

Each is measured by a ``meter(action, calls)`` the caller brings (a callgrind'd server's count);
the inputs are fixed (phases.Inputs.fixed: the clock, the worker, the queue's name), so the same
calls carry the same bytes and cost the same instructions run after run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from bench.errors import BenchError
from bench.protocol.base import QueueProtocol
from bench.protocol.connection import Client
from bench.protocol.phases import Inputs
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions
from bench.protocol.sweep import AtomicSweeper, SweepResult, make_sweeper

T = TypeVar("T")
Meter = Callable[[Callable[[], object], int], T]

PING = "PING"
RETURN_ONE = "EVALSHA return 1"
# The same script call with ten redis.call's in it: against RETURN_ONE, the price of one redis.call.
# EXISTS of a missing key, its key named in the script (no KEYS to pass), so little else differs.
TEN_CALLS = "EVALSHA 10 redis.call EXISTS"
TEN_CALLS_N = 10
TEN_CALLS_SCRIPT = "\n".join(["redis.call('EXISTS', 'emq-price-of-a-call')"] * TEN_CALLS_N) + "\nreturn 1"
BASELINES = (PING, RETURN_ONE, TEN_CALLS)
# High, so every reclaim takes the same path (to wait), as in the sweep stage.
SWEEP_MAX_STALLED = 1_000_000_000
LOCK_MS = 24 * 3600 * 1000  # no lock lapses by itself while a sweep is staged


def baselines(client: Client, calls: int, meter: Meter[T]) -> list[tuple[str, T]]:
    """A PING, an EVALSHA of a script that only returns, and one that runs ten redis.call's
    first: what any command and any script call cost Redis before their own work, and what a
    redis.call adds to a script."""
    sha = client.script_load("return 1")
    ten = client.script_load(TEN_CALLS_SCRIPT)
    return [
        (PING, meter(client.ping, calls)),
        (RETURN_ONE, meter(lambda: client.evalsha(sha, 0), calls)),
        (TEN_CALLS, meter(lambda: client.evalsha(ten, 0), calls)),
    ]


def stalled_sweep(
    client: Client, protocol: str | QueueProtocol, variant: str, size: int, meter: Meter[T], inputs: Inputs
) -> T:
    """One sweep by ``variant`` of ``size`` active jobs whose locks all lapsed after the previous
    sweep marked them, measured by ``meter(sweep, 1)``; a sliced sweep calls until its pass is
    done, with no time budget (a budget would end its calls by the clock, not by the ids).
    Every id must come back reclaimed."""
    queue = Queue.open(client, inputs.queue_name, protocol=protocol, clock=inputs.clock)
    try:
        Producer(queue, name="sweep").add_batch(size, enqueued_us=inputs.clock() * 1000)
        worker = Worker(queue, "two_call", options=WorkerOptions(lock_ms=LOCK_MS), worker_id=inputs.worker_id)
        ids = [job.id for job in worker.fetch_batch(size)]  # the oldest fetch first
        if len(ids) != size:
            raise BenchError(f"fetched {len(ids)} of {size} jobs while staging a sweep")
        AtomicSweeper(queue, max_stalled=SWEEP_MAX_STALLED).sweep()  # the mark pass: every lock alive
        pipe = client.pipeline(transaction=False)
        pipe.unlink(*(queue.keys.lock(job_id) for job_id in ids))
        queue.protocol.leave_stalled(pipe, queue.keys, ids, inputs.clock() - 1)
        queue.protocol.reset_sweep_throttles(pipe, queue.keys)
        pipe.execute()
        sweeper = make_sweeper(variant, queue, max_stalled=SWEEP_MAX_STALLED, budget_us=0)
        swept: list[SweepResult] = []
        measured = meter(lambda: swept.append(sweeper.sweep()), 1)
        reclaimed = sum(len(result.moved) + len(result.failed) for result in swept)
        if reclaimed != size:
            raise BenchError(f"the {variant} sweep reclaimed {reclaimed} of {size} stalled jobs")
        return measured
    finally:
        queue.delete()
