"""Measured against predicted jobs/s: a point a row, on the line where the model is right."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bench.report.model import MISS
from bench.report.plots.style import THOUSANDS, Plot, colour, saved

MARKERS = {"echomq": "o", "bullmq": "s"}


def measured_against_predicted(table: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Each row's measured jobs/s against the model's; the ±20% band; unclean rows hollow."""
    rows = table.dropna(subset=["predicted_jobs_per_s", "jobs_per_s"])
    if rows.empty:
        return None
    figure = Figure(figsize=(6.4, 5.4), layout="constrained")
    ax = figure.add_subplot()
    top = float(max(rows["jobs_per_s"].max(), rows["predicted_jobs_per_s"].max())) * 1.08
    ax.plot([0, top], [0, top], color="grey", linewidth=1, label="model = measured")
    ax.fill_between([0, top], [0, top * (1 - MISS)], [0, top * (1 + MISS)], color="grey", alpha=0.12,
                    label=f"within {MISS:.0%}")  # fmt: skip
    for (protocol, strategy), group in rows.groupby(["protocol", "strategy"], sort=True):
        marker = MARKERS.get(str(protocol), "^")
        for is_clean, part in group.groupby("clean"):
            ax.scatter(part["predicted_jobs_per_s"], part["jobs_per_s"], marker=marker, s=28,
                       color=colour(str(strategy)) if is_clean else "none",
                       edgecolors=colour(str(strategy)),
                       label=f"{protocol} {strategy}" if is_clean else None)  # fmt: skip
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.xaxis.set_major_formatter(THOUSANDS)
    ax.yaxis.set_major_formatter(THOUSANDS)
    ax.set_xlabel("predicted jobs/s (closed-loop model of the row's parts)")
    ax.set_ylabel("measured jobs/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left")
    title = "Measured against predicted jobs/s"
    caption = (
        "A point is one repetition. On the grey line the model is exact; the band is ±20%. "
        "A hollow point was contended or saturated."
    )
    return saved(figure, out_dir, "finish_fetch_model.png", title, caption, headed=True)
