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
from dataclasses import fields

from bench.harness.context import RunContext
from bench.harness.profile import FinishFetchOptions
from bench.harness.server import EmbeddedRedis, identify
from bench.protocol.connection import RedisSettings
from bench.protocol.phases import refusal
from bench.results.finish_fetch import FinishFetchServerRow
from bench.results.rows import RunIds
from bench.stages.finish_fetch.locust_trial import run_trial
from bench.stages.finish_fetch.plan import bound_point, protocols_at, regime_options
from bench.stages.finish_fetch.rows import Ledger, row_of

SERVERS_DIR = "servers"  # the servers' trials' Locust files, a folder a server
STRATEGIES = ("fused", "two_call")  # what a server's point compares
# a server row's columns but its name, each as the main grid's row has it
FROM_ROW = [f.name for f in fields(FinishFetchServerRow) if f.name != "server"]


def _strategies(opts: FinishFetchOptions) -> list[str]:
    return [s for s in STRATEGIES if s in opts.strategies]


def server_trials(opts: FinishFetchOptions, servers: int, protocols: int) -> int:
    """How many trials the servers' point takes (for the run's ETA)."""
    if not servers or bound_point(opts) is None:
        return 0
    return opts.repetitions * servers * protocols * len(_strategies(opts))


def run_servers(ctx: RunContext, protocols: tuple[str, ...], ledger: Ledger) -> list[FinishFetchServerRow]:
    """The Redis-bound point on every server of the profile's ``servers``; its rows, written as
    they come. Nothing without servers or without a bound point (bound-concurrency 0)."""
    opts = ctx.profile.finish_fetch
    point = bound_point(opts)
    if not ctx.profile.servers or point is None:
        return []
    with ExitStack() as stack:
        started = [stack.enter_context(EmbeddedRedis(binary=b)) for b in ctx.profile.servers]
        named = [(s, " ".join(identify(s))) for s in (RedisSettings.from_url(r.url) for r in started)]
        trial_opts = regime_options(opts, point)
        offered = protocols_at(point, protocols)
        refused = {name: _refused(ctx, settings, name, offered) for settings, name in named}
        if any(refused.values()):
            ledger.out.meta(left_out={n: why for n, why in refused.items() if why})
        rounds = [
            (settings, name, protocol, strategy)
            for settings, name in named
            for protocol in offered
            if protocol not in refused[name]
            for strategy in _strategies(opts)
        ]
        for rep in range(1, opts.repetitions + 1):
            for settings, name, protocol, strategy in rounds:
                which = f"{name}: {protocol} {strategy} {point.label} rep {rep}"
                ctx.progress(which)
                folder = ctx.run_dir / SERVERS_DIR / re.sub(r"[^A-Za-z0-9.]+", "-", name)
                run = run_trial(settings, trial_opts, strategy, point, rep, folder, protocol, ctx.watch_pids)
                row = row_of(run, trial_opts, RunIds(ctx.run_dir.name, ctx.profile.name, protocol))
                shared = {column: getattr(row, column) for column in FROM_ROW}
                ledger.out.add(FinishFetchServerRow, [FinishFetchServerRow(server=name, **shared)])
                paced = f"limit {row.limit}" if row.limit else "pace not judged"
                cpu = f"Redis CPU {row.redis_cpu_pct or 0:.0f}%"
                ctx.progress.step(f"{which}: {row.jobs_per_s or 0:.0f} jobs/s, {cpu}, {paced}")
    return ledger.out.rows(FinishFetchServerRow)


def _refused(ctx: RunContext, settings: RedisSettings, name: str, protocols: list[str]) -> dict[str, str]:
    """The protocols whose scripts this server refuses (a command it lacks, a flag it rejects),
    each with the server's reason: left out on it, one line each, and the run goes on."""
    client = settings.connect()
    try:
        refused = {p: why for p in protocols if (why := refusal(client, p)) is not None}
    finally:
        client.close()
    for protocol, why in refused.items():
        ctx.progress.step(f"finish_fetch: {protocol} left out on {name}, which refused its scripts: {why}")
    return refused
