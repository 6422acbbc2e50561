"""The finish-then-fetch figures: jobs/s a point, the fused advantage, the model against measured."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from bench.report.columns import clean, filled, flag, rtt_paid_ms
from bench.report.model import MISS
from bench.report.plots.style import (
    HOME_PROTOCOL,
    OTHER_LINE,
    PALETTE,
    PROTOCOL_LINES,
    THOUSANDS,
    Plot,
    colour,
    legend_columns,
    ordered,
    saved,
    split_label,
    wrapped,
)
from bench.report.ratios import paired_ratios, ratio_text

POINT_COLUMNS = ("workers", "queues", "concurrency", "job_ms", "rtt_ms")


def _with_protocol(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its protocol filled in: a file from before the column is echomq's."""
    return frame.assign(
        protocol=frame["protocol"].fillna(HOME_PROTOCOL) if "protocol" in frame else HOME_PROTOCOL
    )


def _x_axis(ax: Axes, label: str, title: str) -> None:
    """A panel's x axis in plain numbers, with its label, the panel's title and its grid."""
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel(label)
    ax.set_title(title)
    ax.grid(which="both", alpha=0.3)


def _point_label(workers: float, queues: float, concurrency: float, job_ms: float, rtt_ms: float) -> str:
    """Two lines: the workers (queues, jobs in flight, job time where set), then the rtt."""
    first = f"{float(workers):g} workers"
    if float(queues) != 1:
        first += f" on {float(queues):g} queues"
    if float(concurrency) != 1:
        first += f" x {float(concurrency):g}"
    if float(job_ms):
        first += f", job {float(job_ms):g} ms"
    return f"{first}\nrtt {float(rtt_ms):g} ms"


def _ratio_texts(at_point: pd.DataFrame) -> list[str]:
    """A line a protocol (named when there are several): fused over each other, by report.ratios."""
    ratios = paired_ratios(
        _with_protocol(at_point.assign(strategy=[split_label(v)[1] for v in at_point["strategy"]]))
    )
    several = ratios["protocol"].nunique() > 1
    texts = []
    order = sorted(dict.fromkeys(ratios["protocol"]), key=lambda name: name != HOME_PROTOCOL)
    for protocol in order:
        rows = ratios[ratios["protocol"] == protocol]
        parts = [
            f"{'fused' if k == 0 else ''}/{r['other']} {ratio_text(r)}"
            for k, (_, r) in enumerate(rows.iterrows())
        ]
        texts.append((f"{protocol}: " if several else "") + ", ".join(parts))
    return texts


def jobs_per_s(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """Bars: mean jobs/s per strategy at each point; whiskers min..max; dots each rep."""
    needed = {"strategy", "workers", "rtt_ms", "jobs_per_s"}
    if frame.empty or not needed <= set(frame.columns) or frame["jobs_per_s"].isna().all():
        return None
    data = filled(frame.dropna(subset=["jobs_per_s"]), queues=1, concurrency=1, job_ms=0)
    points = sorted(set(data[list(POINT_COLUMNS)].itertuples(index=False, name=None)))
    variants = ordered(data["strategy"].unique().tolist())
    width = 0.8 / len(variants)
    # about half an inch a bar: nine a point (three protocols) stay readable in a figure one screen wide
    figure = Figure(figsize=(max(6.0, 2.5 + 0.6 * len(points) * len(variants)), 4.8), layout="constrained")
    ax = figure.add_subplot()
    saturated_shown = False
    at = dict(iter(data.groupby(list(POINT_COLUMNS))))  # point -> its rows
    for i, variant in enumerate(variants):
        for j, point in enumerate(points):
            reps = at[point][at[point]["strategy"] == variant]
            if reps.empty:
                continue
            x = j + (i - (len(variants) - 1) / 2) * width
            values = reps["jobs_per_s"].astype(float)
            mean = values.mean()
            ax.bar(x, mean, width * 0.9, color=colour(variant), label=variant if j == 0 else None)
            ax.errorbar(
                x, mean, yerr=[[mean - values.min()], [values.max() - mean]], color="black", capsize=4
            )
            sat = flag(reps, "saturated")
            ok = values[~sat]
            ax.scatter([x] * len(ok), ok, color="black", s=12, zorder=3)
            if sat.any():
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
    lines_above = 0
    for j, point in enumerate(points):
        top = float(at[point]["jobs_per_s"].max())
        texts = _ratio_texts(at[point])
        lines_above = max(lines_above, len(texts))
        for k, text in enumerate(reversed(texts)):  # the first protocol named highest
            ax.annotate(text, (j, top), textcoords="offset points", xytext=(0, 10 + 11 * k),
                        ha="center", fontsize=7.5, fontweight="bold")  # fmt: skip
    ax.set_ylim(0, float(data["jobs_per_s"].max()) * (1.15 + 0.09 * lines_above))
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
    subtitle = (
        f"bar = mean of {n_reps} repetitions (value at its foot), whisker = min..max, dot = one repetition"
    )
    ax.set_title(wrapped(subtitle, figure, 8), fontsize=8)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), framealpha=0.95, fontsize=8)  # off the bars
    ax.grid(axis="y", alpha=0.3)
    caption = (
        "Taller is better. Compare the bar heights of fused and the two-call strategies at each point; "
        "a gap much wider than the whiskers is a real difference, overlapping whiskers are not."
    )
    return saved(figure, out_dir, "finish_fetch_jobs.png", title, caption, headed=True)


def ratio_against_concurrency(ratios: pd.DataFrame, out_dir: Path) -> Plot | None:
    """fused/other jobs/s against jobs in flight, a line an rtt (workers, job time); whiskers min..max."""
    if ratios.empty or ratios["concurrency"].nunique() < 2:
        return None
    others = [o for o in ("two_call", "two_call_pipelined") if o in set(ratios["other"])]
    others += sorted(set(ratios["other"]) - set(others))
    figure = Figure(figsize=(5.4 * len(others) + 0.6, 4.6), layout="constrained")
    axes = figure.subplots(1, len(others), squeeze=False, sharey=True)[0]
    ratios = _with_protocol(ratios)
    protocols = sorted(ratios["protocol"].unique(), key=lambda name: (name != HOME_PROTOCOL, name))
    several = [c for c in ("workers", "job_ms") if ratios[c].nunique() > 1]
    settings = sorted(set(ratios[["rtt_ms", *several]].itertuples(index=False, name=None)))
    for ax, other in zip(axes, others, strict=True):
        rows = ratios[ratios["other"] == other]
        # a line per protocol and setting: colour = the setting, line style = the protocol
        lines = rows.groupby(["protocol", "rtt_ms", *several], sort=True)
        for (protocol, *key), line in sorted(lines, key=lambda item: protocols.index(item[0][0])):
            line = line.sort_values("concurrency")
            label = f"rtt {key[0]:g} ms" + "".join(
                f", {name.replace('_ms', '')} {value:g}" for name, value in zip(several, key[1:], strict=True)
            )
            if len(protocols) > 1:
                label = f"{protocol}, {label}"
            yerr = [line["median"] - line["lo"], line["hi"] - line["median"]]
            n = settings.index(tuple(key))
            style = PROTOCOL_LINES.get(str(protocol), OTHER_LINE)
            ax.errorbar(line["concurrency"], line["median"], yerr=yerr, marker="o", ms=4, capsize=3,
                        color=PALETTE[n % len(PALETTE)], linestyle=style, label=label)  # fmt: skip
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        _x_axis(ax, "jobs in flight per worker connection (concurrency, log scale)", f"fused / {other}")
    # one legend below the panels, off the data (the panels share their lines)
    handles, labels = axes[0].get_legend_handles_labels()
    ncol = legend_columns(labels, figure, 8, most=len(protocols) if len(protocols) > 1 else 4)
    figure.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8)
    axes[0].set_ylabel("jobs/s ratio (median of the repetition pairs)")
    title = "Where fusing stops mattering: the fused advantage against concurrency"
    caption = (
        "Above the dashed line fused does more jobs/s. Each line is one protocol (its line style) at "
        "one simulated round-trip time (its colour); "
        "as concurrency grows the auto-pipelined connection carries many jobs' calls per round trip, "
        "so what is left of the gap is the second call's client and Redis cost. "
        "A point whose rtt paid missed its nominal rtt is left out."
    )
    return saved(figure, out_dir, "finish_fetch_ratio_concurrency.png", title, caption, headed=True)


def jobs_against_concurrency(frame: pd.DataFrame, out_dir: Path) -> Plot | None:
    """jobs/s against jobs in flight, a panel a protocol, a line a paid rtt; hollow: no clean rep."""
    needed = {"protocol", "strategy", "concurrency", "rtt_ms", "jobs_per_s"}
    if frame.empty or not needed <= set(frame.columns):
        return None
    # the clean rows of each cell, or all its rows when none is clean (drawn hollow)
    rows = frame.assign(paid=rtt_paid_ms(frame), clean=clean(frame))
    some_clean = rows.groupby(["protocol", "strategy", "concurrency", "rtt_ms"])["clean"].transform("any")
    rows = rows[rows["clean"] | ~some_clean]
    protocols = sorted(rows["protocol"].unique(), key=lambda name: (name != HOME_PROTOCOL, name))
    figure = Figure(figsize=(4.2 * len(protocols) + 0.6, 4.4), layout="constrained")
    axes = figure.subplots(1, len(protocols), squeeze=False, sharey=True)[0]
    rtts = sorted(rows["rtt_ms"].unique())
    for ax, protocol in zip(axes, protocols, strict=True):
        mine = rows[rows["protocol"] == protocol]
        for (strategy, rtt), line in mine.groupby(["strategy", "rtt_ms"], sort=True):
            cells = line.groupby("concurrency").agg(
                jobs=("jobs_per_s", "median"), lo=("jobs_per_s", "min"), hi=("jobs_per_s", "max"),
                paid=("paid", "median"), clean=("clean", "any"),
            )  # fmt: skip
            paid = float(cells["paid"].median())
            colour_ = PALETTE[rtts.index(rtt) % len(PALETTE)]
            label = f"{strategy}, rtt {rtt:g} ms (paid {paid:.2f})" if rtt else f"{strategy}, rtt 0"
            yerr = [cells["jobs"] - cells["lo"], cells["hi"] - cells["jobs"]]
            style = {"fused": "-", "two_call": "--", "two_call_pipelined": ":"}.get(str(strategy), "-.")
            ax.errorbar(cells.index, cells["jobs"], yerr=yerr,
                        color=colour_, linestyle=style, marker="o",
                        markerfacecolor=colour_, capsize=3, label=label)  # fmt: skip
            hollow = cells[~cells["clean"]]
            ax.scatter(hollow.index, hollow["jobs"], s=60, facecolors="white", edgecolors=colour_, zorder=3)
        ax.set_xscale("log", base=2)
        _x_axis(ax, "jobs in flight per worker (log scale)", protocol)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("jobs/s, median of clean repetitions")
    axes[0].yaxis.set_major_formatter(THOUSANDS)
    title = "Should I raise concurrency? jobs/s against jobs in flight"
    caption = (
        "Higher is better. A line is one rtt; fused is solid, two_call dashed. "
        "Whiskers are min..max; a hollow point had no clean repetition."
    )
    return saved(figure, out_dir, "finish_fetch_concurrency.png", title, caption, headed=True)


def ratio_against_rtt(ratios: pd.DataFrame, guesses: pd.DataFrame, out_dir: Path) -> Plot | None:
    """fused / two_call against rtt: measured (the pairs' range), predicted (dotted); a panel a protocol."""
    ratios = ratios[ratios["other"] == "two_call"] if not ratios.empty else ratios
    if ratios.empty:
        return None
    protocols = sorted(ratios["protocol"].unique(), key=lambda name: (name != HOME_PROTOCOL, name))
    figure = Figure(figsize=(4.2 * len(protocols) + 0.6, 4.4), layout="constrained")
    axes = figure.subplots(1, len(protocols), squeeze=False, sharey=True)[0]
    levels = sorted(set(ratios["concurrency"]) | set(guesses.get("concurrency", pd.Series(dtype=float))))
    for ax, protocol in zip(axes, protocols, strict=True):
        for n, level in enumerate(levels):
            colour_ = PALETTE[n % len(PALETTE)]
            if not guesses.empty:
                line = guesses[(guesses["protocol"] == protocol) & (guesses["concurrency"] == level)]
                line = line.sort_values("rtt_ms")
                ax.plot(line["rtt_ms"], line["fused / two_call"].astype(float), color=colour_, linewidth=1,
                        linestyle=":", label=f"{level:g} in flight, predicted")  # fmt: skip
            got = ratios[(ratios["protocol"] == protocol) & (ratios["concurrency"] == level)].sort_values(
                "rtt_ms"
            )
            if not got.empty:
                yerr = [got["median"] - got["lo"], got["hi"] - got["median"]]
                ax.errorbar(got["rtt_ms"], got["median"], yerr=yerr, color=colour_, marker="o", capsize=3,
                            linestyle="-", linewidth=1.2, label=f"{level:g} in flight, measured")  # fmt: skip
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_xscale("symlog", linthresh=1.0)
        _x_axis(ax, "round-trip time, ms (0, then log scale)", protocol)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("fused / two_call jobs/s")
    title = "What fusing buys at each round-trip time"
    caption = (
        "Above the dashed line fused does more jobs/s. Dots are measured, with the pairs' range; "
        "a solid line joins one concurrency's measured rtts. "
        "Dotted lines are the closed-loop model's prediction from the run's own parts. "
        "A point whose rtt paid missed its nominal rtt is left out."
    )
    return saved(figure, out_dir, "finish_fetch_ratio_rtt.png", title, caption, headed=True)


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
        marker = {"echomq": "o", "bullmq": "s"}.get(str(protocol), "^")
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
