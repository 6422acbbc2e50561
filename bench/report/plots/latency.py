"""Finish-then-fetch's latency curves: from merged HDR histograms, else the CSV's percentiles."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.report.plots.style import Plot, colour, legend_columns, ordered, plain_log_ticks, saved

# Percentiles marked on the latency curves, and the curve's finer points between them.
MARKED_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
CURVE_PERCENTILES = tuple(100 * (1 - 10 ** (-k)) for k in np.linspace(math.log10(2), 3, 40))


def _at(percentiles: Iterable[float]) -> list[float]:
    """Where percentiles stand across: 1/(1-q) on a log scale, each 9 of the percentile as wide."""
    return [1 / (1 - p / 100) for p in percentiles]


def _latency_axes(ax: Axes, title: str) -> None:
    """Percentiles across, µs up on a log scale; call after plotting the curves."""
    ax.set_xscale("log")
    ax.set_xticks(_at(MARKED_PERCENTILES), [f"p{p:g}" for p in MARKED_PERCENTILES])
    ax.minorticks_off()
    ax.set_xlabel("percentile")
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_ylabel("latency (µs, log scale)")
    ax.set_title(title)
    ax.grid(which="both", alpha=0.3)


LINE_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3)))
# an optional "<protocol>." leads another protocol's strategy: "bullmq.fused-w4-c8-rtt1"
POINT = re.compile(
    r"^(?P<strategy>(?:[a-z][a-z_-]*\.)?[a-z_]+)-w(?P<workers>\d+)(?:-c(?P<conc>\d+))?(?:-j(?P<job>[\d.]+))?"
    r"-rtt(?P<rtt>[\d.]+)$"
)


def split_variant(variant: str) -> tuple[str, str]:
    """An HDR variant id, "fused-w4-rtt1" or "fused-w4-c8-j5-rtt1", as (strategy, "4 workers, rtt
    1 ms" with "x 8" and ", job 5 ms" when set); a name without a point ("fused") as (itself, "")."""
    if match := POINT.match(variant):
        workers = f"{match['workers']} workers" + (f" x {match['conc']}" if match["conc"] else "")
        job = f", job {match['job']} ms" if match["job"] else ""
        return match["strategy"], f"{workers}{job}, rtt {match['rtt']} ms"
    strategy, _, rest = variant.partition("-")
    return strategy, rest


def values_at(histogram: HdrHistogram, percentiles: Sequence[float]) -> list[int]:
    """Each percentile's get_value_at_percentile, in one pass over the counts rather than one each."""
    found = histogram.get_percentile_to_value_dict(list(percentiles))
    return [found.get(p, 0) for p in percentiles]


def latency_percentiles(
    histograms: Mapping[tuple[str, str], HdrHistogram],
    out_dir: Path,
    e2e_name: str,
    with_e2e: bool = True,
) -> Plot | None:
    """Cycle (and, ``with_e2e``, end-to-end) percentile curves a variant, from (metric, variant) merges."""
    wanted = ("cycle", "e2e") if with_e2e else ("cycle",)
    if not (metrics := [m for m in wanted if any(k[0] == m for k in histograms)]):
        return None
    figure = Figure(figsize=(6.0 * len(metrics), 4.4), layout="constrained")
    axes = figure.subplots(1, len(metrics), squeeze=False)[0]
    names = {"cycle": "worker cycle (finish + fetch)", "e2e": e2e_name}
    variants = ordered(sorted({v for _, v in histograms}))
    points = sorted({split_variant(v)[1] for v in variants})
    style = {point: LINE_STYLES[i % len(LINE_STYLES)] for i, point in enumerate(points)}
    for ax, metric in zip(axes, metrics, strict=True):
        for variant in variants:
            histogram = histograms.get((metric, variant))
            if histogram is None or histogram.get_total_count() == 0:
                continue
            strategy, point = split_variant(variant)
            ys = values_at(histogram, CURVE_PERCENTILES)
            label = ", ".join(part for part in (strategy, point) if part)
            if metric == metrics[0]:
                label += f" (n={histogram.get_total_count():,})"
            ax.plot(_at(CURVE_PERCENTILES), ys, color=colour(strategy), linestyle=style[point], label=label)
            marks = values_at(histogram, MARKED_PERCENTILES)
            ax.scatter(_at(MARKED_PERCENTILES), marks, color=colour(strategy), s=18)
        _latency_axes(ax, f"Latency percentiles: {names.get(metric, metric)}")
    # one legend for both panels, below them: off the data; colour = strategy, line style = point
    handles, labels = axes[0].get_legend_handles_labels()
    size = 9 if len(labels) <= 8 else 8
    ncol = legend_columns(labels, figure, size, most=3)
    # the panels keep their height: the figure grows by the legend's rows
    figure.set_figheight(figure.get_figheight() + 0.2 * math.ceil(len(labels) / ncol))
    figure.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=size)
    caption = (
        "Lower is better. Each line is every repetition's HDR histogram merged exactly; colour is "
        "the strategy, line style the workers/rtt point. Read the gap between strategies at p50 "
        "for the typical cycle and at p99/p99.9 for the tail."
    )
    return saved(figure, out_dir, "finish_fetch_latency.png", "Cycle latency percentiles", caption)


def queue_latency_cdf(histograms: Mapping[tuple[str, str], HdrHistogram], out_dir: Path) -> Plot | None:
    """The open regime's queue latency, a CDF a strategy and point."""
    curves = {v: h for (m, v), h in histograms.items() if m == "e2e" and h.get_total_count()}
    if not curves:
        return None
    figure = Figure(figsize=(6.8, 4.6), layout="constrained")
    ax = figure.add_subplot()
    points = sorted({split_variant(v)[1] for v in curves})
    style = {point: LINE_STYLES[i % len(LINE_STYLES)] for i, point in enumerate(points)}
    shares = np.linspace(0.0, 99.9, 200)
    for variant in ordered(sorted(curves)):
        strategy, point = split_variant(variant)
        values = values_at(curves[variant], [float(p) for p in shares])
        label = ", ".join(part for part in (strategy, point) if part)
        ax.plot(values, shares / 100, color=colour(strategy), linestyle=style[point], label=label)
    ax.set_xscale("log")
    plain_log_ticks(ax, "x")
    ax.set_xlabel("queue latency, added to finished (µs, log scale)")
    ax.set_ylabel("share of jobs finished within it")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    title = "Queue latency in the open regime"
    caption = (
        "Left is better. A curve is every repetition's histogram merged. "
        "A point's line style is the same for every strategy."
    )
    return saved(figure, out_dir, "finish_fetch_queue_cdf.png", title, caption, headed=True)


def latency_from_columns(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """The same figure from the CSV's percentile columns, when the run has no HDR files."""
    columns = {50.0: "cycle_p50_us", 90.0: "cycle_p90_us", 99.0: "cycle_p99_us", 99.9: "cycle_p999_us"}
    present = {p: c for p, c in columns.items() if c in frame.columns and not frame[c].isna().all()}
    if frame.empty or "strategy" not in frame.columns or len(present) < 2:
        return None
    figure = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = figure.add_subplot()
    for variant in ordered(frame["strategy"].unique().tolist()):
        rows = frame[frame["strategy"] == variant]
        ys = [float(rows[c].median()) for c in present.values()]
        ax.plot(_at(present), ys, marker="o", color=colour(variant), label=variant)
    _latency_axes(ax, "Cycle latency percentiles (median over repetitions of the CSV's columns)")
    ax.legend(loc="upper left")
    caption = (
        "Lower is better. This run has no HDR files, so each point is the median of the "
        "repetitions' own percentiles (not an exact merge); read it for the shape only."
    )
    return saved(figure, out_dir, "finish_fetch_latency.png", "Cycle latency percentiles", caption)
