"""The profile's servers side by side (docs/servers.md): finish_fetch's point, instructions."""

from __future__ import annotations

import pandas as pd

from bench.report.columns import clean
from bench.report.load import RunData
from bench.report.markdown import fmt, markdown_table

ABOUT = (
    "finish_fetch's Redis-bound point on each server the profile names, every server started by the run "
    "and alternated trial by trial. jobs/s: the median over repetitions of clean windows (neither contended "
    "nor saturated; all windows where none was clean, marked). Redis CPU: of one core, over the window. "
    "limit: which side set the pace, trials by side. Instructions: the whole server's count of a fused job, "
    "from the instructions stage, on the same server."
)


def _clean(rows: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    found = rows[clean(rows)]
    return (found, True) if not found.empty else (rows, False)


def servers_point_table(data: RunData) -> pd.DataFrame | None:
    """A server and protocol a row: fused and two_call jobs/s, their ratio, Redis CPU, the limit."""
    if (frame := data.frame("finish_fetch_servers")) is None:
        return None
    instructions = data.frames.get("instructions")
    fused: dict[tuple[str, str], float] = {}  # (server, protocol) -> a fused job's instructions
    if instructions is not None and "server" in instructions:
        for row in instructions[instructions["step"] == "fused cycle"].to_dict("records"):
            fused[(str(row["server"]), str(row["protocol"]))] = float(row["server_instructions_per_call"])
    rows = []
    for (server, protocol), group in frame.groupby(["server", "protocol"], sort=False):
        cells: dict[str, object] = {"server": server, "protocol": protocol}
        medians: dict[str, float] = {}
        for strategy in ("fused", "two_call"):
            used, clean = _clean(group[group["strategy"] == strategy])
            if used.empty:
                continue
            medians[strategy] = float(pd.to_numeric(used["jobs_per_s"]).median())
            cells[f"{strategy} jobs/s"] = fmt(round(medians[strategy])) + ("" if clean else " (not clean)")
            cells[f"{strategy} Redis CPU"] = f"{float(pd.to_numeric(used['redis_cpu_pct']).median()):.0f}%"
        if len(medians) == 2:
            cells["fused / two_call"] = f"{medians['fused'] / medians['two_call']:.2f}"
        limits = group["limit"].value_counts()
        cells["limit (trials)"] = ", ".join(f"{side} {n}" for side, n in limits.items() if side)
        found = fused.get((str(server), str(protocol)))
        cells["instructions a fused job"] = fmt(round(found)) if found is not None else ""
        cells["windows"] = f"{len(group)}"
        rows.append(cells)
    return pd.DataFrame(rows)


def left_out_lines(data: RunData) -> list[str]:
    """A line for each protocol a server refused, by the stage that left it out there."""
    finish_fetch, instructions = data.meta.finish_fetch, data.meta.instructions
    by_stage = (
        ("finish_fetch", finish_fetch.left_out if finish_fetch else {}),
        ("instructions", instructions.left_out if instructions else {}),
    )
    return [
        f"- {stage}: {protocol} left out on {server}, which refused its scripts: {why}."
        for stage, left_out in by_stage
        for server, refused in left_out.items()
        for protocol, why in refused.items()
    ]


def servers_section(data: RunData) -> list[str]:
    table, left_out = servers_point_table(data), left_out_lines(data)
    if table is None and not left_out:
        return []
    shown = [markdown_table(table), ""] if table is not None else []
    tail = [*left_out, ""] if left_out else []
    return ["## Servers side by side", "", ABOUT, "", *shown, *tail]
