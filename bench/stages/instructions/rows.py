"""Counting each point's instructions on a callgrind'd server, and the rows of instructions.csv.

Every point runs twice, once on a server counting inside command execution and once on one
counting the whole request (bench.harness.callgrind), with the same fixed inputs, so the two
counts are of the same calls. A step of calls is counted over N calls and again over 2N on a
fresh queue, after a warm-up that is not counted (the first calls after a script is loaded cost
more): the 2N count is the figure, and how far its per-call count is from the N count's says
whether it is a cost per call.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.harness.callgrind import Count
from bench.protocol.connection import Client
from bench.protocol.counted import baselines, stalled_sweep
from bench.protocol.phases import CYCLES, Inputs, run_phases
from bench.results.instructions import InstructionsPartRow, InstructionsRow
from bench.stages.instructions.parts import PartCost, parts_of
from bench.stages.instructions.plan import Point

# A job of each strategy: fused (one moveToFinished that fetches) and two_call (finish, then fetch).
JOB_CYCLES = ("fused cycle", "two-call cycle")
WARMUP_CALLS = 50  # calls of each step before the counted batches, uncounted
Counter = Callable[[Callable[[], object], int], Count]  # (action, calls) -> instructions


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


def _warm(action: Callable[[], object], calls: int) -> None:
    for _ in range(calls):
        action()


def _paired(step: str, unit: str, once: Count, twice: Count, calls: int) -> Counted:
    """A step's figure from its 2N batch, beside its N batch's, split by part as the 2N batch was."""
    parts = tuple(parts_of(twice.functions, twice.total, 2 * calls))
    return Counted(step, unit, 0, 2 * calls, twice.total / (2 * calls), once.total / calls, parts)


def _summed(counts: Sequence[Count]) -> Count:
    return functools.reduce(operator.add, counts, Count(0))


def fresh(client: Client) -> None:
    """The stage's own server as it started: no keys (no table resized or rehashing from the last
    point) and a new Lua interpreter (no other point's scripts on its heap for the collector to
    walk), so a point counts the same whatever ran before it."""
    client.flushall()
    client.script_flush()


def count_point(client: Client, point: Point, calls: int, counter: Counter) -> list[Counted]:
    """Every step of ``point``, counted by ``counter`` (a callgrind'd server's count), on a fresh server."""
    fresh(client)
    if point.kind == "baselines":
        baselines(client, WARMUP_CALLS, _warm)
        once, twice = baselines(client, calls, counter), baselines(client, 2 * calls, counter)
        return [_paired(step, "call", n, n2, calls) for (step, n), (_, n2) in zip(once, twice, strict=True)]
    if point.kind == "phases":
        run_phases(client, WARMUP_CALLS, point.protocol, _warm, Inputs.fixed("instr-w"))
        by_n = dict(run_phases(client, calls, point.protocol, counter, Inputs.fixed("instr-a")))
        by_2n = dict(run_phases(client, 2 * calls, point.protocol, counter, Inputs.fixed("instr-b")))
        counted = [_paired(step, "call", by_n[step], by_2n[step], calls) for step in by_n]
        for cycle in JOB_CYCLES:  # a worker's cycle is a job: the sum of its phases, each once
            phases = CYCLES[cycle]
            in_n, in_2n = _summed([by_n[p] for p in phases]), _summed([by_2n[p] for p in phases])
            counted.append(_paired(cycle, "job", in_n, in_2n, calls))
        return counted
    found = stalled_sweep(
        client, point.protocol, point.variant, point.active_size, counter, Inputs.fixed("instr-s")
    )
    size = point.active_size
    parts = tuple(parts_of(found.functions, found.total, size))
    return [Counted(f"sweep {point.variant}", "stalled id", size, 1, found.total / size, parts=parts)]


def _diff_pct(counted: Counted) -> float | None:
    if counted.per_unit_n is None or not counted.per_unit_n:
        return None
    return round((counted.per_unit / counted.per_unit_n - 1) * 100, 3)


def row_of(
    run_id: str,
    profile: str,
    point: Point,
    command: Counted,
    server: Counted,
    machine: dict[str, object],
    seed_pinned: bool,
    server_name: str = "",
) -> InstructionsRow:
    """One step's row from its two counts: inside command execution, and the whole request."""
    return InstructionsRow(
        run_id=run_id,
        protocol=point.protocol,
        profile=profile,
        step=command.step,
        active_size=command.active_size,
        unit=command.unit,
        calls=command.calls,
        instructions_per_call=round(command.per_unit, 1),
        server_instructions_per_call=round(server.per_unit, 1),
        instructions_2n_diff_pct=_diff_pct(command),
        server_instructions_2n_diff_pct=_diff_pct(server),
        seed_pinned=seed_pinned,
        server=server_name,
        **machine,  # type: ignore[arg-type]
    )


def part_rows_of(
    run_id: str,
    profile: str,
    points: Sequence[Point],
    server: list[list[Counted]],
    machine: dict[str, object],
    server_name: str = "",
) -> list[InstructionsPartRow]:
    """The whole server's count of each step, by part: instructions_parts.csv."""
    rows = []
    for point, counted in zip(points, server, strict=True):
        for step in counted:
            whole = sum(part.instructions for part in step.parts)
            rows += [
                InstructionsPartRow(
                    run_id=run_id,
                    protocol=point.protocol,
                    profile=profile,
                    step=step.step,
                    active_size=step.active_size,
                    unit=step.unit,
                    part=part.part,
                    detail=part.detail,
                    server_instructions_per_call=round(part.instructions, 1),
                    share_pct=round(part.instructions / whole * 100, 2) if whole else 0.0,
                    server=server_name,
                    **machine,  # type: ignore[arg-type]
                )
                for part in step.parts
            ]
    return rows


def rows_of(
    run_id: str,
    profile: str,
    points: Sequence[Point],
    by_scope: dict[str, list[list[Counted]]],
    machine: dict[str, object],
    seed_pinned: bool,
    server_name: str = "",
) -> list[InstructionsRow]:
    """The rows of every point, the two scopes' counts side by side (the same steps, in order)."""
    rows = []
    for point, command, server in zip(points, by_scope["command"], by_scope["server"], strict=True):
        for a, b in zip(command, server, strict=True):
            rows.append(row_of(run_id, profile, point, a, b, machine, seed_pinned, server_name))
    return rows
