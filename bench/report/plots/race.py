"""The race audit's figure: anomalies per stalled job, per sweep variant and check-to-act delay."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from bench.report.plots.style import Plot, colour, ordered, saved

ANOMALIES = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish", "audit_violations")


def race_anomalies(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Anomalies per stalled job, per variant, one panel per simulated check-to-act delay."""
    kinds = [k for k in ANOMALIES if k in frame.columns]
    if frame.empty or not kinds or not {"variant", "delay_ms"} <= set(frame.columns):
        return None
    data = frame.copy()
    reps = data["reps"].fillna(1) if "reps" in data else 1
    data["_jobs"] = data["stalled_jobs"].fillna(0) * reps if "stalled_jobs" in data else 0
    if not (delays := sorted(data["delay_ms"].dropna().unique().tolist())):
        return None
    # each panel as wide as its variants need: a panel of two is not stretched to match one of five
    counts = [max(1, len(data.loc[data["delay_ms"] == d, "variant"].unique())) for d in delays]
    figure = Figure(figsize=(max(6.0, 1.4 + 1.25 * sum(counts)), 5.4), layout="constrained")
    axes = figure.subplots(
        1, len(delays), squeeze=False, sharey=True, gridspec_kw={"width_ratios": [c + 0.6 for c in counts]}
    )[0]
    hatches = ("", "//", "..", "xx")
    for ax, delay in zip(axes, delays, strict=True):
        rows = data[data["delay_ms"] == delay]
        variants = ordered(rows["variant"].unique().tolist())
        width = 0.8 / len(kinds)
        totals = []
        for i, variant in enumerate(variants):
            sub = rows[rows["variant"] == variant]
            jobs = float(sub["_jobs"].sum())
            anomalies = [float(sub[kind].fillna(0).sum()) for kind in kinds]
            totals.append(sum(int(count) for count in anomalies))
            for k, count in enumerate(anomalies):
                per = count / jobs if jobs else 0.0
                x = i + (k - (len(kinds) - 1) / 2) * width
                ax.bar(x, per, width * 0.9, color=colour(variant), hatch=hatches[k % len(hatches)],
                       edgecolor="black", linewidth=0.5)  # fmt: skip
        labels = [f"{v}\n({t:,} in all)" for v, t in zip(variants, totals, strict=True)]
        # slanted, anchored at their right end: long variant names do not run into each other
        ax.set_xticks(
            range(len(variants)), labels, rotation=30, ha="right", rotation_mode="anchor", fontsize=8
        )
        ax.set_title(f"simulated check-to-act delay {delay:g} ms")
        ax.set_xlabel("sweep variant")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("anomalies per stalled job (over every repetition)")
    axes[0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    handles = [Patch(facecolor="white", edgecolor="black", hatch=hatches[k % len(hatches)],
                     label=kind.replace("_", " ")) for k, kind in enumerate(kinds)]  # fmt: skip
    axes[0].legend(handles=handles, loc="upper left", fontsize=8)
    title = "Race anomalies per sweep variant"
    figure.suptitle(f"{title} (one bar per kind; under each variant: the count over all its settings)")
    caption = (
        "Lower is better and zero is the goal: an atomic sweep must show no bar at all. "
        "A bar of 1 is one anomaly for every stalled job (K sweepers can recover a job K-1 times over). "
        "Bars for an app-side variant, growing with the delay, are its check-then-act gap biting."
    )
    return saved(figure, out_dir, "race_anomalies.png", title, caption)
