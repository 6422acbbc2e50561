"""Redis's cost in instructions (instructions.csv): a count under valgrind's callgrind, beside the
timed µs of the script cost where the run has them."""

from __future__ import annotations

import pandas as pd

from bench.report.load import RunData
from bench.report.markdown import fmt, markdown_table

# The script cost's steps (script_cost.csv) as the instructions stage names the same calls.
SCRIPT_COST_STEPS = {
    "fused cycle": "fused cycle",
    "two-call cycle": "two-call cycle",
    "extendLock": "extendLock",
    "moveStalledJobsToWait (100 active, healthy)": "healthy sweep (100 active)",
}
ABOUT = (
    "Instructions Redis executed, counted by valgrind's callgrind on a redis-server of the stage's own: "
    "inside command execution (Redis's call(): the scripts and the commands they run) and for the whole "
    "request (its read, parse, run and reply). A count, not a time: steal and a busy neighbour cannot "
    "move it, so compare judges it to 1%. The client, the network and the kernel are outside both. "
    "The command table's lookups are left out (Redis seeds that table at random as it starts). "
    "2N vs N: the count per unit over 2N calls against over N, near 0 for a cost per call (a queue "
    "twice as long may cost a little more). Redis µs: the script cost's timed median, where the run has it."
)


def timed_us(data: RunData) -> dict[tuple[str, str], float]:
    """(protocol, instructions step) -> the script cost's median Redis µs a call, where measured."""
    frame = data.frames.get("script_cost")
    if frame is None or frame.empty:
        return {}
    medians = frame.groupby(["protocol", "step"])["server_us_per_call"].median()
    return {
        (str(protocol), step): float(medians[(protocol, timed)])
        for protocol in frame["protocol"].unique()
        for step, timed in SCRIPT_COST_STEPS.items()
        if (protocol, timed) in medians.index
    }


def instructions_table(data: RunData) -> pd.DataFrame | None:
    """A step a row: its two counts per unit, how linear, and the timed µs beside them."""
    frame = data.frames.get("instructions")
    if frame is None or frame.empty:
        return None
    timed = timed_us(data)
    rows = []
    for row in frame.to_dict("records"):
        size = int(row["active_size"]) if row["active_size"] == row["active_size"] else 0
        step = f"{row['step']} ({size:,} active)" if size else str(row["step"])
        us = timed.get((str(row["protocol"]), str(row["step"])))
        linear = row["instructions_2n_diff_pct"]
        rows.append({
            "protocol": row["protocol"], "step": step, "per": row["unit"],
            "instructions in command": fmt(round(float(row["instructions_per_call"]))),
            "instructions, whole server": fmt(round(float(row["server_instructions_per_call"]))),
            "2N vs N": "" if pd.isna(linear) else f"{linear:+.2f}%",
            "Redis µs (timed)": "" if us is None else fmt(us),
        })  # fmt: skip
    return pd.DataFrame(rows)


def instructions_section(data: RunData) -> list[str]:
    table = instructions_table(data)
    if table is None:
        about = data.meta.instructions
        if about is not None and about.skipped:
            return ["## Redis's cost in instructions", "", f"*Not counted: {about.skipped}.*", ""]
        return []
    return ["## Redis's cost in instructions", "", ABOUT, "", markdown_table(table), ""]
