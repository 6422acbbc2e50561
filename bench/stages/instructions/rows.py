"""Counting each point's instructions on a callgrind'd server, and the rows of instructions.csv.

A protocol's steps are counted on a server started anew, on a queue at one stated state
(bench.protocol.counted.QueueState), each after LEAD_CALLS uncounted calls, over 2N calls and over
their first N: the 2N count is the figure, and its distance from the first N's per call says
whether it is a cost per call at that state. A baseline is counted over N calls and again over 2N.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from bench.harness.callgrind import CallgrindRedis, Count
from bench.protocol.connection import Client, node_client
from bench.protocol.counted import QueueStaging, baselines, stalled_sweep
from bench.protocol.lua_gc import collect_lua_garbage
from bench.protocol.phases import CYCLES, Inputs, run_phases
from bench.results.instructions import InstructionsCompletedRow, InstructionsPartRow, InstructionsRow
from bench.stages.instructions.parts import PartCost, parts_of
from bench.stages.instructions.plan import Point

# A job of each strategy: fused (one moveToFinished that fetches) and two_call (finish, then fetch).
JOB_CYCLES = ("fused cycle", "two-call cycle")
LAST_CYCLE_PHASE = "moveToFinished (fetch next = 1)"  # the phases run in order: the jobs' last
WARMUP_CALLS = 50  # calls of each baseline before its counted batches, uncounted
# Calls each phase runs before its counted ones, after a full collection of Lua's garbage: the
# first calls after a script is loaded cost more, the collector takes 50 calls to its rhythm (Redis
# steps it every 50), and the jobs in flight pass 128, where echomq-deadline's index of them turns
# a skiplist (a listpack's insert scans it: with no lead, echomq-deadline's moveToActive counted
# 5.4% more a call over 2N calls than over their first N).
LEAD_CALLS = 150
PHASES_QUEUE = "instr-phases"
T = TypeVar("T")
# The columns every row of one server's counts carries: run_id, profile, server and the machine's
Shared = Mapping[str, object]


@dataclass(frozen=True)
class Counted:
    """One step's count on one server: per unit over the 2N batch, and over the N batch."""

    step: str
    unit: str  # "call", "job" or "stalled id"
    active_size: int
    calls: int  # the counted batch's runs (a sweep: 1)
    per_unit: float
    per_unit_n: float | None = None  # None: one sweep, no second batch
    parts: tuple[PartCost, ...] = ()  # the per-unit count split by part (bench.stages.instructions.parts)
    completed_size: int = 0  # the completed set as the phases began (QueueState); 0 for the others


def _paired(step: str, unit: str, once: Count, twice: Count, calls: int, completed: int = 0) -> Counted:
    """A step's figure from its 2N batch, beside its N batch's, split by part as the 2N batch was."""
    parts = tuple(parts_of(twice.functions, twice.total, 2 * calls))
    return Counted(step, unit, 0, 2 * calls, twice.total / (2 * calls), once.total / calls, parts, completed)


def fresh(client: Client) -> None:
    """The stage's own server as it started: no keys (no table resized or rehashing from the last
    point) and a new Lua interpreter (no other point's scripts on its heap for the collector to
    walk), so a point counts the same whatever ran before it."""
    client.flushall()
    client.script_flush()


def _at_state(
    server: CallgrindRedis,
    client: Client,
    protocol: str,
    calls: int,
    staging: QueueStaging,
    meter: Callable[[Callable[[], object], int], T],
    until: str | None = None,
) -> dict[str, T]:
    """Each phase of ``protocol`` (up to ``until``) measured by ``meter`` over ``calls`` calls, on
    the server started anew and a queue at ``staging``'s state. A new server has no history: the
    same calls counted twice on one server, emptied between, put addJob 0.8% apart (its allocator's
    free lists were the last batch's), and a point counts the same whichever ran before it."""
    staging.prepare(client, protocol, PHASES_QUEUE)  # before the restart: no history of it in the count
    server.restart()
    staging.stage(client, protocol, PHASES_QUEUE)
    settle = functools.partial(collect_lua_garbage, node_client(client, PHASES_QUEUE))
    inputs = Inputs.fixed(PHASES_QUEUE)
    return dict(
        run_phases(client, calls, protocol, meter, inputs, lead=LEAD_CALLS, settle=settle, until=until)
    )


def count_point(
    server: CallgrindRedis, client: Client, point: Point, calls: int, staging: QueueStaging
) -> list[Counted]:
    """Every step of ``point``, counted on ``server`` (``client`` connected to it) emptied first; a
    protocol's phases at ``staging``'s state, over 2N calls and their first N."""
    counter = server.measure  # (action, calls) -> instructions
    fresh(client)
    if point.kind == "baselines":
        baselines(client, WARMUP_CALLS, lambda action, n: [action() for _ in range(n)])
        once, twice = baselines(client, calls, counter), baselines(client, 2 * calls, counter)
        return [_paired(step, "call", n, n2, calls) for (step, n), (_, n2) in zip(once, twice, strict=True)]
    if point.kind == "cycles":  # a fused and a two-call job, N each (the phases up to the fused one)
        at = staging.at(point.completed_size)
        phases = _at_state(server, client, point.protocol, calls, at, counter, until=LAST_CYCLE_PHASE)
        totals = {cycle: sum((phases[p] for p in CYCLES[cycle]), Count(0)).total for cycle in JOB_CYCLES}
        return [
            Counted(cycle, "job", 0, calls, total / calls, completed_size=at.state.completed)
            for cycle, total in totals.items()
        ]
    if point.kind == "phases":  # each phase run 2N times, counted in halves

        def in_halves(action: Callable[[], object], twice: int) -> tuple[Count, Count]:
            return server.measure(action, twice // 2), server.measure(action, twice - twice // 2)

        halves = _at_state(server, client, point.protocol, 2 * calls, staging, in_halves)
        completed = staging.state.completed
        counted = [_paired(step, "call", n, n + rest, calls, completed) for step, (n, rest) in halves.items()]
        for cycle in JOB_CYCLES:  # a worker's cycle is a job: the sum of its phases, each once
            firsts = sum((halves[phase][0] for phase in CYCLES[cycle]), Count(0))
            wholes = sum((sum(halves[phase], Count(0)) for phase in CYCLES[cycle]), Count(0))
            counted.append(_paired(cycle, "job", firsts, wholes, calls, completed))
        return counted
    found = stalled_sweep(
        client, point.protocol, point.variant, point.active_size, counter, Inputs.fixed("instr-s")
    )
    size = point.active_size
    parts = tuple(parts_of(found.functions, found.total, size))
    return [Counted(f"sweep {point.variant}", "stalled id", size, 1, found.total / size, parts=parts)]


def _diff_pct(counted: Counted) -> float | None:
    if not counted.per_unit_n:  # None (one sweep) or 0
        return None
    return round((counted.per_unit / counted.per_unit_n - 1) * 100, 3)


def row_of(
    point: Point, command: Counted, server: Counted, shared: Shared, seed_pinned: bool
) -> InstructionsRow:
    """One step's row from its two counts: inside command execution, and the whole request."""
    return InstructionsRow(
        protocol=point.protocol,
        step=command.step,
        active_size=command.active_size,
        completed_size=command.completed_size,
        unit=command.unit,
        calls=command.calls,
        instructions_per_call=round(command.per_unit, 1),
        server_instructions_per_call=round(server.per_unit, 1),
        instructions_2n_diff_pct=_diff_pct(command),
        server_instructions_2n_diff_pct=_diff_pct(server),
        seed_pinned=seed_pinned,
        **shared,  # type: ignore[arg-type]
    )


def part_rows_of(
    points: Sequence[Point], server: list[list[Counted]], shared: Shared
) -> list[InstructionsPartRow]:
    """The whole server's count of each step, by part: instructions_parts.csv."""
    rows = []
    for point, counted in zip(points, server, strict=True):
        for step in counted:
            whole = sum(part.instructions for part in step.parts)
            rows += [
                InstructionsPartRow(
                    protocol=point.protocol,
                    step=step.step,
                    active_size=step.active_size,
                    unit=step.unit,
                    part=part.part,
                    detail=part.detail,
                    server_instructions_per_call=round(part.instructions, 1),
                    share_pct=round(part.instructions / whole * 100, 2) if whole else 0.0,
                    **shared,  # type: ignore[arg-type]
                )
                for part in step.parts
            ]
    return rows


def rows_of(
    points: Sequence[Point], by_scope: dict[str, list[list[Counted]]], shared: Shared, seed_pinned: bool
) -> list[InstructionsRow]:
    """The rows of every point, the two scopes' counts side by side (the same steps, in order)."""
    return [
        row_of(point, a, b, shared, seed_pinned)
        for point, command, server in zip(points, by_scope["command"], by_scope["server"], strict=True)
        for a, b in zip(command, server, strict=True)
    ]


def completed_rows_of(
    counted: Sequence[tuple[str, Counted]], shared: Shared, seed_pinned: bool
) -> list[InstructionsCompletedRow]:
    """Each (protocol, job count) at its completed set's size, inside command execution, by size:
    instructions_completed.csv."""
    jobs = sorted(
        ((protocol, c) for protocol, c in counted if c.step in JOB_CYCLES),
        key=lambda pc: (pc[0], JOB_CYCLES.index(pc[1].step), pc[1].completed_size),
    )
    return [
        InstructionsCompletedRow(
            protocol=protocol,
            step=job.step,
            completed_size=job.completed_size,
            unit=job.unit,
            calls=job.calls,
            instructions_per_call=round(job.per_unit, 1),
            seed_pinned=seed_pinned,
            **shared,  # type: ignore[arg-type]
        )
        for protocol, job in jobs
    ]
