"""Where a step's instructions go: one stacked bar a protocol and step, split by part of Redis."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bench.report.plots.style import PALETTE, THOUSANDS, Plot, saved

# The parts in the order the rules declare them (bench/stages/instructions/parts.py; the report
# reads the CSV only), each with its colour; a part not named here is drawn last, in grey.
PART_ORDER = (
    "Lua interpreter", "script call and dispatch", "command bodies", "data structures", "allocator",
    "replies", "propagation and keyspace bookkeeping", "networking and event loop",
    "unnamed (no symbols)", "the rest",
)  # fmt: skip
SERVER_STEPS = ("addJob", "fused cycle", "two-call cycle")  # a job and its add, on each server
PART_COLOURS = dict(zip(PART_ORDER, (*PALETTE[:7], PALETTE[8], "#dddddd", "#999999"), strict=True))


def instruction_parts(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """A bar a protocol and step, stacked by part (sweeps left out: a stalled id is another unit)."""
    steps = frame[frame["unit"] != "stalled id"].copy()
    several = "server" in steps.columns and steps["server"].fillna("").nunique() > 1
    if several:  # a bar a job and its add on each server: every step of each would be too many
        steps = steps[steps["step"].isin(SERVER_STEPS)]
        steps["protocol"] = steps["server"] + ": " + steps["protocol"]
    if steps.empty:
        return None
    table = steps.pivot_table(
        index=["protocol", "step"], columns="part", values="server_instructions_per_call", aggfunc="sum"
    ).fillna(0.0)
    table = table.reindex(steps.set_index(["protocol", "step"]).index.unique())  # the stage's own order
    order = [p for p in PART_ORDER if p in table.columns] + [p for p in table.columns if p not in PART_ORDER]
    table = table[order]
    labels = [f"{protocol}: {step}" for protocol, step in table.index]
    figure = Figure(figsize=(10, 2.2 + 0.3 * len(table)), layout="constrained")
    ax = figure.subplots()
    left = pd.Series(0.0, index=table.index)
    for part in order:
        ax.barh(labels, table[part], left=left, color=PART_COLOURS.get(part, "#777777"), label=part)
        left += table[part]
    ax.invert_yaxis()  # the first protocol's steps on top, in the CSV's order
    ax.xaxis.set_major_formatter(THOUSANDS)
    ax.set_xlabel("instructions of the whole server, a call (a job for a cycle)")
    ax.grid(axis="x", alpha=0.3)
    figure.legend(loc="outside lower center", ncols=5, fontsize=8)  # below: never over a bar
    title = "Where Redis's instructions go, by part"
    caption = (
        "Each bar is one step's count under callgrind, split by the function that ran each instruction. "
        "A long 'unnamed' stretch means the server binary has no static symbols: build one from its "
        "sources to see those parts (docs/servers.md)."
    )
    return saved(figure, out_dir, "instruction_parts.png", title, caption, headed=True)
