"""The instructions stage: Redis's cost a call and a job in instructions, which steal cannot move.

Each protocol's steps (bench.protocol.phases), two baselines (a PING, an EVALSHA of ``return 1``)
and each sweep over an all-stalled active list run against a redis-server under callgrind: once
counting inside command execution (``call()``: what the scripts cost), once the whole request
(what a round trip costs, so what fusing saves). Inputs, seeds and wall clock are fixed where they
can be, so a commit gives the same counts. Without valgrind the stage says so and writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import redis

from bench.errors import BenchError, first_line
from bench.harness.callgrind import CallgrindRedis, Scope, allocator_env, seed_refused, valgrind_missing
from bench.harness.context import RunContext
from bench.harness.machine import clock, watch_run
from bench.harness.overrides import SectionFlags
from bench.harness.profile import InstructionsOptions, Profile, check_servers
from bench.harness.server import server_identity
from bench.harness.terminal import fold
from bench.protocol.connection import RedisSettings
from bench.protocol.counted import COMPLETED, QueueStaging, QueueState
from bench.protocol.sweep import SWEEPERS
from bench.results.files import Ledger
from bench.results.instructions import (
    InstructionsCompletedRow,
    InstructionsMeta,
    InstructionsPartRow,
    InstructionsRow,
)
from bench.stages.instructions.plan import Point, cycle_points_of, points_of
from bench.stages.instructions.rows import (
    LEAD_CALLS,
    Counted,
    completed_rows_of,
    count_point,
    part_rows_of,
    rows_of,
)
from bench.stages.instructions.table import completed_table, table

SCOPES: tuple[Scope, ...] = ("command", "server")
START_S = 3.0  # a callgrind'd server's start, about: for the run's ETA
S_PER_PHASES_CALL = 0.02  # a protocol's phases, a call of a batch, about (under valgrind)
S_PER_SWEPT_ID = 0.004  # a sweep, an id, about
RESTAGE_S = 2.0  # a protocol's server started anew and its queue brought to the stated state, about


def check_profile(profile: Profile) -> None:
    """Every sweep variant named exists, every server binary too (the sizes and calls are checked
    as the profile loads)."""
    check_servers(profile)
    for variant in profile.instructions.instructions_sweep_variants:
        if variant not in SWEEPERS:
            raise BenchError(
                f"profile key instructions-sweep-variants: unknown variant {variant!r}; "
                f"use some of {', '.join(SWEEPERS)}"
            )


def _points(profile: Profile) -> list[Point]:
    options = profile.instructions
    return points_of(profile.protocols, options.instructions_sweep_variants, options.instructions_sweep_sizes)


def _cycle_points(profile: Profile) -> list[Point]:
    """The jobs against the completed set's size: inside command execution only (a request's read
    and reply do not grow with the set)."""
    return cycle_points_of(profile.protocols, profile.instructions.instructions_completed_sizes, COMPLETED)


def _point_s(point: Point, calls: int) -> float:
    """A point's seconds in one scope."""
    if point.kind == "sweep":
        return S_PER_SWEPT_ID * point.active_size
    if point.kind == "phases":  # the server started anew, the queue staged, each phase's lead and 2N
        return RESTAGE_S + S_PER_PHASES_CALL * (LEAD_CALLS + 2 * calls)
    if point.kind == "cycles":  # the same, the jobs' phases alone (half a phases' call) and N
        return RESTAGE_S + S_PER_PHASES_CALL * 0.5 * (LEAD_CALLS + calls)
    return S_PER_PHASES_CALL * 0.2 * calls  # the baselines: a tenth of a phases' call


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """A step a point a scope (each scope's server starts before its first point), then the CSV's."""
    calls = profile.instructions.instructions_calls
    scoped = {"command": _points(profile) + _cycle_points(profile), "server": _points(profile)}
    alone = {
        scope: [_point_s(p, calls) + (START_S if i == 0 else 0.0) for i, p in enumerate(scoped[scope])]
        for scope in SCOPES
    }
    # the scopes' servers run at once: the stage takes the longer scope's time, shared by every step
    share = max(map(sum, alone.values())) / sum(map(sum, alone.values()))
    steps = tuple(s * share for _ in profile.servers or (None,) for scope in SCOPES for s in alone[scope])
    return (*steps, 0.0)


@dataclass(frozen=True)
class ServerCounts:
    """Every point's counts on one server binary, each scope's, and the server's name from INFO;
    a protocol whose scripts the server refused is left out, with the server's word."""

    binary: str
    name: str  # "valkey 8.0.1"
    points: list[Point]  # the points counted: those of a protocol left out are not
    by_scope: dict[str, list[list[Counted]]]
    left_out: dict[str, str]  # protocol -> why (the server's refusal, first line)
    # (protocol, a job counted inside command execution) at each completed set size, the stated
    # state's among them
    jobs_by_completed: list[tuple[str, Counted]]


def phases_state(calls: int) -> QueueState:
    """The state a protocol's phases are counted in, for a batch of twice ``calls``."""
    return QueueState.for_phases(2 * calls, LEAD_CALLS)


def count_all(
    points: list[Point],
    calls: int,
    report: Callable[[str, Point], None] | None = None,
    binary: str | None = None,
    cycle_points: Sequence[Point] = (),
) -> ServerCounts:
    """Every point's counts on a server of each scope, started for it, and ``cycle_points``' inside
    command execution. A protocol whose scripts this server refuses (a command it lacks, a flag it
    rejects) is left out on it, and the run goes on."""
    found: dict[str, dict[Point, list[Counted]]] = {scope: {} for scope in SCOPES}
    left_out: dict[str, str] = {}
    staging = QueueStaging(phases_state(calls))  # its structures built once, shared by the scopes
    said = threading.Lock()

    def one_scope(scope: Scope) -> tuple[str, str, str]:
        """The scope's points on a server of its own: (name, version, binary)."""
        with CallgrindRedis(scope, binary=binary) as server:
            client = RedisSettings.from_url(server.url).connect()
            try:
                name, version = server_identity(client.info("server"))
                scoped = [*points, *(cycle_points if scope == "command" else ())]
                for point in (p for p in scoped if p.protocol not in left_out):
                    try:
                        found[scope][point] = count_point(server, client, point, calls, staging)
                    except redis.ResponseError as exc:
                        left_out[point.protocol] = first_line(exc)
                    if report is not None:
                        with said:
                            report(scope, point)
                return name, version, server.binary
            finally:
                client.close()

    # Each scope on its own server, at once: a count is the instructions a server ran, which a
    # second server beside it cannot move (every point restarts its server), and the stage's
    # time halves on two cores.
    with ThreadPoolExecutor(max_workers=len(SCOPES)) as pool:
        (name, version, binary), *_ = list(pool.map(one_scope, SCOPES))
    assert binary is not None
    kept = [p for p in points if p.protocol not in left_out]
    by_scope: dict[str, list[list[Counted]]] = {scope: [found[scope][p] for p in kept] for scope in SCOPES}
    jobs = [
        (point.protocol, counted)
        for point, counts in found["command"].items()
        if point.kind in ("phases", "cycles") and point.protocol not in left_out
        for counted in counts
    ]
    return ServerCounts(binary, f"{name} {version}", kept, by_scope, left_out, jobs)


def run_stage(ctx: RunContext) -> None:
    """Every point's counts into instructions.csv; one line and nothing else without valgrind."""
    ledger = Ledger(ctx.run_dir, InstructionsMeta)  # what the stage writes: its rows and section
    if missing := valgrind_missing():
        ctx.progress.step(f"instructions: skipped, {missing}")
        ledger.meta(skipped=missing)
        return
    options: InstructionsOptions = ctx.profile.instructions
    points = _points(ctx.profile)
    ctx.progress("instructions: each step under callgrind, inside command execution, then the whole server")
    if refused := seed_refused():
        ctx.progress.step(f"instructions: seeds and clock not pinned ({refused}); counts may move 0.75%")

    servers: tuple[str | None, ...] = ctx.profile.servers or (None,)
    named = bool(ctx.profile.servers)  # else the run's own binary, named in meta.json

    def report(scope: str, point: Point) -> None:
        what = {
            "sweep": f"sweep {point.variant} ({point.active_size:,})",
            "cycles": f"jobs at {point.completed_size:,} completed",
        }.get(point.kind, point.kind)
        ctx.progress.step(f"{scope} scope: {point.protocol} {what} counted")

    cycles = _cycle_points(ctx.profile)
    with watch_run(ctx.watch_pids) as watch:
        opened = clock()
        counted = [count_all(points, options.instructions_calls, report, b, cycles) for b in servers]
        span = (opened, clock())
    machine = watch.within(span).row_fields()
    pinned = refused is None
    rows: list[InstructionsRow] = []
    parts: list[InstructionsPartRow] = []
    jobs: list[InstructionsCompletedRow] = []
    for on in counted:
        for protocol, why in on.left_out.items():
            ctx.progress.step(
                f"instructions: {protocol} left out on {on.name}, which refused its scripts: {why}"
            )
        server = on.name if named else ""
        shared = {"run_id": ctx.run_dir.name, "profile": ctx.profile.name, "server": server, **machine}
        rows += rows_of(on.points, on.by_scope, shared, pinned)
        parts += part_rows_of(on.points, on.by_scope["server"], shared)
        jobs += completed_rows_of(on.jobs_by_completed, shared, pinned)
    ledger.put(InstructionsRow, rows)  # every count is in: each file written once
    ledger.put(InstructionsPartRow, parts)
    ledger.put(InstructionsCompletedRow, jobs)
    ledger.meta(
        calls=options.instructions_calls,
        scopes={"command": "call()", "server": "readQueryFromClient + beforeSleep"},
        outside="the client, the network and the kernel",
        seed="pinned" if refused is None else refused,
        servers={on.name: on.binary for on in counted} if named else {},
        left_out={on.name: on.left_out for on in counted if on.left_out},
        state={**phases_state(options.instructions_calls).sizes(), "lead_calls": LEAD_CALLS},
        allocators=allocator_env(),
    )
    ctx.progress.step(f"instructions counted: {InstructionsRow.FILE}")
    ctx.progress.done()
    print(fold(table(ledger.rows(InstructionsRow))))
    print(fold(completed_table(ledger.rows(InstructionsCompletedRow))))


FLAGS = SectionFlags(InstructionsOptions, prefix="instructions-")
ABOUT = (__doc__ or "").split("\n\n")[0]
