"""Stage 2, sweep cost against active-list size: a pyperf benchmark.

The pyperf program (pyperf_program.py) runs as a subprocess, one run a size, against a queue
grown through the protocol client (scenario.py); its values and side files make sweep_cost.csv.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pyperf
import redis

from bench.harness.children import reap_group, spawn, stop_group
from bench.harness.context import RunContext
from bench.harness.machine import clock, watch_run
from bench.harness.overrides import SectionFlags
from bench.harness.profile import Profile, SweepOptions
from bench.harness.run_folder import run_alone
from bench.harness.terminal import fold, wrap_note
from bench.paths import REPO
from bench.protocol.base import protocol_named
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client, RedisSettings, node_client
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Queue
from bench.protocol.refusal import ServerRefused
from bench.protocol.scripts import script_source
from bench.protocol.sweep import SWEEPERS, variants_of
from bench.results.files import PYPERF_DIR, Ledger, read_json
from bench.results.meta import read_meta
from bench.results.rows import RunIds, row_dict
from bench.results.sweep import SweepControlRow, SweepCostRow, SweepHazardRow, SweepMeta
from bench.stages.sweep.hazard import HAZARD_PROTOCOL, INTERVAL_MS, hazard_line, run_hazard, scenario_case
from bench.stages.sweep.plan import (
    ECHOMQ,
    IN_PROCESS_BELOW,
    WARMUP_BELOW,
    SweepCase,
    loops_for,
    points_of,
    pyperf_options,
    run_order,
    variant_label,
)
from bench.stages.sweep.pyperf_program import REFUSED_FILE, URL_ENV, ProgramSettings
from bench.stages.sweep.rows import SIDE_DIR, SizeOutcome, merge_pyperf, row_of, side_summary
from bench.stages.sweep.scenario import ScenarioQueue
from bench.stages.sweep.table import fmt, goal_text, slope_text, slopes, table
from bench.stages.sweep.timing import SWEEP_TIMEOUT_S

PYPERF_LOG = f"{PYPERF_DIR}/sweep_pyperf.log"
CONTROL_PROTOCOL = "none"  # the control's row: a Lua loop of no queue protocol
PYPERF_STOP_GRACE_S = 5.0
_RESULT_LINE = re.compile(r"^(sweep/[^:\s]+): (.*)$")


def run_pyperf(
    settings: RedisSettings,
    queue_name: str,
    size: int,
    points: Sequence[SweepCase],
    options: SweepOptions,
    run_dir: Path,
    on_result: Callable[[str, str], None],
    protocol: str = ECHOMQ,
    watch_pids: Sequence[int] = (),
) -> SizeOutcome:
    """The pyperf program for one size of one protocol; ``on_result(name, pyperf's line)`` a point.
    Each point's machine window runs from the previous point's result line (or pyperf's start)."""
    stem = f"sweep_{size}" if protocol == ECHOMQ else f"sweep_{protocol}_{size}"
    json_path = run_dir / PYPERF_DIR / f"{stem}.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.unlink(missing_ok=True)
    program = ProgramSettings(
        queue=queue_name,
        size=size,
        points=tuple((p.variant, p.scenario) for p in points),
        side_dir=run_dir / SIDE_DIR,
        slice_size=options.sweep_slice,
        slice_budget_us=options.sweep_slice_budget_us,
        probe_rate_hz=options.probe_rate_hz,
        protocol=protocol,
    )
    cmd = program.command(json_path, pyperf_options(size, options.sweep_reps))
    env = {**os.environ, URL_ENV: settings.url, "PYTHONUNBUFFERED": "1"}
    with open(run_dir / PYPERF_LOG, "a") as log, watch_run(watch_pids) as watch:
        log.write(f"$ {' '.join(cmd)}\n")
        # pyperf, its workers and their probes form one process group: on Ctrl-C (or any
        # error here) the group gets SIGINT, a few seconds, then SIGKILL; none is left behind.
        opened = clock()
        spans: dict[str, tuple[float, float]] = {}
        process = spawn(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                log.flush()
                if match := _RESULT_LINE.match(line.strip()):
                    closed = clock()
                    spans[match.group(1)], opened = (opened, closed), closed
                    on_result(match.group(1), match.group(2))
            code = process.wait()
        except BaseException:
            stop_group(process, signal.SIGINT, PYPERF_STOP_GRACE_S)
            raise
        finally:
            reap_group(process)
    outcome = SizeOutcome(machine={name: watch.within(span) for name, span in spans.items()})
    if json_path.exists():
        suite = pyperf.BenchmarkSuite.load(str(json_path))
        outcome.values = {bench.get_name(): list(bench.get_values()) for bench in suite.get_benchmarks()}
    refusal = run_dir / SIDE_DIR / REFUSED_FILE
    if code != 0 and refusal.exists():  # a worker met a server that refuses every call
        said = read_json(refusal)
        outcome.refused = (str(said["line"]), str(said["kind"]))
        outcome.failure = f"stopped: {said['line']}"
    elif code != 0:
        outcome.failure = f"pyperf exited with {code} before this point; see {PYPERF_LOG}"
    return outcome


def script_shas(variants: Sequence[str], protocols: Sequence[str] = (ECHOMQ,)) -> dict[str, str]:
    """The SHA1 (as Redis names it) of each atomic variant's script, by point label: a
    protocol's own sweep is its sweep step; the others are scripts of lua/."""
    shas: dict[str, str] = {}
    for protocol in protocols:
        own = protocol_named(protocol)
        for variant in variants_of(protocol, variants):
            cls = SWEEPERS[variant]
            if getattr(cls, "protocol_step", False):
                source = own.script_sources()["sweep"]
            elif getattr(cls, "script_file", None):
                source = script_source(cls.script_file)  # type: ignore[attr-defined]
            else:
                continue
            shas[variant_label(protocol, variant)] = hashlib.sha1(source.encode()).hexdigest()
    return shas


def measure_size(
    ctx: RunContext, scenario: ScenarioQueue, size: int, points: list[SweepCase], tell: Callable[[str], None]
) -> SizeOutcome:
    ctx.progress(f"building {size:,} active jobs through the protocol")
    scenario.grow(size)
    by_name = {p.name: p for p in points}

    def finished(name: str, pyperf_line: str) -> None:
        """The progress line for a point pyperf has finished."""
        if (point := by_name.get(name)) is not None:
            side = side_summary(ctx.run_dir, point)
            note = f"; ERROR {'; '.join(side.errors)}" if side.errors else ""
            tell(
                f"{point.label} {point.scenario} {point.size:,}: {pyperf_line}; "
                f"hold {fmt(side.hold_ms_max, 3)} ms, probe max {fmt(side.probe_us('max'))} µs, "
                f"{side.probe.busy} BUSY{note}"
            )

    return run_pyperf(
        ctx.settings, scenario.queue.keys.name, size, points, ctx.profile.sweep, ctx.run_dir, finished,
        scenario.queue.protocol.name, ctx.watch_pids,
    )  # fmt: skip


# Rough µs a sweep spends per active job, for the run's ETA; a quadratic variant's grow with the
# size by the factor given (one LREM a stalled id in echomq's and BullMQ's own sweeps).
US_PER_JOB = {"app_side": 100.0, "app_side_pipelined": 10.0}  # fit to 20261206-092723-default
QUADRATIC = {
    ("echomq", "atomic", "all_stalled"): 0.014,
    ("echomq", "atomic", "mixed"): 0.007,
    ("echomq", "app_side_pipelined", "mixed"): 0.002,
    ("bullmq", "atomic", "all_stalled"): 0.005,
    ("bullmq", "atomic", "mixed"): 0.0025,
}
RESTORE_US_PER_JOB = 3.0  # each timed sweep first restores its state
POINT_OVERHEAD_S = 0.1  # pyperf's own work a point (calibration, metadata), in-process
PROCESS_START_S = 0.8  # a pyperf worker process, at sizes it does not run in-process


def _point_estimate(point: SweepCase, reps: int) -> float:
    quadratic = QUADRATIC.get((point.protocol, point.variant, point.scenario), 0.0)
    us = US_PER_JOB.get(point.variant, 2.0) + quadratic * point.size
    warmups = 1 if point.size < WARMUP_BELOW else 0
    sweeps = (reps + warmups) * loops_for(point.size)
    seconds = POINT_OVERHEAD_S + sweeps * point.size * (us + RESTORE_US_PER_JOB) / 1e6
    return seconds + (PROCESS_START_S if point.size >= IN_PROCESS_BELOW else 0.0)


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """The seconds each point of the stage should take, in the order they run: for the run's ETA."""
    options = profile.sweep
    estimates: list[float] = []
    # every protocol's points, as run_stage reports them: a group's skipped points, then its measured
    for size, _, group in run_order(points_of(options, profile.protocols)):
        estimates += [0.0 for p in group if p.skipped]
        measured = [p.point for p in group if not p.skipped]
        build = size * 60e-6  # growing each protocol's active list to this size
        estimates += [_point_estimate(p, options.sweep_reps) + (build if i == 0 else 0.0)
                      for i, p in enumerate(measured)]  # fmt: skip
    return tuple(estimates)


def check_profile(profile: Profile) -> None:
    """Before any stage starts: known variants, scenarios and caps, for protocols that exist."""
    points_of(profile.sweep, profile.protocols)


# A ledger passed on is Ledger[...]: an annotation cannot name a section's fields (SweepMeta's
# declaration still refuses a key it lacks)
def run_hazard_sizes(ctx: RunContext, client: Client, ledger: Ledger[...]) -> None:
    """The client-default hazard at each of the profile's sizes (bench/stages/sweep/hazard.py)."""
    options = ctx.profile.sweep
    sizes = sorted(set(options.sweep_hazard_sizes))
    if not sizes or HAZARD_PROTOCOL not in ctx.profile.protocols:
        return
    queue = Queue.open(client, fresh_queue_name("hazard"), protocol=HAZARD_PROTOCOL)
    scenario = ScenarioQueue(queue, [])
    try:
        for size in sizes:
            ctx.progress(f"hazard: building {size:,} active jobs through the bullmq protocol")
            scenario.grow(size)
            case = scenario_case(scenario)
            found = run_hazard(
                ctx.settings, case, options.sweep_hazard_timeout_s, options.probe_rate_hz, ctx.watch_pids
            )
            for row in found:
                ctx.progress(hazard_line(row))
            ledger.add(SweepHazardRow, found)
    finally:
        queue.delete()
    ledger.meta(
        hazard={
            "interval_ms": INTERVAL_MS,
            "clients": "bullmq: BullMQ's RedisConnection (retries on timeouts); suite: no re-sends",
            "socket_timeout": "the profile's" if options.sweep_hazard_timeout_s else "redis-py's default",
        },
    )


# The control: a Lua loop of plain arithmetic that reads no key and allocates nothing, so its calls
# differ only by what the machine does to them; the goals read the sliced sweeps' longest calls
# against its worst, on this machine, not a constant.
SPIN = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1"
ONE_MS_US = 1000


def spin_times(node: redis.Redis, calls: int, iterations: int) -> tuple[list[int], int]:
    """Each call's µs inside Redis (INFO commandstats' EVALSHA µs read before and after it), and
    how many calls another client's script call overlapped (their µs cannot be told apart)."""
    sha = node.script_load(SPIN)
    times: list[int] = []
    before = CommandStats.read(node)
    for _ in range(calls):
        node.evalsha(sha, 0, iterations)
        after = CommandStats.read(node)
        delta, before = after.since(before), after
        if delta.calls.get("evalsha", 0) + delta.calls.get("eval", 0) == 1:
            times.append(delta.usec["evalsha"])
    return times, calls - len(times)


def control_row(ids: RunIds, times: list[int], calls: int, iterations: int, mixed: int) -> SweepControlRow:
    """The control's sweep_control.csv row from its calls' µs (empty figures when none counted)."""
    row = SweepControlRow(ids.run_id, ids.protocol, ids.profile, calls, iterations, calls_mixed=mixed)
    if not times:
        return row
    ordered = sorted(times)
    return dataclasses.replace(
        row,
        redis_us_median=ordered[len(ordered) // 2],
        redis_us_p999=ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))],
        redis_us_max=ordered[-1],
        calls_over_1ms=sum(t > ONE_MS_US for t in ordered),
    )


def control_line(row: SweepControlRow) -> str:
    if row.redis_us_max is None:
        return f"control: none of {row.calls:,} calls could be timed alone (other script calls overlapped)"
    note = "; CONTENDED" if row.contended else ""
    return (
        f"control, a Lua loop ({row.calls:,} calls, in Redis): median {row.redis_us_median:,} µs, "
        f"99.9th {row.redis_us_p999:,}, max {row.redis_us_max:,}, {row.calls_over_1ms:,} over 1 ms{note}"
    )


def run_control_point(ctx: RunContext, client: Client, queue: Queue, ledger: Ledger[...]) -> None:
    """The control on the swept queues' server, the machine watched, into sweep_control.csv."""
    calls, iterations = ctx.profile.sweep.sweep_control_calls, ctx.profile.sweep.sweep_control_iterations
    if calls <= 0:
        return
    ctx.progress(f"control: {calls:,} calls of a Lua loop of plain arithmetic")
    with watch_run(ctx.watch_pids) as watch:
        times, mixed = spin_times(node_client(client, queue.keys.active), calls, iterations)
    row = control_row(
        RunIds(ctx.run_dir.name, ctx.profile.name, CONTROL_PROTOCOL), times, calls, iterations, mixed
    )
    row = dataclasses.replace(row, **watch.within(None).row_fields())
    ledger.add(SweepControlRow, [row])
    ctx.progress(control_line(row))


def run_stage(ctx: RunContext) -> None:
    """The sweep stage: every point of the profile, into sweep_cost.csv; then the table and slopes;
    then the client-default hazard, into sweep_hazard.csv, where the profile asks for it."""
    options = ctx.profile.sweep
    protocols = ctx.profile.protocols
    tell = ctx.progress.step  # a line a point: measured, skipped or failed
    client = dataclasses.replace(ctx.settings, socket_timeout_s=SWEEP_TIMEOUT_S).connect()
    scenarios = {
        p: ScenarioQueue(
            Queue.open(client, fresh_queue_name("sweep" if p == ECHOMQ else f"sweep-{p}"), protocol=p), []
        )
        for p in protocols
    }
    ledger = Ledger(ctx.run_dir, SweepMeta)  # what the stage writes: its rows and section
    try:
        for size, protocol, here in run_order(points_of(options, protocols)):
            ids = RunIds(ctx.run_dir.name, ctx.profile.name, protocol)
            for left in (p for p in here if p.skipped):
                tell(f"{left.point.label} {left.point.scenario} {size:,}: skipped, {left.skipped}")
            to_run = [p.point for p in here if not p.skipped]
            outcome = measure_size(ctx, scenarios[protocol], size, to_run, tell) if to_run else None
            ledger.add(SweepCostRow, (row_of(ctx.run_dir, p, outcome, ids, options) for p in here))
            if outcome is not None and outcome.refused is not None:  # written; nothing after it
                raise ServerRefused(*outcome.refused)
        # after the largest size, the sliced sweeps' longest calls it is read against
        run_control_point(ctx, client, next(iter(scenarios.values())).queue, ledger)
        for scenario in scenarios.values():
            scenario.queue.delete()
        run_hazard_sizes(ctx, client, ledger)
    finally:
        for scenario in scenarios.values():
            scenario.queue.delete()
        client.close()
    merge_pyperf(ctx.run_dir)
    rows, control = ledger.rows(SweepCostRow), ledger.rows(SweepControlRow)
    fits = slopes([row_dict(r) for r in rows])
    errors = [r for r in rows if r.skipped.startswith("error:")]
    # every line within the table width: a longer one folds under its own start
    print(fold(table(rows)))
    print(fold(slope_text(fits)))
    if control:
        print("\n" + wrap_note(control_line(control[0]), None, "  "))
    if goals := goal_text(rows, [row_dict(r) for r in control]):
        print(fold(goals))
    for row in ledger.rows(SweepHazardRow):
        print(fold(hazard_line(row)))
    if errors:
        print(
            f"\n{len(errors)} sweep point(s) failed; their rows in {SweepCostRow.FILE} say why:",
            file=sys.stderr,
        )
        for r in errors:
            print(f"  {r.protocol} {r.variant} {r.scenario} {r.active_size}: {r.skipped}", file=sys.stderr)
    ledger.meta(
        script_shas=script_shas(options.sweep_variants, protocols),
        slopes=fits,
        errors=len(errors),
        pyperf={str(size): pyperf_options(size, options.sweep_reps) for size in options.sweep_sizes},
    )


FLAGS = SectionFlags(SweepOptions, prefix="sweep-")
ABOUT = (__doc__ or "").split("\n\n")[0]


def main(argv: list[str]) -> int:
    """`python -m bench sweep`: the sweep stage alone, into its own run folder; 1 when a point failed."""
    section = read_meta(run_alone(sys.modules[__name__], argv)).sweep
    return 1 if section is not None and section.errors else 0
