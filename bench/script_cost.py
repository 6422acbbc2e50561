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
from collections.abc import Sequence

from bench.errors import BenchError
from bench.harness.server import redis_for_run
from bench.protocol.base import PROTOCOLS, check_protocol_names
from bench.protocol.script_cost import CYCLES, Row, command_difference, cycle_commands, measure_phases


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
