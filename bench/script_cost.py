"""`python -m bench script-cost`: Redis's own µs per call of each script, on a small queue.

Each script runs alone in its own phase; the server's INFO commandstats for
EVALSHA before and after the phase give calls and µs (Redis's time inside the
call, not the network's). Deltas only: the server's statistics are not reset.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable

from bench.harness.server import redis_for_run
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import CountingRedis
from bench.protocol.queue import Job, Producer, Queue, Worker
from bench.protocol.sweep import AtomicSweeper


def _measure(client: CountingRedis, action: Callable[[], object], calls: int) -> tuple[int, float]:
    before = CommandStats.read(client)
    for _ in range(calls):
        action()
    delta = CommandStats.read(client).since(before)
    n = delta.calls.get("evalsha", 0)
    return n, delta.usec.get("evalsha", 0) / max(n, 1)


def measure_scripts(client: CountingRedis, calls: int) -> list[tuple[str, int, float]]:
    """(script, calls, server µs per call) for each script, on a queue of ``calls`` jobs."""
    rows: list[tuple[str, int, float]] = []
    queue = Queue.open(client, f"cost-{uuid.uuid4().hex[:8]}")
    try:
        producer = Producer(queue)
        worker = Worker(queue, "two_call")
        rows.append(("addJob", *_measure(client, producer.add, calls)))
        held: list[Job] = []
        rows.append(("moveToActive", *_measure(client, lambda: held.append(worker.fetch()), calls)))  # type: ignore[arg-type]
        to_finish = iter(held)
        rows.append(
            (
                "moveToFinished (fetch next = 0)",
                *_measure(client, lambda: worker.finish(next(to_finish), fetch_next=False), calls),
            )
        )
        producer.add_batch(calls + 1)
        current = [worker.fetch()]

        def fused() -> None:
            job = current[0]
            assert job is not None
            current[0] = worker.finish(job, fetch_next=True).next_job

        rows.append(("moveToFinished (fetch next = 1)", *_measure(client, fused, calls)))
        job = current[0]
        assert job is not None
        rows.append(("extendLock", *_measure(client, lambda: worker.extend_lock(job), calls)))
        producer.add_batch(99)
        while worker.fetch() is not None:
            pass
        sweeper = AtomicSweeper(queue)
        rows.append(("moveStalledJobsToWait (100 active, healthy)", *_measure(client, sweeper.sweep, calls)))
    finally:
        queue.delete()
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench script-cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per script (default 2000)")
    args = parser.parse_args(argv)
    with redis_for_run() as (settings, server):
        client = settings.connect()
        try:
            rows = measure_scripts(client, args.calls)
        finally:
            client.close()
    print(f"Redis {server.version} ({server.source}); server µs per EVALSHA, {args.calls} calls each")
    print(f"{'script':<46} {'calls':>7} {'µs/call':>8}")
    for name, calls, usec in rows:
        print(f"{name:<46} {calls:>7} {usec:>8.1f}")
    return 0
