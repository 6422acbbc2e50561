"""The sweep stage's table on stdout, its goal lines, and the log-log slopes printed under it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from textwrap import indent
from typing import Any

from bench.harness.server import SLOWLOG_THRESHOLD_US
from bench.harness.terminal import contended_note, render_table, table_width, wrap_note
from bench.results.fits import loglog_fit
from bench.results.sweep import (
    GOAL_HEADER,
    PASS_HEADER,
    RATIO_HEADER,
    SweepCostRow,
    bullmq_ratios,
    judge_all,
    sliced_passes,
)
from bench.stages.sweep.plan import ECHOMQ, variant_label


def fmt(value: Any, digits: int = 2) -> str:
    if value == "" or value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _note(row: SweepCostRow) -> str:
    if row.skipped:
        return "error" if row.skipped.startswith("error:") else "skipped"
    return "CONTENDED" if row.contended else ""


def fmt_ms(ms: float | None) -> str:
    """Milliseconds to three significant decimals below 1 s, whole above: a multi-second hold's
    µs would only widen the column past 100 terminal columns."""
    return fmt(ms, 3 if ms is None or abs(ms) < 1000 else 0)


def _redis_hold(ms: float | None) -> str:
    """The longest call inside Redis; at the slowlog threshold, nothing was logged: at most that."""
    if ms is not None and ms * 1e3 == SLOWLOG_THRESHOLD_US:
        return f"≤ {ms:,.3f}"
    return fmt_ms(ms)


def slow_calls_text(slow_calls: int | None, calls: float | None) -> str:
    """How many of a many-call sweep's calls SLOWLOG logged ("" when none, or one call)."""
    if not slow_calls or calls is None or calls <= 1:
        return ""
    return f"{slow_calls:,} of {round(calls):,} calls over {SLOWLOG_THRESHOLD_US / 1e3:g} ms inside Redis"


def table(rows: Sequence[SweepCostRow], width: int | None = None) -> str:
    """Per size: each variant's sweep ms, µs per job, hold and the probe's max; under it, why a point
    was not measured (skipped, or an error), so the table itself stays narrow."""
    lines: list[str] = []
    header = ["variant", "scenario", "sweep ms", "µs/job", "hold ms", "in redis", "probe max µs", "note"]
    for size in sorted({r.active_size for r in rows}):
        at_size = [r for r in rows if r.active_size == size]
        cells = [
            [
                variant_label(r.protocol, r.variant),
                r.scenario,
                fmt_ms(r.sweep_ms_median),
                fmt(r.us_per_active_job),
                fmt_ms(r.hold_ms_max),
                _redis_hold(r.redis_hold_ms_max),
                fmt(r.probe_max_us),
                _note(r),
            ]
            for r in at_size
        ]
        body = render_table(
            header, cells, right=range(2, 7), keep_whole=(0, 1), width=(width or table_width()) - 2
        )
        lines += ["", f"active size {size:,}", indent(body, "  ")]
        notes = [(r, r.skipped) for r in at_size]
        notes += [(r, slow_calls_text(r.redis_slow_calls_max, r.round_trips)) for r in at_size]
        lines += [
            wrap_note(f"  {variant_label(r.protocol, r.variant)} {r.scenario}: {note}", width, "    ")
            for r, note in notes
            if note
        ]
    if rows:
        note = (
            "sweep ms: a whole sweep, the median of the timed sweeps; hold ms: the longest single "
            "call over all the timed sweeps (a maximum, so it can exceed the median sweep), timed at "
            "the client (a round trip and the client's pauses in it); in redis: the longest call's "
            "time inside Redis over the same sweeps (SLOWLOG; ≤: none "
            "was over the server's slowlog threshold; -: SLOWLOG could not tell)"
        )
        lines += ["", wrap_note(note, width, "  ")]
    if contended := [r for r in rows if r.contended]:
        foreign, steal = [r.foreign_cpu_pct for r in contended], [r.steal_pct for r in contended]
        lines += ["", contended_note(len(contended), len(rows), "points", foreign, steal, width=width)]
    return "\n".join(lines)


def goal_text(
    rows: Sequence[SweepCostRow], control: Sequence[Mapping[str, Any]] = (), width: int | None = None
) -> str:
    """The goals against this run's points and control (bench.results.sweep; the report shows the
    same), and BullMQ's all-stalled sweep beside echomq-deadline's sliced pass."""
    found = [asdict(r) for r in rows]
    results = judge_all(found, control)
    passes: dict[str, list[list[str]]] = {}
    for label, cells in sliced_passes(found):
        passes.setdefault(label, []).append(cells)
    # (title, header, rows, right-aligned columns, columns never folded: a scenario's name)
    tables: list[tuple[str, Sequence[str], list[list[str]], range, tuple[int, ...]]] = [
        (f"{label}: median calls a pass, the longest inside Redis (SLOWLOG), calls of a pass over its "
         "threshold, Redis time (commandstats), the probe's tail:", PASS_HEADER, cells, range(1, 9), (0,))
        for label, cells in passes.items()
    ]  # fmt: skip
    tables += [
        ("goals (uncontended points only, at the size each names):", GOAL_HEADER,
         [r.cells() for r in results], range(1, 3), ()),
        ("BullMQ's all-stalled sweep against echomq-deadline's sliced pass, Redis µs a stalled id:",
         RATIO_HEADER, [r.cells() for r in bullmq_ratios(found)], range(1, 4), ()),
    ]  # fmt: skip
    lines: list[str] = []
    for title, header, rows_of, right, whole in tables:
        if rows_of:
            inner = (width or table_width()) - 2
            body = render_table(header, rows_of, right=right, keep_whole=whole, width=inner)
            heading = len(render_table(header, [], right=right, keep_whole=whole, width=inner).splitlines())
            if len(body.splitlines()) > len(rows_of) + heading:
                # a row's text folded: a blank line between rows, so its continuation is not a row
                body = render_table(header, rows_of, right=right, keep_whole=whole, width=inner, leading=1)
            lines += ["", wrap_note(title, width), indent(body, "  ")]
    return "\n".join(lines)


def slopes(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Least-squares slope of log(sweep time) on log(size) (1 linear, 2 quadratic), over all sizes
    and over the two largest, keyed ``<variant label>/<scenario>``."""
    fits: dict[str, dict[str, float]] = {}
    by_pair: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        label = variant_label(r.get("protocol") or ECHOMQ, r["variant"])
        by_pair.setdefault((label, r["scenario"]), []).append((r["active_size"], r["sweep_ms_median"]))
    for (variant, scenario), points in sorted(by_pair.items()):
        if (fit := loglog_fit(points)) is not None:
            fits[f"{variant}/{scenario}"] = {
                "slope": round(fit.slope, 3),
                "slope_top_two": round(fit.slope_top_two, 3),
                "from_size": int(fit.from_x),
                "to_size": int(fit.to_x),
            }
    return fits


def slope_text(fits: dict[str, dict[str, float]], width: int | None = None) -> str:
    rows = []
    for name, fit in fits.items():
        variant, scenario = name.split("/")
        sizes = f"{fit['from_size']:,}..{fit['to_size']:,}"
        rows.append([variant, scenario, f"{fit['slope']:.2f}", sizes, f"{fit['slope_top_two']:.2f}"])
    header = ["variant", "scenario", "slope", "over sizes", "two largest"]
    body = render_table(header, rows, right=(2, 4), keep_whole=(0, 1), width=(width or table_width()) - 2)
    title = wrap_note("slope of log(sweep time) on log(active size) (1 linear, 2 quadratic):", width)
    return "\n".join(["", title, indent(body, "  ")])
