"""The report's figures, drawn with matplotlib's Agg canvas and written atomically as PNG.

Each function takes the loaded result frames (or merged histograms), writes one
PNG into the run folder and returns a ``Plot`` (file name, title, caption), or
None when the run has nothing to draw.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from bench.results import write_atomic_with

# Fixed colours so a variant looks the same in every figure.
VARIANT_ORDER = (
    "fused", "two_call", "two_call_pipelined", "atomic", "atomic_linear", "atomic_sliced", "app_side",
    "app_side_pipelined",
)  # fmt: skip
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
)  # fmt: skip
DPI = 110
# Percentiles marked on the latency curves, and the curve's finer points between them.
MARKED_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
CURVE_PERCENTILES = tuple(100 * (1 - 10 ** (-k)) for k in np.linspace(math.log10(2), 3, 40))
THOUSANDS = FuncFormatter(lambda v, _: f"{v:,.0f}")
ANOMALIES = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish", "audit_violations")


@dataclass(frozen=True)
class Plot:
    file: str
    title: str
    caption: str


# The suite's own protocol: its variants go unprefixed; another's are "<protocol>.<variant>".
HOME_PROTOCOL = "echomq"


def protocol_labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each row's variant led by its protocol unless that is echomq
    (``bullmq.fused``), so every figure tells the protocols apart."""
    # finish_fetch.csv names its variants "strategy"; the sweep and race files "variant"
    column = "strategy" if "strategy" in frame.columns else "variant"
    if frame.empty or "protocol" not in frame.columns or column not in frame.columns:
        return frame
    shown = frame.copy()
    other = shown["protocol"].fillna(HOME_PROTOCOL).astype(str) != HOME_PROTOCOL
    shown.loc[other, column] = shown.loc[other, "protocol"].astype(str) + "." + shown.loc[other, column]
    return shown


def _known(variant: str) -> bool:
    """A strategy or sweep variant the suite names, alone or at a load point (``fused-w4-rtt0``)."""
    return variant in VARIANT_ORDER or variant.split("-", 1)[0] in VARIANT_ORDER


def split_label(variant: str) -> tuple[str, str]:
    """``bullmq.fused-w4-rtt0`` -> ("bullmq", "fused-w4-rtt0"); an unprefixed label is echomq's.
    A protocol named with a hyphen (``echomq-deadline.atomic``) leads a variant the suite knows,
    which tells it from a point's dotted rtt (``fused-w4-rtt0.5``)."""
    head, dot, rest = variant.partition(".")
    if dot and rest and (head.isidentifier() or (head.replace("-", "_").isidentifier() and _known(rest))):
        return head, rest
    return HOME_PROTOCOL, variant


def _lighter(hex_colour: str, share: float = 0.45) -> str:
    red, green, blue = to_rgb(hex_colour)
    return to_hex((red + (1 - red) * share, green + (1 - green) * share, blue + (1 - blue) * share))


def _darker(hex_colour: str, share: float = 0.45) -> str:
    red, green, blue = to_rgb(hex_colour)
    return to_hex((red * (1 - share), green * (1 - share), blue * (1 - share)))


# Another protocol's variant: a shade of its echomq colour and a line of its own.
SHADES = {"bullmq": _lighter}
PROTOCOL_LINES = {HOME_PROTOCOL: "-", "bullmq": "--"}
OTHER_LINE = "-."  # a protocol without its own entry (echomq-deadline)


def colour(variant: str) -> str:
    """A variant's fixed colour; another protocol's variant takes a lighter (bullmq) or darker
    (any other) shade of it."""
    protocol, variant = split_label(variant)
    # "fused-w4-rtt0" (a strategy at one load point) takes its strategy's colour
    variant = variant.split("-", 1)[0] if variant.split("-", 1)[0] in VARIANT_ORDER else variant
    if variant in VARIANT_ORDER:
        base = PALETTE[VARIANT_ORDER.index(variant)]
    else:
        base = PALETTE[(len(VARIANT_ORDER) + sum(map(ord, variant))) % len(PALETTE)]
    return base if protocol == HOME_PROTOCOL else SHADES.get(protocol, _darker)(base)


def line_style(variant: str) -> str:
    """Solid for echomq's variants, dashed for bullmq's, dash-dotted for another protocol's."""
    return PROTOCOL_LINES.get(split_label(variant)[0], OTHER_LINE)


def _protocol_order(variant: str) -> tuple[bool, str]:
    protocol = split_label(variant)[0]
    return protocol != HOME_PROTOCOL, protocol


def ordered(variants: Sequence[str]) -> list[str]:
    """Known variants first in their fixed order, each followed by its other protocols' labels."""
    known: list[str] = []
    for name in VARIANT_ORDER:
        known += sorted((v for v in variants if split_label(v)[1] == name), key=_protocol_order)
    return known + sorted(set(variants) - set(known))


def save(figure: Figure, path: Path) -> None:
    """Render to PNG atomically: a reader never sees half a picture."""
    FigureCanvasAgg(figure)
    write_atomic_with(path, lambda handle: figure.savefig(handle, format="png", dpi=DPI))


def _plain(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def plain_log_ticks(ax: Axes, axis: str = "y") -> None:
    """Log-axis ticks as plain numbers (2,000 rather than 2e3); call after plotting.

    On an axis spanning under two decades the minor ticks at 2 and 5 are labelled
    too, and under one decade every minor tick, so there is always more than one
    number to read off.
    """
    target = ax.yaxis if axis == "y" else ax.xaxis
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    decades = math.log10(high / low) if low > 0 else 99.0

    def minor(value: float, _: object) -> str:
        lead = round(value / 10 ** math.floor(math.log10(value)), 6) if value > 0 else 0
        if decades < 1:  # under one decade: label every minor tick
            return _plain(value)
        return _plain(value) if decades < 2 and lead in (2, 5) else ""

    target.set_major_formatter(FuncFormatter(lambda v, _: _plain(v)))
    target.set_minor_formatter(FuncFormatter(minor))


def _wrapped(text: str, figure: Figure, fontsize: float) -> str:
    """``text`` wrapped to the figure's width, so a subtitle is never cut off at its edges."""
    chars = int(figure.get_figwidth() * 72 / (fontsize * 0.6))  # points across / an average glyph
    return "\n".join(textwrap.wrap(text, max(chars, 20)))


POINT_COLUMNS = ("workers", "concurrency", "job_ms", "rtt_ms")


def _num(value: object) -> str:
    return f"{float(value):g}"  # type: ignore[arg-type]


def _point_label(workers: object, concurrency: object, job_ms: object, rtt_ms: object) -> str:
    """Two lines: the workers (and their jobs in flight and job time when not 1 and 0), the rtt."""
    first = f"{_num(workers)} workers"
    if float(concurrency) != 1:  # type: ignore[arg-type]
        first += f" x {_num(concurrency)}"
    if float(job_ms):  # type: ignore[arg-type]
        first += f", job {_num(job_ms)} ms"
    return f"{first}\nrtt {_num(rtt_ms)} ms"


def _with_point(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every point column (an older run's concurrency 1 and job time 0 filled in)."""
    data = frame.copy()
    for column, default in (("concurrency", 1), ("job_ms", 0)):
        data[column] = data[column].fillna(default) if column in data else default
    return data


def jobs_per_s(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Bars: mean jobs/s per strategy at each point; whiskers min..max; dots each rep."""
    needed = {"strategy", "workers", "rtt_ms", "jobs_per_s"}
    if frame.empty or not needed <= set(frame.columns) or frame["jobs_per_s"].isna().all():
        return None
    data = _with_point(frame.dropna(subset=["jobs_per_s"]))
    points = sorted(set(data[list(POINT_COLUMNS)].itertuples(index=False, name=None)))
    variants = ordered(data["strategy"].unique().tolist())
    width = 0.8 / len(variants)
    figure = Figure(figsize=(max(6.0, 1.6 * len(points) * len(variants)), 4.6), layout="constrained")
    ax = figure.add_subplot()
    saturated_shown = False

    def at(point: tuple[object, ...]) -> pd.Series:
        mask = pd.Series(True, index=data.index)
        for column, value in zip(POINT_COLUMNS, point, strict=True):
            mask &= data[column] == value
        return mask

    for i, variant in enumerate(variants):
        for j, point in enumerate(points):
            reps = data[(data["strategy"] == variant) & at(point)]
            if reps.empty:
                continue
            x = j + (i - (len(variants) - 1) / 2) * width
            values = reps["jobs_per_s"].astype(float)
            mean = values.mean()
            ax.bar(x, mean, width * 0.9, color=colour(variant), label=variant if j == 0 else None)
            ax.errorbar(
                x, mean, yerr=[[mean - values.min()], [values.max() - mean]], color="black", capsize=4
            )
            sat = reps["saturated"].fillna(False).astype(bool) if "saturated" in reps else None
            ok = values[~sat] if sat is not None else values
            ax.scatter([x] * len(ok), ok, color="black", s=12, zorder=3)
            if sat is not None and sat.any():
                label = None if saturated_shown else "saturated repetition"
                ax.scatter(
                    [x] * int(sat.sum()), values[sat], color="red", marker="x", s=40, zorder=4, label=label
                )
                saturated_shown = True
            # the mean at the bar's foot, where no whisker reaches (a whisker spans min..max)
            inside = mean >= 0.12 * float(data["jobs_per_s"].max())
            ax.annotate(f"{mean:,.0f}", (x, 0), textcoords="offset points", xytext=(0, 4),
                        ha="center", va="bottom", fontsize=8, fontweight="bold",
                        color="white" if inside else "black")  # fmt: skip
    for j, point in enumerate(points):
        means = data[at(point)].groupby("strategy")["jobs_per_s"].mean()
        top = float(means.max())
        lifts = [o for o in ("two_call", "two_call_pipelined") if o in means.index and means[o] > 0]
        if "fused" in means.index:
            for k, other in enumerate(reversed(lifts)):  # the first named highest
                ax.annotate(f"fused/{other} = {means['fused'] / means[other]:.2f}", (j, top),
                            textcoords="offset points", xytext=(0, 16 + 12 * k), ha="center", fontsize=8,
                            fontweight="bold")  # fmt: skip
    ax.set_ylim(0, float(data["jobs_per_s"].max()) * 1.3)
    ax.set_xticks(range(len(points)), [_point_label(*point) for point in points])
    ax.set_ylabel("jobs finished per second (jobs/s)")
    ax.yaxis.set_major_formatter(THOUSANDS)
    ax.set_xlabel("point (workers x jobs in flight each, simulated round-trip time)")
    n_reps = int(data.groupby(["strategy", *POINT_COLUMNS]).size().max())
    # One name a strategy and one a protocol, so the title fits however many protocols ran.
    strategies = list(dict.fromkeys(split_label(v)[1] for v in variants))
    protocols = list(dict.fromkeys(split_label(v)[0] for v in variants))
    title = "Throughput: fused against " + " and ".join(v for v in strategies if v != "fused")
    if len(protocols) > 1:
        title += f" ({', '.join(protocols)})"
    figure.suptitle(title)
    subtitle = (
        f"bar = mean of {n_reps} repetitions (value at its foot), whisker = min..max, dot = one repetition"
    )
    ax.set_title(_wrapped(subtitle, figure, 8), fontsize=8)
    ax.legend(loc="upper right", framealpha=0.95)
    ax.grid(axis="y", alpha=0.3)
    save(figure, out_dir / "finish_fetch_jobs.png")
    caption = (
        "Taller is better. Compare the bar heights of fused and the two-call strategies at each point; "
        "a gap much wider than the whiskers is a real difference, overlapping whiskers are not."
    )
    return Plot("finish_fetch_jobs.png", title, caption)


def ratio_against_concurrency(ratios: pd.DataFrame, out_dir: Path) -> Plot | None:
    """fused/two_call and fused/two_call_pipelined jobs/s against jobs in flight, one line per rtt
    (and per workers and job time, when the run has several); whiskers: the pairs' min..max."""
    if ratios.empty or ratios["concurrency"].nunique() < 2:
        return None
    others = [o for o in ("two_call", "two_call_pipelined") if o in set(ratios["other"])]
    others += sorted(set(ratios["other"]) - set(others))
    figure = Figure(figsize=(5.4 * len(others) + 0.6, 4.6), layout="constrained")
    axes = figure.subplots(1, len(others), squeeze=False, sharey=True)[0]
    several = [c for c in ("workers", "job_ms") if ratios[c].nunique() > 1]
    for ax, other in zip(axes, others, strict=True):
        rows = ratios[ratios["other"] == other]
        for n, (key, line) in enumerate(rows.groupby(["rtt_ms", *several], sort=True)):
            line = line.sort_values("concurrency")
            parts = (key,) if not isinstance(key, tuple) else key
            label = f"rtt {parts[0]:g} ms" + "".join(
                f", {name.replace('_ms', '')} {value:g}"
                for name, value in zip(several, parts[1:], strict=True)
            )
            yerr = [line["median"] - line["lo"], line["hi"] - line["median"]]
            ax.errorbar(line["concurrency"], line["median"], yerr=yerr, marker="o", ms=4, capsize=3,
                        color=PALETTE[n % len(PALETTE)], label=label)  # fmt: skip
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("jobs in flight per worker connection (concurrency, log scale)")
        ax.set_title(f"fused / {other}")
        ax.grid(which="both", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    axes[0].set_ylabel("jobs/s ratio (median of the repetition pairs)")
    title = "Where fusing stops mattering: the fused advantage against concurrency"
    figure.suptitle(title)
    caption = (
        "Above the dashed line fused does more jobs/s. Each line is one simulated round-trip time; "
        "as concurrency grows the auto-pipelined connection carries many jobs' calls a round trip, "
        "so what is left of the gap is the second call's client and Redis cost."
    )
    return _saved(figure, out_dir, "finish_fetch_ratio_concurrency.png", title, caption)


def _percentile_axis(ax: Axes) -> None:
    """x = 1/(1-q) on a log scale: each 9 of the percentile takes the same width."""
    ax.set_xscale("log")
    ticks = [1 / (1 - p / 100) for p in MARKED_PERCENTILES]
    ax.set_xticks(ticks, [f"p{p:g}" for p in MARKED_PERCENTILES])
    ax.minorticks_off()
    ax.set_xlabel("percentile")


def _latency_axes(ax: Axes, title: str, legend: bool = True) -> None:
    """Percentiles across, µs up on a log scale; call after plotting the curves."""
    _percentile_axis(ax)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_ylabel("latency (µs, log scale)")
    ax.set_title(title)
    ax.grid(which="both", alpha=0.3)
    if legend:
        ax.legend(loc="upper left")


LINE_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3)))
E2E_NAME = "end to end (enqueue to finish)"
# an optional "<protocol>." leads another protocol's strategy: "bullmq.fused-w4-c8-rtt1"
POINT = re.compile(
    r"^(?P<strategy>(?:[a-z][a-z_-]*\.)?[a-z_]+)-w(?P<workers>\d+)(?:-c(?P<conc>\d+))?(?:-j(?P<job>[\d.]+))?"
    r"-rtt(?P<rtt>[\d.]+)$"
)


def split_variant(variant: str) -> tuple[str, str]:
    """An HDR variant id, "fused-w4-rtt1" or "fused-w4-c8-j5-rtt1", as (strategy, "4 workers, rtt
    1 ms" with "x 8" and ", job 5 ms" when set); a name without a point ("fused") as (itself, "")."""
    match = POINT.match(variant)
    if match:
        workers = f"{match['workers']} workers" + (f" x {match['conc']}" if match["conc"] else "")
        job = f", job {match['job']} ms" if match["job"] else ""
        return match["strategy"], f"{workers}{job}, rtt {match['rtt']} ms"
    strategy, _, rest = variant.partition("-")
    return strategy, rest


def latency_percentiles(
    histograms: Mapping[tuple[str, str], HdrHistogram], out_dir: Path, e2e_name: str = E2E_NAME
) -> Plot | None:
    """Cycle (and end-to-end) latency percentile curves per variant, from merged HDR histograms.

    ``histograms`` maps (metric, variant) to the merge of every repetition's histogram;
    ``e2e_name`` is what the end-to-end panel measured (in closed loop: the backlog's wait).
    """
    metrics = [m for m in ("cycle", "e2e") if any(k[0] == m for k in histograms)]
    if not metrics:
        return None
    figure = Figure(figsize=(6.0 * len(metrics), 5.2), layout="constrained")
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
            xs = [1 / (1 - p / 100) for p in CURVE_PERCENTILES]
            ys = [histogram.get_value_at_percentile(p) for p in CURVE_PERCENTILES]
            label = ", ".join(part for part in (strategy, point) if part)
            if metric == metrics[0]:
                label += f" (n={histogram.get_total_count():,})"
            ax.plot(xs, ys, color=colour(strategy), linestyle=style[point], label=label)
            marks = [histogram.get_value_at_percentile(p) for p in MARKED_PERCENTILES]
            ax.scatter([1 / (1 - p / 100) for p in MARKED_PERCENTILES], marks, color=colour(strategy), s=18)
        _latency_axes(ax, f"Latency percentiles: {names.get(metric, metric)}", legend=False)
    # one legend for both panels, below them: off the data; colour = strategy, line style = point
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3), fontsize=9)
    caption = (
        "Lower is better. Each line is every repetition's HDR histogram merged exactly; colour is "
        "the strategy, line style the workers/rtt point. Read the gap between strategies at p50 "
        "for the typical cycle and at p99/p99.9 for the tail."
    )
    return _saved(figure, out_dir, "finish_fetch_latency.png", "Cycle latency percentiles", caption)


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
        xs = [1 / (1 - p / 100) for p in present]
        ys = [float(rows[c].median()) for c in present.values()]
        ax.plot(xs, ys, marker="o", color=colour(variant), label=variant)
    _latency_axes(ax, "Cycle latency percentiles (median over repetitions of the CSV's columns)")
    caption = (
        "Lower is better. This run has no HDR files, so each point is the median of the "
        "repetitions' own percentiles (not an exact merge); read it for the shape only."
    )
    return _saved(figure, out_dir, "finish_fetch_latency.png", "Cycle latency percentiles", caption)


def _per_scenario(
    frame: pd.DataFrame, column: str, ylabel: str, title: str
) -> tuple[Figure, list[tuple[Axes, pd.DataFrame]]] | None:
    needed = {"variant", "scenario", "active_size", column}
    if frame.empty or not needed <= set(frame.columns):
        return None
    data = frame.dropna(subset=[column, "active_size"])
    data = data[(data[column] > 0) & (data["active_size"] > 0)]  # log axes
    if data.empty:
        return None
    scenarios = [s for s in ("healthy", "mixed", "all_stalled") if s in set(data["scenario"])]
    scenarios += sorted(set(data["scenario"]) - set(scenarios))
    figure = Figure(figsize=(4.6 * len(scenarios) + 0.6, 4.6), layout="constrained")
    axes = figure.subplots(1, len(scenarios), squeeze=False, sharey=True)[0]
    panels = []
    for ax, scenario in zip(axes, scenarios, strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"scenario: {scenario}")
        ax.set_xlabel("active-list size (jobs, log scale)")
        ax.grid(which="both", alpha=0.3)
        panels.append((ax, data[data["scenario"] == scenario]))
    axes[0].set_ylabel(ylabel)
    figure.suptitle(title)
    return figure, panels


def _finish_panels(panels: list[tuple[Axes, pd.DataFrame]]) -> None:
    for ax, _ in panels:
        plain_log_ticks(ax, "x")
        plain_log_ticks(ax, "y")
    # one legend below the panels, off the data (the panels share their variants and colours)
    seen: dict[str, Any] = {}
    for ax, _ in panels:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    figure = panels[0][0].get_figure()
    assert isinstance(figure, Figure)
    figure.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=min(len(seen), 4),
                  fontsize=8)  # fmt: skip


def _slope_guides(ax: Axes, rows: pd.DataFrame, column: str, first: bool) -> None:
    """Dashed guides of slope 1 and 2 from the panel's lowest first point: a line parallel to a
    guide grows as that power of the size (1 linear, 2 quadratic)."""
    if rows.empty:
        return
    x0 = float(rows["active_size"].min())
    y0 = float(rows.loc[rows["active_size"] == x0, column].min())
    x1 = float(rows["active_size"].max())
    if x1 <= x0 or y0 <= 0:
        return
    low, high = ax.get_ylim()
    for power, dashes in ((1, (4, 3)), (2, (1, 2))):
        end = x1
        if y0 * (end / x0) ** power > high:  # stop where the guide leaves the panel
            end = x0 * (high / y0) ** (1 / power)
        ys = [y0, y0 * (end / x0) ** power]
        label = f"slope {power} ({'linear' if power == 1 else 'quadratic'})" if first else None
        ax.plot([x0, end], ys, color="black", linewidth=0.9, dashes=dashes, alpha=0.6, label=label, zorder=1)
        ax.annotate(f"slope {power}", (end, ys[1]), textcoords="offset points", xytext=(-2, -10 * power + 4),
                    ha="right", fontsize=7, color="dimgray")  # fmt: skip
    ax.set_ylim(low, high)


def sweep_time(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Sweep time against active-list size, log-log, one panel a scenario, one line a variant."""
    title = "Sweep time against active-list size"
    made = _per_scenario(frame, "sweep_ms_median", "sweep time (ms, median; log scale)", title)
    if made is None:
        return None
    figure, panels = made
    for ax, rows in panels:
        for variant in ordered(rows["variant"].unique().tolist()):
            line = rows[rows["variant"] == variant].sort_values("active_size")
            stdev = line["sweep_ms_stdev"].fillna(0) if "sweep_ms_stdev" in line else None
            ax.errorbar(line["active_size"], line["sweep_ms_median"], yerr=stdev, marker="o", ms=4,
                        capsize=3, color=colour(variant), linestyle=line_style(variant),
                        label=variant)  # fmt: skip
    for i, (ax, rows) in enumerate(panels):
        _slope_guides(ax, rows, "sweep_ms_median", first=i == 0)
    _finish_panels(panels)
    caption = (
        "Lower is better. On log-log axes a slope of 1 is linear in the list size and 2 is quadratic; "
        "the dashed guides have those slopes: a line parallel to the steeper one grows with the "
        "square of the size. Compare each variant's slope, then its height. Skipped points are left "
        "out (see the table)."
    )
    return _saved(figure, out_dir, "sweep_time.png", title, caption)


def probe_max(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """The probe client's worst latency during sweeps against size; red rings mark BUSY replies."""
    title = "Other clients' worst wait during a sweep (probe max latency)"
    made = _per_scenario(frame, "probe_max_us", "probe max latency (µs, log scale)", title)
    if made is None:
        return None
    figure, panels = made
    busy_shown = False
    for ax, rows in panels:
        ax.axhline(1000, color="grey", linestyle="--", linewidth=1)
        ax.annotate("1 ms", (1, 1000), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    fontsize=8, color="grey")  # fmt: skip
        for variant in ordered(rows["variant"].unique().tolist()):
            line = rows[rows["variant"] == variant].sort_values("active_size")
            ax.plot(
                line["active_size"],
                line["probe_max_us"],
                marker="o",
                ms=4,
                color=colour(variant),
                linestyle=line_style(variant),
                label=variant,
            )
            if "probe_busy" in line:
                busy = line[line["probe_busy"].fillna(0) > 0]
                if not busy.empty:
                    ax.scatter(busy["active_size"], busy["probe_max_us"], s=120, facecolors="none",
                               edgecolors="red", label=None if busy_shown else "probe got BUSY")  # fmt: skip
                    busy_shown = True
    _finish_panels(panels)
    caption = (
        "Lower is better. This is how long another client waited at worst while the sweep ran: "
        "an atomic sweep holds Redis for its whole call, so its line rises with size; "
        "a line that stays near the 1 ms mark does not block others."
    )
    return _saved(figure, out_dir, "sweep_probe_max.png", title, caption)


def race_anomalies(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Anomalies per stalled job, per variant, one panel per simulated check-to-act delay."""
    kinds = [k for k in ANOMALIES if k in frame.columns]
    if frame.empty or not kinds or not {"variant", "delay_ms"} <= set(frame.columns):
        return None
    data = frame.copy()
    reps = data["reps"].fillna(1) if "reps" in data else 1
    data["_jobs"] = data["stalled_jobs"].fillna(0) * reps if "stalled_jobs" in data else 0
    delays = sorted(data["delay_ms"].dropna().unique().tolist())
    if not delays:
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
            total = 0
            for k, kind in enumerate(kinds):
                count = float(sub[kind].fillna(0).sum())
                total += int(count)
                per = count / jobs if jobs else 0.0
                x = i + (k - (len(kinds) - 1) / 2) * width
                ax.bar(x, per, width * 0.9, color=colour(variant), hatch=hatches[k % len(hatches)],
                       edgecolor="black", linewidth=0.5)  # fmt: skip
            totals.append(total)
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
    return _saved(figure, out_dir, "race_anomalies.png", title, caption)


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
    return _saved(figure, out_dir, "bullmq_worker_jobs.png", title, caption)


def _saved(figure: Figure, out_dir: Path, name: str, title: str, caption: str) -> Plot:
    save(figure, out_dir / name)
    return Plot(name, title, caption)
