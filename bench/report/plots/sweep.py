"""The sweep-cost figures against active-list size, log-log, one panel a scenario."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.report.columns import flag
from bench.report.plots.style import Plot, colour, legend_columns, line_style, ordered, plain_log_ticks, saved


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
        panel = data[data["scenario"] == scenario]
        if panel["active_size"].nunique() == 1:  # one size: a log axis needs a span (a decade around it)
            size = float(panel["active_size"].iloc[0])
            ax.set_xlim(size / 3, size * 3)
        panels.append((ax, panel))
    axes[0].set_ylabel(ylabel)
    figure.suptitle(title)
    return figure, panels


def _variant_lines(rows: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each variant in its fixed order, with its rows by active-list size: one line a variant."""
    for variant in ordered(rows["variant"].unique().tolist()):
        yield variant, rows[rows["variant"] == variant].sort_values("active_size")


def _finish_panels(figure: Figure, panels: list[tuple[Axes, pd.DataFrame]]) -> None:
    for ax, _ in panels:
        plain_log_ticks(ax, "x")
        plain_log_ticks(ax, "y")
    # one legend below the panels, off the data (the panels share their variants and colours)
    seen: dict[str, Any] = {}
    for ax, _ in panels:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    ncol = legend_columns(list(seen), figure, 8, most=4)
    figure.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=ncol, fontsize=8)


def _slope_guides(ax: Axes, rows: pd.DataFrame, column: str, first: bool) -> None:
    """Guides of slope 1 (linear) and 2 (quadratic) from the lowest first point, to read growth by."""
    if rows.empty:
        return
    x0 = float(rows["active_size"].min())
    y0 = float(rows.loc[rows["active_size"] == x0, column].min())
    x1 = float(rows["active_size"].max())
    if x1 <= x0 or y0 <= 0:
        return
    low, high = ax.get_ylim()
    for power, dashes in ((1, (4, 3)), (2, (1, 2))):
        end = min(x1, x0 * (high / y0) ** (1 / power))  # stop where the guide leaves the panel
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
        for variant, line in _variant_lines(rows):
            stdev = line["sweep_ms_stdev"].fillna(0) if "sweep_ms_stdev" in line else None
            ax.errorbar(line["active_size"], line["sweep_ms_median"], yerr=stdev, marker="o", ms=4,
                        capsize=3, color=colour(variant), linestyle=line_style(variant),
                        label=variant)  # fmt: skip
    for i, (ax, rows) in enumerate(panels):
        _slope_guides(ax, rows, "sweep_ms_median", first=i == 0)
    _finish_panels(figure, panels)
    caption = (
        "Lower is better. On log-log axes a slope of 1 is linear in the list size and 2 is quadratic; "
        "the dashed guides have those slopes: a line parallel to the steeper one grows with the "
        "square of the size. Compare each variant's slope, then its height. Skipped points are left "
        "out (see the table)."
    )
    return saved(figure, out_dir, "sweep_time.png", title, caption)


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
        for variant, line in _variant_lines(rows):
            ax.plot(line["active_size"], line["probe_max_us"], marker="o", ms=4, color=colour(variant),
                    linestyle=line_style(variant), label=variant)  # fmt: skip
            if "probe_busy" in line:
                busy = line[line["probe_busy"].fillna(0) > 0]
                if not busy.empty:
                    ax.scatter(busy["active_size"], busy["probe_max_us"], s=120, facecolors="none",
                               edgecolors="red", label=None if busy_shown else "probe got BUSY")  # fmt: skip
                    busy_shown = True
    _finish_panels(figure, panels)
    caption = (
        "Lower is better. This is how long another client waited at worst while the sweep ran. "
        "An atomic sweep holds Redis for its whole call, so its line rises with size. "
        "A line that stays near the 1 ms mark does not block others."
    )
    return saved(figure, out_dir, "sweep_probe_max.png", title, caption)


BUSY_MS = 5000.0  # Redis's busy-reply-threshold: past it, other clients get BUSY
SLOW_MS = 1.0


def hold_against_size(frame: pd.DataFrame, hazard: pd.DataFrame | None, out_dir: Path) -> Plot | None:
    """The longest call inside Redis against active-list size, all-stalled: contended hollow, a bound
    by SLOWLOG pointing down, a hazard call past its socket timeout (a lower bound) up."""
    needed = {"variant", "scenario", "active_size", "redis_hold_ms_max", "contended"}
    if frame.empty or not needed <= set(frame.columns):
        return None
    rows = frame[(frame["scenario"] == "all_stalled")].dropna(subset=["redis_hold_ms_max", "active_size"])
    rows = rows[rows["redis_hold_ms_max"] > 0]
    if rows.empty:
        return None
    figure = Figure(figsize=(8.2, 5.2), layout="constrained")
    ax = figure.add_subplot()
    for variant, line in _variant_lines(rows):
        hue = colour(variant)
        ax.plot(line["active_size"], line["redis_hold_ms_max"], color=hue, linestyle=line_style(variant),
                label=variant)  # fmt: skip
        bound = line.get("redis_slow_calls_max", pd.Series(1, index=line.index)).fillna(1) == 0
        busy = flag(line, "contended")
        for mask, marker, face in ((~bound & ~busy, "o", hue), (~bound & busy, "o", "white"),
                                   (bound, "v", hue)):  # fmt: skip
            part = line[mask]
            ax.scatter(part["active_size"], part["redis_hold_ms_max"], marker=marker, s=30,
                       facecolors=face, edgecolors=hue, zorder=3)  # fmt: skip
    if hazard is not None and not hazard.empty and {"stalled_jobs", "elapsed_s"} <= set(hazard.columns):
        held = hazard[hazard["error"].fillna("").astype(str) != ""] if "error" in hazard else hazard
        ax.scatter(held["stalled_jobs"], held["elapsed_s"] * 1e3, marker="^", s=60, color="black",
                   label="BullMQ's check, one call:\nheld at least this long", zorder=4)  # fmt: skip
    for limit, text in ((SLOW_MS, "1 ms: every other client waits"), (BUSY_MS, "5 s: Redis replies BUSY")):
        ax.axhline(limit, color="red", linestyle="--", linewidth=1)
        ax.text(0.02, limit * 1.15, text, transform=ax.get_yaxis_transform(), fontsize=8, color="red")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax, "x")
    plain_log_ticks(ax, "y")
    ax.set_xlabel("active-list size, every job stalled (jobs, log scale)")
    ax.set_ylabel("longest call inside Redis (ms, log scale)")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    title = "How long one sweep call holds Redis, against the active list"
    caption = (
        "Lower is better. A hollow point was contended; a point down is only bounded by SLOWLOG's threshold. "
        "Above the 5 s line other clients get BUSY replies."
    )
    return saved(figure, out_dir, "sweep_hold.png", title, caption, headed=True)
