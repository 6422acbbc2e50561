"""The instructions stage's terminal table: a step a line, its two counts and how linear they are."""

from __future__ import annotations

from collections.abc import Sequence

from bench.results.instructions import InstructionsCompletedRow, InstructionsRow


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}%"


def table(rows: Sequence[InstructionsRow]) -> str:
    """One line a step: instructions a unit inside command execution and for the whole request
    (Redis's own user-space work; the client, network and kernel are outside both)."""
    lines = [
        f"{'protocol':<16}{'step':<34}{'per':<11}{'in command':>12}{'whole server':>14}{'2N vs N':>10}",
    ]
    for row in rows:
        size = f" ({row.active_size:,})" if row.active_size else ""
        lines.append(
            f"{row.protocol:<16}{(row.step + size)[:33]:<34}{row.unit:<11}"
            f"{row.instructions_per_call:>12,.0f}{row.server_instructions_per_call:>14,.0f}"
            f"{_pct(row.instructions_2n_diff_pct):>10}"
        )
    lines.append("instructions Redis executed (callgrind), client, network and kernel outside them")
    return "\n".join(lines)


def completed_table(rows: Sequence[InstructionsCompletedRow]) -> str:
    """One line a protocol and job: its instructions inside command execution at each completed
    set size (the sizes as the phases began)."""
    sizes = sorted({row.completed_size for row in rows})
    by = {(row.protocol, row.step, row.completed_size): row.instructions_per_call for row in rows}
    jobs = list(dict.fromkeys((row.protocol, row.step) for row in rows))
    lines = [f"{'protocol':<16}{'job':<16}" + "".join(f"{f'{size:,} completed':>18}" for size in sizes)]
    for protocol, step in jobs:
        cells = (by.get((protocol, step, size)) for size in sizes)
        lines.append(
            f"{protocol:<16}{step:<16}" + "".join(f"{'' if c is None else f'{c:,.0f}':>18}" for c in cells)
        )
    return "\n".join(lines)
