"""`python -m bench script-cost`: Redis's own µs per call of each script, on a small queue.

Each script runs alone in its own phase; the server's INFO commandstats for
EVALSHA before and after the phase give calls and µs (Redis's time inside the
call, not the network's). Deltas only: the server's statistics are not reset.
Every protocol asked for (``--protocols``) runs the same phases through its own
scripts, side by side; a second table counts the commands each phase runs per
call (the commands inside the scripts too), so a protocol's extra writes on the
hot path (echomq-deadline's ZADD and ZREM) show as counts beside the µs.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable, Sequence

from bench.errors import BenchError
from bench.harness.server import redis_for_run
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client
from bench.protocol.protocol import PROTOCOLS, check_protocol_names
from bench.protocol.queue import Job, Producer, Queue, Worker
from bench.protocol.sweep import AtomicSweeper

# A phase's commands per call: command name -> calls / the phase's calls.
Commands = dict[str, float]
Row = tuple[str, int, float, Commands]


def _measure(client: Client, action: Callable[[], object], calls: int) -> tuple[int, float, Commands]:
    before = CommandStats.read(client)
    for _ in range(calls):
        action()
    delta = CommandStats.read(client).since(before)
    n = delta.calls.get("evalsha", 0)
    per_call = {name: count / max(calls, 1) for name, count in delta.calls.items() if count}
    return n, delta.usec.get("evalsha", 0) / max(n, 1), per_call


def measure_phases(client: Client, calls: int, protocol: str = "echomq") -> list[Row]:
    """(phase, EVALSHA calls, server µs per call, commands per call) for each phase, on a
    queue of ``calls`` jobs. Every phase of one protocol runs on one queue, in this order."""
    rows: list[Row] = []
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
        sweeper = AtomicSweeper(queue)
        sweeper.sweep()  # a protocol's first sweep may do more (echomq-deadline's full pass)
        rows.append(("moveStalledJobsToWait (100 active, healthy)", *_measure(client, sweeper.sweep, calls)))
    finally:
        queue.delete()
    return rows


def measure_scripts(client: Client, calls: int, protocol: str = "echomq") -> list[tuple[str, int, float]]:
    """(script, calls, server µs per call) for each phase of measure_phases."""
    return [(name, n, usec) for name, n, usec, _ in measure_phases(client, calls, protocol)]


def usec_table(by_protocol: dict[str, list[Row]], calls: int) -> str:
    """One row a phase, one µs/call column a protocol."""
    names: Sequence[str] = [row[0] for row in next(iter(by_protocol.values()))]
    lines = [f"{'script':<46}" + "".join(f"{p + ' µs/call':>24}" for p in by_protocol)]
    for i, name in enumerate(names):
        cells = "".join(f"{rows[i][2]:>24.1f}" for rows in by_protocol.values())
        lines.append(f"{name:<46}{cells}")
    counted = {p: sorted({row[1] for row in rows}) for p, rows in by_protocol.items()}
    lines.append(f"EVALSHA calls counted per script: {counted} (asked {calls})")
    return "\n".join(lines)


# A worker's cycle, as phases of measure_phases: the fused one is one moveToFinished with
# fetch next; the two-call one is moveToFinished without it, then moveToActive.
CYCLES: dict[str, tuple[str, ...]] = {
    "fused cycle": ("moveToFinished (fetch next = 1)",),
    "two-call cycle": ("moveToFinished (fetch next = 0)", "moveToActive"),
    "extendLock": ("extendLock",),
    "healthy sweep (100 active)": ("moveStalledJobsToWait (100 active, healthy)",),
}


def cycle_commands(rows: Sequence[Row]) -> dict[str, Commands]:
    """Commands a worker's cycle runs (CYCLES), from one protocol's phases."""
    by_name = {row[0]: row[3] for row in rows}
    found: dict[str, Commands] = {}
    for cycle, phases in CYCLES.items():
        total: Commands = {}
        for phase in phases:
            for name, count in by_name[phase].items():
                total[name] = total.get(name, 0.0) + count
        found[cycle] = total
    return found


def commands_table(by_protocol: dict[str, list[Row]]) -> str:
    """Commands a cycle runs, per protocol; each later protocol's line also says what it
    runs beyond the first one's (``zadd +1``)."""
    cycles = {p: cycle_commands(rows) for p, rows in by_protocol.items()}
    base_name = next(iter(cycles))
    lines = ["commands per cycle (INFO commandstats deltas, the scripts' own commands included):"]
    for cycle in CYCLES:
        lines.append(f"  {cycle}")
        for protocol, counts in cycles.items():
            listed = ", ".join(f"{n} {c:g}" for n, c in sorted(counts[cycle].items()))
            extra = ""
            if protocol != base_name:
                diff = command_difference(cycles[base_name][cycle], counts[cycle])
                extra = "  [" + (", ".join(f"{n} {d:+g}" for n, d in sorted(diff.items())) or "same") + "]"
            lines.append(f"    {protocol:<18} {listed}{extra}")
    return "\n".join(lines)


def command_difference(base: Commands, other: Commands) -> Commands:
    """Per command, what ``other`` runs a call beyond ``base`` (negative: fewer); zeros left out."""
    names = set(base) | set(other)
    diff = {n: other.get(n, 0.0) - base.get(n, 0.0) for n in names}
    return {n: d for n, d in diff.items() if abs(d) > 1e-9}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench script-cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per script (default 2000)")
    parser.add_argument(
        "--protocols",
        default=",".join(PROTOCOLS),
        help=f"comma-separated, measured side by side (default {','.join(PROTOCOLS)})",
    )
    args = parser.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not protocols:
        raise BenchError("--protocols names none; use one or more of " + ", ".join(PROTOCOLS))
    check_protocol_names(protocols)
    with redis_for_run() as (settings, server):
        client = settings.connect()
        try:
            by_protocol = {p: measure_phases(client, args.calls, p) for p in protocols}
        finally:
            client.close()
    print(f"Redis {server.version} ({server.source}); server µs per call, {args.calls} calls each")
    print(usec_table(by_protocol, args.calls))
    print(commands_table(by_protocol))
    return 0
