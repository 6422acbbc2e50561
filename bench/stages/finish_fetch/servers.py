"""finish_fetch's Redis-bound point on each server a profile names (``servers``, docs/servers.md).

Every server is started embedded at once, from its binary, and named from its own INFO. The
point (bound-concurrency jobs in flight at rtt 0, the grid's regime) runs fused and two_call, each
protocol, server after server, repetition after repetition: A B C A B C, so drift on a shared
machine hits every server alike. Each trial's Locust files go under servers/<server>/, and its row
to finish_fetch_servers.csv, never into the main grid's file.
"""

from __future__ import annotations

import re
from contextlib import ExitStack

from bench.harness.context import RunContext
from bench.harness.profile import FinishFetchOptions
from bench.harness.server import EmbeddedRedis, server_identity
from bench.protocol.connection import RedisSettings
from bench.protocol.phases import refusal
from bench.results.files import write_meta, write_rows
from bench.results.finish_fetch import FinishFetchMeta, FinishFetchServerRow
from bench.results.rows import RunIds
from bench.stages.finish_fetch.locust_trial import TrialResult, run_trial
from bench.stages.finish_fetch.plan import Point, bound_point, protocols_at, regime_options
from bench.stages.finish_fetch.rows import row_of

SERVERS_DIR = "servers"  # the servers' trials' Locust files, a folder a server
STRATEGIES = ("fused", "two_call")  # what a server's point compares


def server_trials(opts: FinishFetchOptions, servers: int, protocols: int) -> int:
    """How many trials the servers' point takes (for the run's ETA)."""
    if not servers or bound_point(opts) is None:
        return 0
    return opts.repetitions * servers * protocols * len([s for s in STRATEGIES if s in opts.strategies])


def server_row(run: TrialResult, opts: FinishFetchOptions, ids: RunIds, server: str) -> FinishFetchServerRow:
    """The trial's row, from the main grid's row builder, with the server named."""
    row = row_of(run, opts, ids)
    return FinishFetchServerRow(
        run_id=row.run_id, protocol=row.protocol, profile=row.profile, server=server,
        strategy=row.strategy, rep=row.rep, workers=row.workers, concurrency=row.concurrency,
        rtt_ms=row.rtt_ms, regime=row.regime, jobs=row.jobs, jobs_per_s=row.jobs_per_s,
        round_trips_per_job=row.round_trips_per_job, server_us_per_job=row.server_us_per_job,
        redis_cpu_pct=row.redis_cpu_pct, limit=row.limit, loadgen_processes=row.loadgen_processes,
        rtt_slept_ms=row.rtt_slept_ms, saturated=row.saturated, audit_ok=row.audit_ok,
        foreign_cpu_pct=row.foreign_cpu_pct, steal_pct=row.steal_pct, contended=row.contended,
    )  # fmt: skip


def run_servers(ctx: RunContext, protocols: tuple[str, ...]) -> list[FinishFetchServerRow]:
    """The Redis-bound point on every server of the profile's ``servers``; its rows, written as
    they come. Nothing without servers or without a bound point (bound-concurrency 0)."""
    opts = ctx.profile.finish_fetch
    point = bound_point(opts)
    if not ctx.profile.servers or point is None:
        return []
    rows: list[FinishFetchServerRow] = []
    with ExitStack() as stack:
        started = [stack.enter_context(EmbeddedRedis(binary=b)) for b in ctx.profile.servers]
        named = [(server, _name(server)) for server in started]
        trial_opts = regime_options(opts, point)
        strategies = [s for s in STRATEGIES if s in opts.strategies]
        offered = protocols_at(point, protocols)
        refused = {name: _refused(ctx, server, name, offered) for server, name in named}
        if any(refused.values()):
            write_meta(ctx.run_dir, FinishFetchMeta, left_out={n: why for n, why in refused.items() if why})
        runs_on = {name: [p for p in offered if p not in refused[name]] for _, name in named}
        for rep in range(1, opts.repetitions + 1):
            for server, name in named:
                for protocol in runs_on[name]:
                    for strategy in strategies:
                        rows.append(_trial(ctx, trial_opts, point, rep, protocol, strategy, server, name))
                        write_rows(ctx.run_dir, FinishFetchServerRow, rows)
    return rows


def _refused(ctx: RunContext, server: EmbeddedRedis, name: str, protocols: list[str]) -> dict[str, str]:
    """The protocols whose scripts this server refuses (a command it lacks, a flag it rejects),
    each with the server's reason: left out on it, one line each, and the run goes on."""
    client = RedisSettings.from_url(server.url).connect()
    try:
        refused = {p: why for p in protocols if (why := refusal(client, p)) is not None}
    finally:
        client.close()
    for protocol, why in refused.items():
        ctx.progress.step(f"finish_fetch: {protocol} left out on {name}, which refused its scripts: {why}")
    return refused


def _name(server: EmbeddedRedis) -> str:
    client = RedisSettings.from_url(server.url).connect()
    try:
        name, version = server_identity(client.info("server"))
    finally:
        client.close()
    return f"{name} {version}"


def _trial(
    ctx: RunContext,
    opts: FinishFetchOptions,
    point: Point,
    rep: int,
    protocol: str,
    strategy: str,
    server: EmbeddedRedis,
    name: str,
) -> FinishFetchServerRow:
    ctx.progress(f"{name}: {protocol} {strategy} {point.label} rep {rep}")
    folder = ctx.run_dir / SERVERS_DIR / re.sub(r"[^A-Za-z0-9.]+", "-", name)
    settings = RedisSettings.from_url(server.url)
    run = run_trial(settings, opts, strategy, point, rep, folder, protocol, ctx.watch_pids)
    row = server_row(run, opts, RunIds(ctx.run_dir.name, ctx.profile.name, protocol), name)
    paced = f"limit {row.limit}" if row.limit else "pace not judged"
    ctx.progress.step(
        f"{name}: {protocol} {strategy} {point.label} rep {rep}: {row.jobs_per_s or 0:.0f} jobs/s, "
        f"Redis CPU {row.redis_cpu_pct or 0:.0f}%, {paced}"
    )
    return row
