"""The BullMQ worker stage's figure: BullMQ's own workers (Node and Python) beside the suite's loops."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bench.report.plots.style import PALETTE, THOUSANDS, Plot, saved

# Each driver's name in the report, in the order the table and the figure show them
DRIVER_NAMES = {
    "node_worker": "Node Worker",
    "node_manual_fused": "Node manual fused",
    "node_manual_two_call": "Node manual two-call",
    "bullmq_worker": "Python Worker",
    "fused": "suite fused loop",
    "two_call": "suite two-call loop",
}


def driver_order(drivers: pd.Series) -> list[str]:
    """The drivers a run has, known ones in DRIVER_NAMES' order, any other after them."""
    present = list(dict.fromkeys(drivers))
    return [d for d in DRIVER_NAMES if d in present] + [d for d in present if d not in DRIVER_NAMES]


def worker_drivers(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Bars by driver, one a concurrency: median jobs/s, whiskers min..max, dots each repetition."""
    needed = {"driver", "concurrency", "jobs_per_s"}
    if frame.empty or not needed <= set(frame.columns) or frame["jobs_per_s"].isna().all():
        return None
    data = frame.dropna(subset=["jobs_per_s"])
    drivers = driver_order(data["driver"])
    levels = sorted(set(data["concurrency"].astype(int)))
    width = 0.8 / len(levels)
    figure = Figure(figsize=(max(7.0, 1.5 * len(drivers) + 1.5), 4.8), layout="constrained")
    ax = figure.add_subplot()
    for x, driver in enumerate(drivers):
        mine = data[data["driver"] == driver]
        shown = [c for c in levels if (mine["concurrency"] == c).any()]
        for slot, concurrency in enumerate(shown):
            values = mine[mine["concurrency"] == concurrency]["jobs_per_s"].astype(float)
            middle = float(values.median())
            at = x + (slot - (len(shown) - 1) / 2) * width
            colour = PALETTE[levels.index(concurrency) % len(PALETTE)]
            whisker = [[middle - values.min()], [values.max() - middle]]
            ax.bar(at, middle, width * 0.9, color=colour, yerr=whisker, capsize=3,
                   label=f"concurrency {concurrency}")  # fmt: skip
            ax.scatter([at] * len(values), values, color="black", s=8, zorder=3)
            ax.annotate(f"{middle:,.0f}", (at, float(values.max())), textcoords="offset points",
                        xytext=(0, 2), ha="center", va="bottom", fontsize=7)  # fmt: skip
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))  # one entry a concurrency, lowest first
    order = sorted(unique, key=lambda label: int(label.split()[-1]))
    ax.legend([unique[label] for label in order], order, loc="upper right", fontsize=8, framealpha=0.95)
    ax.set_xticks(range(len(drivers)), [DRIVER_NAMES.get(d, d).replace(" ", "\n", 1) for d in drivers])
    ax.set_ylim(0, float(data["jobs_per_s"].max()) * 1.25)
    ax.set_ylabel("jobs finished per second (jobs/s)")
    ax.yaxis.set_major_formatter(THOUSANDS)
    ax.grid(axis="y", alpha=0.3)
    title = "BullMQ's own workers beside the suite's loops over BullMQ's scripts"
    ax.set_title(f"{title}\nbar = median of the repetitions, whisker = min..max, dot = one repetition")
    caption = (
        "Taller is better. Node Worker is what most BullMQ users run. "
        "It finishes each job with fetch next on: one script call per job. "
        "Node manual fused and two-call are the same client with fetch next on and off. "
        "Python Worker is its Python port (two calls per job). "
        "The suite's loops run at concurrency 1 over the Python port's scripts."
    )
    return saved(figure, out_dir, "bullmq_worker_jobs.png", title, caption)
