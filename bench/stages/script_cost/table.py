"""The script-cost stage's terminal tables: Redis µs a call a phase, and commands a cycle."""

from __future__ import annotations

from collections.abc import Sequence

from bench.protocol.phases import CYCLES, Row, command_difference, cycle_commands


def table(by_protocol: dict[str, list[Row]], calls: int) -> str:
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
