"""The instructions stage's terminal table: a step a line, its two counts and how linear they are."""

from __future__ import annotations

from collections.abc import Sequence

from bench.results.instructions import InstructionsRow


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
