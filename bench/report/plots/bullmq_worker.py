"""The BullMQ worker stage's figure: BullMQ's own Worker against the suite's loops on its scripts."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bench.report.plots.style import PALETTE, THOUSANDS, Plot, saved


def worker_drivers(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Bars: mean jobs/s of BullMQ's own Worker at each concurrency and of the suite's loops over
    the same scripts; whiskers min..max, dots each repetition; client CPU µs a job above each bar."""
    needed = {"driver", "concurrency", "jobs_per_s"}
    if frame.empty or not needed <= set(frame.columns) or frame["jobs_per_s"].isna().all():
        return None
    data = frame.dropna(subset=["jobs_per_s"])
    runs = list(dict.fromkeys(zip(data["driver"], data["concurrency"], strict=True)))
    figure = Figure(figsize=(max(6.0, 1.3 * len(runs) + 2), 4.6), layout="constrained")
    ax = figure.add_subplot()
    drivers = {"bullmq_worker": "#9467bd", "fused": PALETTE[0], "two_call": PALETTE[1]}
    for x, (driver, concurrency) in enumerate(runs):
        reps = data[(data["driver"] == driver) & (data["concurrency"] == concurrency)]
        values = reps["jobs_per_s"].astype(float)
        mean = float(values.mean())
        ax.bar(x, mean, 0.7, color=drivers.get(driver, PALETTE[7]),
               yerr=[[mean - values.min()], [values.max() - mean]], capsize=4)  # fmt: skip
        ax.scatter([x] * len(values), values, color="black", s=12, zorder=3)
        cpu = reps["client_cpu_us_per_job"].mean() if "client_cpu_us_per_job" in reps else math.nan
        note = f"{mean:,.0f}" + ("" if math.isnan(cpu) else f"\n{cpu:,.0f} µs CPU")
        ax.annotate(note, (x, float(values.max())), textcoords="offset points", xytext=(0, 3),
                    ha="center", va="bottom", fontsize=8)  # fmt: skip
    labels = [
        f"BullMQ Worker\nconcurrency {c}" if d == "bullmq_worker" else f"suite {d}\nloop" for d, c in runs
    ]
    ax.set_xticks(range(len(runs)), labels)
    ax.set_ylim(0, float(data["jobs_per_s"].max()) * 1.3)
    ax.set_ylabel("jobs finished per second (jobs/s)")
    ax.yaxis.set_major_formatter(THOUSANDS)
    ax.grid(axis="y", alpha=0.3)
    title = "BullMQ's own Worker against the suite's loops over BullMQ's scripts"
    ax.set_title(f"{title}\nbar = mean of the repetitions, whisker = min..max, dot = one repetition")
    caption = (
        "Taller is better. The BullMQ Worker bars are what a BullMQ Python user gets today (finish, "
        "then fetch: two script calls a job); the fused bar is what one call a job would give on the "
        "same scripts. The client CPU a job above each bar says where the time goes."
    )
    return saved(figure, out_dir, "bullmq_worker_jobs.png", title, caption)
