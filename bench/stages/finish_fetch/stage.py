"""Stage 1 of `python -m bench run`: finish-then-fetch, fused against two_call and
two_call_pipelined, under Locust.

At each point the strategies run alternately, A B C A B C, for the profile's repetitions, each
trial a Locust child on a fresh queue (locust_trial.py); then the raw driver and the reference run
each strategy once there, their figures beside Locust's in the point's rows. At the end, the
latency-fidelity check (fidelity.py) and a short table on stdout (table.py).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

import redis

from bench.errors import BenchError, first_line
from bench.harness.context import RunContext
from bench.harness.overrides import SectionFlags
from bench.harness.profile import FinishFetchOptions, Profile, check_servers, finish_fetch_protocols
from bench.harness.terminal import fold
from bench.protocol.keys import fresh_queue_name
from bench.protocol.refusal import ServerRefused, refused
from bench.results.files import RAW_DIR, write_json
from bench.results.finish_fetch import (
    HARNESS_ADDS_GOAL_US,
    Fidelity,
    FinishFetchRow,
    FinishFetchShardRow,
    Regime,
    goal_lines,
    rtt_missed,
)
from bench.results.rows import RunIds, row_dict
from bench.stages.finish_fetch.fidelity import measure_plain
from bench.stages.finish_fetch.fidelity_probe import PROBE_METRIC
from bench.stages.finish_fetch.locust_trial import (
    INTERRUPTED,
    PROBE_MEASURE_S,
    PROBE_WARMUP_S,
    TrialResult,
    run_probe,
    run_trial,
)
from bench.stages.finish_fetch.plan import (
    Point,
    capacity,
    point_id,
    points_of,
    protocols_at,
    raw_at,
    regime_options,
    strategies_at,
)
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.reference import REFERENCE_S, run_reference
from bench.stages.finish_fetch.remeasure import Budget, Guard, LoadJudge, RttJudge, more_processes
from bench.stages.finish_fetch.rows import Ledger, row_of
from bench.stages.finish_fetch.servers import run_servers, server_trials
from bench.stages.finish_fetch.table import shard_table, table
from bench.stages.finish_fetch.trial_settings import TrialSettings

RTT_LABEL = (
    "simulated: each exchange on the wire waits rtt_ms once (a flush carrying several calls waits once); "
    "loopback otherwise"
)
T = TypeVar("T")
HDR_VARIANT = (
    "<strategy>-w<workers>[-q<queues>][-c<concurrency>][-j<job_ms>]-rtt<rtt_ms> (q1, c1 and j0 left out)"
)


def check_profile(profile: Profile) -> None:
    """Before any stage starts: Locust is there (found, not imported: no gevent patching here), and
    each server binary the profile names."""
    if find_spec("locust") is None:
        raise BenchError("Locust is not installed; run `make venv` (or pip install -e .)")
    check_servers(profile)
    strategies = profile.finish_fetch.strategies
    if len(set(strategies)) != len(strategies):
        raise BenchError(f"profile key strategies names one twice ({', '.join(strategies)}); list each once")


# Beyond its window, a trial spends this long starting Locust, stopping it and auditing the queue.
TRIAL_OVERHEAD_S = 1.1
RAW_OVERHEAD_S = 0.5  # a raw trial: its threads start and stop, its queue is audited
FIDELITY_CALL_S = 0.0003  # one timed trivial call of the fidelity check's plain loops, about


def trial_seconds(opts: FinishFetchOptions) -> float:
    """What one Locust trial should take: its window and its start, stop and audit."""
    return opts.warmup_s + opts.measure_s + TRIAL_OVERHEAD_S


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """The seconds each step of the stage should take, in order: for the run's ETA. Per point, its
    Locust trials, then (at the grid's points) its raw runs, each protocol's; at the end the
    fidelity check. Windows measured again are not planned: at most remeasure-share more."""
    opts = profile.finish_fetch
    window = opts.warmup_s + opts.measure_s
    steps: tuple[float, ...] = ()
    protocols = finish_fetch_protocols(profile)
    for point in points_of(opts):
        here = protocols_at(point, protocols)
        rounds = len(strategies_at(opts, point)) * len(here)
        steps += (trial_seconds(opts),) * (opts.repetitions * rounds)
        raw = sum(raw_at(opts, point, protocol) for protocol in here) * len(strategies_at(opts, point))
        steps += (window + RAW_OVERHEAD_S + opts.measure_s + REFERENCE_S,) * raw
    steps += (trial_seconds(opts),) * server_trials(opts, len(profile.servers), len(protocols))
    if opts.fidelity_calls > 0:
        probe = PROBE_WARMUP_S + PROBE_MEASURE_S + TRIAL_OVERHEAD_S
        steps += (probe + 3 * opts.fidelity_calls * FIDELITY_CALL_S,)
    return steps


def run_stage(ctx: RunContext) -> None:
    opts = ctx.profile.finish_fetch
    strategies = list(opts.strategies)
    protocols = finish_fetch_protocols(ctx.profile)
    # the budget for windows measured again (remeasure.py); the ledger holds what the stage writes
    budget = Budget(opts.remeasure_windows, opts.remeasure_share * sum(point_seconds(ctx.profile)))
    ledger = Ledger(ctx.run_dir, opts, budget)
    ledger.out.meta(rtt_ms=RTT_LABEL, hdr_variant=f"[<protocol>.]{HDR_VARIANT} (no protocol: echomq)")
    # a point's load processes: one more from the window that saturated on fewer, for every later
    # trial there (the same load would saturate them too, and each would take a window to learn it)
    processes: dict[Point, int] = {}
    for point in points_of(opts):
        here_protocols = protocols_at(point, protocols)
        rounds = [
            (protocol, strategy) for protocol in here_protocols for strategy in strategies_at(opts, point)
        ]
        at = {protocol: _with_rate(point, ledger.rows, protocol) for protocol in here_protocols}
        for rep in range(1, opts.repetitions + 1):
            for protocol, strategy in rounds:  # A B C A B C: drift on a shared machine hits all alike
                here = at[protocol]
                if here is None:  # open, and no backlog trial measured its capacity
                    ctx.progress.step(
                        f"{protocol} {strategy} {point.label}: no backlog capacity, not run open"
                    )
                    continue
                # the stage's own counter (its points done of its plan) is the line's only count
                ctx.progress(f"{protocol} {strategy} {here.label} rep {rep}")
                trial_opts = regime_options(opts, here)
                on = processes.get(here.at_rate(0.0), trial_opts.loadgen_processes)
                trial_opts = dataclasses.replace(trial_opts, loadgen_processes=on)
                run, tries, stopped, on = _trial(ctx, trial_opts, strategy, here, rep, protocol, budget)
                processes[here.at_rate(0.0)] = on
                row = row_of(run, trial_opts, RunIds(ctx.run_dir.name, ctx.profile.name, protocol))
                row = dataclasses.replace(row, tries=tries, remeasure_stopped=stopped, loadgen_processes=on)
                clean = ledger.trial(run, row)
                ctx.progress.step(f"{_progress_line(run, row)}; {clean}")
                _stop_if_stopped(run, ctx.run_dir)
        for protocol, strategy in rounds:
            if raw_at(opts, point, protocol):
                _raw_and_reference(ctx, ledger, strategy, point, protocol)
    run_servers(ctx, protocols, ledger)  # the Redis-bound point on each server the profile names
    notes: list[str] = []
    if opts.fidelity_calls > 0:
        ctx.progress("latency fidelity: redis-benchmark, redis-py, the raw path, the Locust path")
        fidelity = _fidelity(ctx, opts)
        ledger.out.meta(fidelity=fidelity)
        notes = fidelity_lines(fidelity)
        ctx.progress.step("latency fidelity measured")
    ctx.progress.done()
    notes = goal_lines(map(row_dict, ledger.rows)) + notes
    print(fold(table(ledger.shown, strategies, notes=notes)))
    if per_master := shard_table(ledger.out.rows(FinishFetchShardRow)):
        print(fold(per_master))
    if ledger.errors:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(ledger.errors.items()))
        total = sum(ledger.errors.values())
        print(f"finish_fetch: {total} calls failed ({kinds}); see the runs' logs", file=sys.stderr)


def _kept(value: T) -> T:
    return value


GUARD: Guard = _kept
LOAD_JUDGE: LoadJudge = _kept
RTT_JUDGE: RttJudge = _kept


def _trial(
    ctx: RunContext,
    opts: FinishFetchOptions,
    strategy: str,
    point: Point,
    rep: int,
    protocol: str,
    budget: Budget,
) -> tuple[TrialResult, int, str, int]:
    """One trial, measured again while its window was contended, or saturated or paid a late rtt
    (rtt_missed) on fewer load processes than cores (then on one more), and the budget allows: the
    last window's run, the windows it took, why it stopped while still so ("" when not), and the
    processes it ran on."""
    tries = 1
    while True:
        processes = opts.loadgen_processes
        run = run_trial(ctx.settings, opts, strategy, point, rep, ctx.run_dir, protocol, ctx.watch_pids)
        run.machine = GUARD(run.machine)
        contended = run.machine is not None and run.machine.contended
        figures = run.summary.figures
        paid = RTT_JUDGE(figures.simulated_rtt_mean_ms)
        run.summary.derived = dataclasses.replace(figures, simulated_rtt_mean_ms=paid)  # the row records it
        saturated, late = LOAD_JUDGE(figures.saturated), rtt_missed(point.rtt_ms, paid)
        more = more_processes(processes) if saturated or late else processes
        if run.stopped or (not contended and more == processes):
            return run, tries, "", processes
        if why := budget.take(point.at_rate(0.0), trial_seconds(opts)):
            return run, tries, why, processes
        tries += 1
        which = f"{protocol} {strategy} {point.label} rep {rep}"
        if more > processes:
            said = (
                ["; ".join(figures.saturated_because) or "the load generator saturated"] if saturated else []
            )
            said += [f"rtt paid {paid:.2f} ms at {point.rtt_ms:g} ms"] if late else []
            ctx.progress(f"{which}: {'; '.join(said)}; measured again on {more} load processes (try {tries})")
            opts = dataclasses.replace(opts, loadgen_processes=more)
        else:
            assert run.machine is not None
            ctx.progress(f"{which}: {run.machine.note()}; measured again (try {tries})")


def _with_rate(point: Point, rows: list[FinishFetchRow], protocol: str) -> Point | None:
    """An open point at its rate for ``protocol``: its load of the backlog capacity measured at
    its position (None when none was); any other point as it is."""
    if point.regime != Regime.OPEN or point.rate or not point.load:  # no load: the profile's target-rate
        return point
    measured = capacity(rows, protocol, point)
    return point.at_rate(point.load * measured) if measured else None


def _raw_and_reference(ctx: RunContext, ledger: Ledger, strategy: str, point: Point, protocol: str) -> None:
    """The raw driver, then the reference (reference.py), at one point and strategy, each on a
    fresh queue; their figures go beside the Locust runs'."""
    opts, which = ctx.profile.finish_fetch, f"{protocol} {strategy} {point.label}"
    path = ctx.run_dir / RAW_DIR / point_id(protocol, strategy, point)
    ctx.progress(f"raw driver: {which}")
    trial = TrialSettings.at(regime_options(opts, point), strategy, point, "", protocol)
    raw = _or_refused(ctx, f"raw driver run {strategy} {point.label}", run_raw, trial)
    write_json(Path(f"{path}_summary.json"), raw.to_json())
    ctx.progress.step(f"raw driver: {which}, {raw.settings.regime}: {raw.figures.jobs_per_s:.0f} jobs/s")
    if raw.audit is not None and not raw.audit.ok:
        ledger.audit(f"raw-{protocol}-{strategy}-{point.label}", raw.audit.verdict)
    ctx.progress(f"reference: {which}")
    trial = TrialSettings.at(opts, strategy, point, "", protocol)
    reference = _or_refused(ctx, f"reference run {strategy} {point.label}", run_reference, trial)
    write_json(Path(f"{path}_reference.json"), {"settings": trial.as_dict(), **dataclasses.asdict(reference)})
    ctx.progress.step(
        f"reference: {which}, a pre-filled queue: {reference.jobs_per_s:.0f} jobs/s, "
        f"{reference.cpu_us_per_job:.0f} µs CPU a job"
    )
    if not reference.audit_ok:
        ledger.audit(f"reference-{protocol}-{strategy}-{point.label}", reference.audit_verdict)
    ledger.beside(protocol, point, strategy, raw, reference)


def _or_refused(ctx: RunContext, what: str, measure: Callable[..., T], *args: Any) -> T:
    """``measure`` on the run's server; a Redis error is the server's refusal, or ``what`` failed."""
    try:
        return measure(ctx.settings, *args)
    except redis.RedisError as exc:
        raise refused(exc, ctx.settings.where) or BenchError(f"{what} failed: {first_line(exc)}") from None


def _fidelity(ctx: RunContext, opts: FinishFetchOptions) -> Fidelity:
    """The fidelity check's four ways; the Locust probe's p50 from its run's summary."""
    name = fresh_queue_name("ffprobe")
    plain = _or_refused(
        ctx, "latency fidelity check", measure_plain, name, opts.fidelity_calls, ctx.server.binary
    )
    summary = run_probe(ctx.settings, opts, ctx.run_dir)
    probe = summary.percentiles_us.get(PROBE_METRIC, {})
    p50 = probe.get("p50")
    note = f"{probe.get('count', 0)} calls" if p50 is not None else "the probe run timed no call"
    return dataclasses.replace(
        plain, locust_path_p50_us=float(p50) if p50 is not None else None, locust_note=note
    )


def fidelity_lines(f: Fidelity) -> list[str]:
    """The fidelity figures under the table."""

    def us(value: float | None) -> str:
        return f"{value:.0f} µs" if value is not None else "-"

    bench = us(f.redis_benchmark_p50_us) if f.redis_benchmark_p50_us is not None else f.redis_benchmark_note
    adds = f"{f.harness_adds_us:+.0f} µs" if f.harness_adds_us is not None else "-"
    return [
        f"latency fidelity, p50 of one EVALSHA 'return 1' at one client ({f.calls} calls each): "
        f"redis-benchmark {bench}; bare redis-py {us(f.redis_py_p50_us)}; "
        f"raw driver's path {us(f.raw_path_p50_us)}; under Locust {us(f.locust_path_p50_us)} "
        f"(the harness adds {adds} to redis-py; goal: at most {HARNESS_ADDS_GOAL_US:g} µs)"
    ]


def _stop_if_stopped(run: TrialResult, run_dir: Path) -> None:
    """End the stage when a run stopped early: its row is written already, marked audit_ok false."""
    if (reason := run.stopped) is None:
        return
    if reason == INTERRUPTED:
        raise KeyboardInterrupt
    if run.summary.refused:  # its line says what the server refused and what to do
        raise ServerRefused(reason, run.summary.refused)
    lead = "" if run.protocol == "echomq" else f"{run.protocol} "
    which = f"{lead}{run.strategy} {run.point.label} rep {run.rep}"
    raise BenchError(f"finish_fetch run {which} stopped: {reason}; what it measured is in {run_dir}")


def _progress_line(run: TrialResult, row: FinishFetchRow) -> str:
    notes = []
    if run.machine is not None and run.machine.contended:
        notes.append(run.machine.note())
    if row.saturated:
        notes.append("saturated: " + "; ".join(run.summary.figures.saturated_because))
    if run.stopped:
        notes.append(f"STOPPED EARLY: {run.stopped}")
    if not row.audit_ok:
        notes.append(f"AUDIT FAILED: {run.audit.verdict}")
    if errors := run.summary.figures.errors:
        kinds = ", ".join(f"{n} {k}" for k, n in run.summary.figures.errors_by_kind.items())
        notes.append(f"{errors} failed calls: {kinds or 'kinds not recorded'} (see {run.files}.log)")
    followed = run.summary.figures.followed_by_kind
    if followed:  # a cluster slot moved during the run
        notes.append("slot moving, calls sent on: " + ", ".join(f"{n} {k}" for k, n in followed.items()))
    if row.tries > 1 or row.remeasure_stopped:
        notes.append(f"{row.tries} windows" + (f", {row.remeasure_stopped}" if row.remeasure_stopped else ""))
    if row.loadgen_processes > 1:
        notes.append(f"{row.loadgen_processes} load processes")
    tail = f" ({'; '.join(notes)})" if notes else ""
    return (
        f"{run.protocol} {run.strategy} {run.point.label} rep {run.rep}, {row.regime}: "
        f"{row.jobs_per_s:.0f} jobs/s, {row.round_trips_per_job:.2f} rt/job, "
        f"{row.commands_per_job:.2f} cmd/job, cycle p50 {row.cycle_p50_us} µs, {_wait_words(row)}, "
        f"limit {row.limit}{tail}"
    )


def _wait_words(row: FinishFetchRow) -> str:
    """Enqueue to finish, named by its regime: queue latency in open loop, the backlog's wait in a
    closed one (Little's law: the backlog over the pace); with the wait list's dry samples."""
    if row.regime == Regime.OPEN:
        return f"queue latency p50 {row.e2e_p50_us} p99 {row.e2e_p99_us} p99.9 {row.e2e_p999_us} µs"
    dry = (
        f", wait list empty {row.wait_empty_samples} of {row.wait_samples} samples"
        if row.wait_samples
        else ""
    )
    return f"backlog wait p50 {row.e2e_p50_us} µs{dry}"


FLAGS = SectionFlags(FinishFetchOptions)
ABOUT = (
    "Finish-then-fetch alone: each strategy under Locust, then the raw driver. "
    "Settings default to the profile's keys."
)
