"""`python -m bench script-cost`: Redis's own µs per call of each script, on a small queue.

Each script runs alone in its own phase; the server's INFO commandstats for
EVALSHA before and after the phase give calls and µs (Redis's time inside the
call, not the network's). Deltas only: the server's statistics are not reset.
Every protocol asked for (``--protocols``, default echomq and bullmq) runs the
same phases through its own scripts, and the table puts them side by side.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable, Sequence

from bench.harness.profile import parse_protocols
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


def measure_scripts(
    client: CountingRedis, calls: int, protocol: str = "echomq"
) -> list[tuple[str, int, float]]:
    """(script, calls, server µs per call) for each script, on a queue of ``calls`` jobs."""
    rows: list[tuple[str, int, float]] = []
    queue = Queue.open(client, f"cost-{uuid.uuid4().hex[:8]}", protocol=protocol)
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
        sweeper = AtomicSweeper(queue)  # a throttled sweep's key is deleted in the same round trip
        rows.append(("moveStalledJobsToWait (100 active, healthy)", *_measure(client, sweeper.sweep, calls)))
    finally:
        queue.delete()
    return rows


def table(by_protocol: dict[str, list[tuple[str, int, float]]], calls: int) -> str:
    """One row a script, one µs/call column a protocol (the calls each counted)."""
    names: Sequence[str] = [name for name, _, _ in next(iter(by_protocol.values()))]
    head = f"{'script':<46}" + "".join(f"{p + ' µs/call':>18}" for p in by_protocol)
    lines = [head]
    for i, name in enumerate(names):
        cells = "".join(f"{rows[i][2]:>18.1f}" for rows in by_protocol.values())
        lines.append(f"{name:<46}{cells}")
    counted = {p: sorted({n for _, n, _ in rows}) for p, rows in by_protocol.items()}
    lines.append(f"EVALSHA calls counted per script: {counted} (asked {calls})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench script-cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per script (default 2000)")
    parser.add_argument(
        "--protocols", default="echomq,bullmq", help="comma-separated (default echomq,bullmq)"
    )
    args = parser.parse_args(argv)
    protocols = parse_protocols(args.protocols, flag="--protocols")
    with redis_for_run() as (settings, server):
        client = settings.connect()
        try:
            by_protocol = {p: measure_scripts(client, args.calls, p) for p in protocols}
        finally:
            client.close()
    print(f"Redis {server.version} ({server.source}); server µs per EVALSHA, {args.calls} calls each")
    print(table(by_protocol, args.calls))
    return 0
