"""The script-cost stage: Redis's own µs per call of each script, on a small queue.

In a run (`bench run`) it measures each protocol's hot-path steps alone, the
protocols alternating, into script_cost.csv; `python -m bench script-cost` prints
the same phases' tables without a run folder.

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

from bench.errors import BenchError
from bench.harness.context import RunContext
from bench.harness.profile import Profile
from bench.harness.run_server import redis_for_run
from bench.protocol.base import PROTOCOLS, check_protocol_names
from bench.protocol.phases import measure_phases
from bench.results.files import Ledger
from bench.results.script_cost import ScriptCostRow
from bench.stages.script_cost.rows import SCRIPT_COST_S_PER_PROTOCOL, script_cost_rows
from bench.stages.script_cost.table import commands_table, table


def check_profile(profile: Profile) -> None:
    """Nothing of its own to check: it runs the profile's protocols, finish_fetch's repetitions."""


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """One step: every protocol's phases, ``repetitions`` rounds."""
    return (SCRIPT_COST_S_PER_PROTOCOL * len(profile.protocols) * profile.finish_fetch.repetitions,)


def run_stage(ctx: RunContext) -> None:
    """Each protocol's scripts alone, protocols alternating, into script_cost.csv."""
    ctx.progress("script cost: each protocol's scripts alone, protocols alternating")
    measured = script_cost_rows(ctx, ctx.profile.protocols, ctx.profile.finish_fetch.repetitions)
    Ledger(ctx.run_dir).put(ScriptCostRow, measured)  # its rows; it has no meta.json section
    ctx.progress.step(f"script cost measured: {ScriptCostRow.FILE}")
    ctx.progress.done()


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
    print(table(by_protocol, args.calls))
    print(commands_table(by_protocol))
    return 0
