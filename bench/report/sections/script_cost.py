"""The hot path's script cost (script_cost.csv): Redis µs and commands a worker step, each protocol
against echomq's in the same run."""

from __future__ import annotations

import pandas as pd

from bench.report.load import RunData
from bench.report.machine import contended_note
from bench.report.markdown import fmt, markdown_table

BASE = "echomq"  # what every other protocol's script cost is read against
# The steps a worker pays a job (or a renewal) for: the line under the table names these.
HOT_STEPS = ("fused cycle", "two-call cycle", "extendLock")


def parse_commands(text: str) -> dict[str, float]:
    """``"evalsha 1, zadd 1"`` (script_cost.csv's commands cell) as {name: count a call}."""
    found: dict[str, float] = {}
    for part in (p.strip() for p in str(text).split(",")):
        if part:
            name, _, count = part.rpartition(" ")
            found[name] = float(count)
    return found


def _beyond(base: str, other: str) -> str:
    """What ``other`` runs a call beyond ``base``: ``zadd +1, zrem +1``, or ``same``."""
    a, b = parse_commands(base), parse_commands(other)
    diff = {n: b.get(n, 0.0) - a.get(n, 0.0) for n in sorted(set(a) | set(b))}
    return ", ".join(f"{n} {d:+g}" for n, d in diff.items() if abs(d) > 1e-9) or "same"


def script_cost_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per step and protocol: the median µs a call over repetitions, the commands, and beside
    echomq's row what the protocol costs more (µs) and runs more (commands)."""
    medians = (
        frame.groupby(["step", "protocol"], sort=False)
        .agg(
            reps=("rep", "nunique"),
            server_us_per_call=("server_us_per_call", "median"),
            commands=("commands", "first"),
        )
        .reset_index()
        .to_dict("records")
    )
    base = {str(m["step"]): m for m in medians if m["protocol"] == BASE}
    rows = []
    for m in medians:
        own = base.get(str(m["step"])) if m["protocol"] != BASE else None
        rows.append({
            "step": m["step"], "protocol": m["protocol"], "reps": m["reps"],
            "redis µs a call (median)": m["server_us_per_call"],
            f"µs beyond {BASE}": m["server_us_per_call"] - own["server_us_per_call"] if own else None,
            "commands a call": m["commands"],
            f"commands beyond {BASE}": _beyond(own["commands"], m["commands"]) if own else "",
        })  # fmt: skip
    return pd.DataFrame(rows)


def script_cost_lines(table: pd.DataFrame) -> list[str]:
    """One line a protocol other than echomq: its extra µs a job on the hot path."""
    lines = []
    column = f"µs beyond {BASE}"
    for protocol in [p for p in table["protocol"].unique() if p != BASE]:
        mine = table[(table["protocol"] == protocol) & table["step"].isin(HOT_STEPS)]
        parts = [
            f"{step} {fmt(extra)} µs ({beyond})"
            for step, extra, beyond in mine[["step", column, f"commands beyond {BASE}"]].itertuples(
                index=False
            )
            if pd.notna(extra)
        ]
        if parts:
            lines.append(f"- **{protocol}** beyond {BASE}, Redis µs a job: " + "; ".join(parts))
    return lines


def script_cost_section(data: RunData) -> list[str]:
    frame = data.frames.get("script_cost")
    if frame is None or frame.empty:
        return []
    lines = ["### The hot path's script cost: each protocol's scripts alone", ""]
    lines += [
        "Each step of a worker run alone on a small queue, the protocols taking turns (A B A B): Redis's "
        "own µs inside its EVALSHAs (INFO commandstats), a cycle being one job, and every command it "
        "runs, those inside the scripts too. No load, no network: the script cost of a protocol's extra "
        "writes, not a throughput.",
        "",
    ]
    lines += contended_note(frame, "repetition(s)")
    table = script_cost_table(frame)
    lines += script_cost_lines(table)
    lines += ["", markdown_table(table), ""]
    return lines
