"""The hot path's script cost: Redis µs and commands per worker step of each protocol, scripts alone,
the protocols taking turns (A B C A B C) so one's extra writes read against another's in one run."""

from __future__ import annotations

from collections.abc import Sequence

from bench.harness.context import RunContext
from bench.harness.machine import MachineSample, clock, watch_run
from bench.protocol.phases import Row, cycle_commands, cycle_usec, measure_phases
from bench.results.rows import RunIds
from bench.results.script_cost import ScriptCostRow
from bench.stages.script_cost.plan import Point, points_of

SCRIPT_COST_CALLS = 200  # calls a script a repetition: enough for µs a call (Redis counts every µs)
SCRIPT_COST_S_PER_PROTOCOL = 0.2  # one protocol's phases at SCRIPT_COST_CALLS, about: for the run's ETA


def script_cost_rows(
    ctx: RunContext, protocols: Sequence[str], reps: int, calls: int = SCRIPT_COST_CALLS
) -> tuple[list[ScriptCostRow], dict[str, list[Row]]]:
    """Every step of every protocol, ``reps`` times, alternating, the machine watched through; and
    each protocol's phases of its last repetition (the terminal tables')."""
    measured: list[tuple[Point, list[Row], tuple[float, float]]] = []  # the point, its phases, its span
    client = ctx.settings.connect()
    try:
        with watch_run(ctx.watch_pids) as watch:
            for point in points_of(protocols, reps):
                opened = clock()
                phases = measure_phases(client, calls, point.protocol)
                measured.append((point, phases, (opened, clock())))
    finally:
        client.close()
    rows: list[ScriptCostRow] = []
    ids = RunIds(ctx.run_dir.name, ctx.profile.name)
    for point, phases, span in measured:
        machine: MachineSample = watch.within(span)
        usec, commands = cycle_usec(phases), cycle_commands(phases)
        rows += [row_of(ids, point, step, calls, usec[step], commands[step], machine) for step in usec]
    return rows, {point.protocol: phases for point, phases, _ in measured}


def row_of(
    ids: RunIds,
    point: Point,
    step: str,
    calls: int,
    usec: float,
    commands: dict[str, float],
    machine: MachineSample,
) -> ScriptCostRow:
    """One step's script_cost.csv row at one point (a protocol, a repetition)."""
    return ScriptCostRow(
        run_id=ids.run_id,
        protocol=point.protocol,
        profile=ids.profile,
        step=step,
        rep=point.rep,
        calls=calls,
        server_us_per_call=round(usec, 2),
        commands_per_call=round(sum(commands.values()), 3),
        # every command a call ran, by name, a whole count as an int ({"evalsha": 1}, not 1.0)
        commands={name: int(n) if float(n).is_integer() else n for name, n in sorted(commands.items())},
        **machine.row_fields(),
    )
