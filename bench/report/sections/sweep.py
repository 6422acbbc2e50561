"""The sweep-cost section: figures, log-log slopes, the goals (docs/protocols.md, judged by
bench.results.sweep with the run's control), skipped points, and the client-default hazard."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd

from bench.report.load import RunData
from bench.report.markdown import bullmq_note, figure, flag_rows, fmt, markdown_table, missing_note, present
from bench.report.plots.style import protocol_labelled
from bench.report.plots.sweep import hold_against_size, probe_max, sweep_time
from bench.report.quiet import contended_note
from bench.report.sections.head import section_head
from bench.results.fits import loglog_fit
from bench.results.sweep import (
    GOAL_HEADER,
    GOAL_SIZE,
    MISSED,
    PASS_HEADER,
    RATIO_HEADER,
    bullmq_ratios,
    control_of,
    judge_all,
    sliced_passes,
)

DEADLINE = "echomq-deadline"
# What the restore (bench/stages/sweep/scenario.py: leave_stalled, reset_sweep_throttles) leaves
# out of the time, read from lua/moveStalledJobsToWaitDeadline-8.lua.
DEADLINE_TIMING = (
    "*echomq-deadline's timed call* is the sweep that reclaims. "
    "It runs the full pass's throttle check (EXISTS) and the ZRANGEBYSCORE of expired deadlines. "
    "It reads their marks and locks back (SMISMEMBER, MGET; a PTTL only for a lock that exists). "
    "It removes their entries and marks (ZREM, SREM). "
    "It takes the reclaimed ids from active's oldest end (RPOP chunks; an LREM only for one not "
    "found there). "
    "Then reclaimJob's HINCRBY and RPUSH to wait. "
    "It leaves out the marking sweep before it, the one that first found each id lockless. "
    "That sweep costs one PTTL and one SADD per expired entry; the restore writes its marks untimed. "
    "No timed call runs the full pass (ZCARD, LLEN, ZMSCORE over active): its throttle key is set "
    "before each one. "
    "So a job's reclaim costs that marking sweep's PTTL and SADD beyond the all-stalled figure."
)


def records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    """A frame's rows as the goal judges read them: a dict a row, by the CSV's column names."""
    return [] if frame is None else cast(list[dict[str, Any]], frame.to_dict("records"))


def goal_lines(frame: pd.DataFrame, control: pd.DataFrame | None = None) -> list[str]:
    """The goals (each at the size judged), the control, the sliced passes, BullMQ beside them."""
    rows, control_rows = records(frame), records(control)  # the CSVs' column names
    results = judge_all(rows, control_rows)
    lines: list[str] = []
    if results:
        cells = [r.cells() for r in results]
        for row in cells:
            row[3] = f"**{row[3]}**" if row[3] == MISSED else row[3]
        lines += ["**Goals**, judged on uncontended points only, at the size each names:", ""]
        lines += [markdown_table(pd.DataFrame(cells, columns=list(GOAL_HEADER))), ""]
        lines += [f"- *{r.goal.name}*: {r.goal.measure}." for r in results]
        lines += [f"- A run whose sizes stop short of {GOAL_SIZE:,} (the default profile stops at "
                  "100,000; stress reaches it) leaves a goal at that size *not measured*, but "
                  "echomq-deadline's sliced pass, judged at the run's largest size (its note says "
                  "which).", ""]  # fmt: skip
    if (found := control_of(control_rows)) is not None:
        shown = found.text().removeprefix("control: ")
        lines += ["**The control**, a Lua loop of plain arithmetic (no key, no allocation) timed call "
                  f"by call inside Redis in this run: {shown}.", ""]  # fmt: skip
    if passes := sliced_passes(rows):
        lines += ["**The sliced passes.** Each row gives the median calls per pass. "
                  "It gives the longest call inside Redis (SLOWLOG; the threshold when none was logged). "
                  "It gives the most calls of one pass over the threshold. "
                  "Then Redis time of the pass (commandstats), per stalled id too, and the probe's "
                  "tail meanwhile:",
                  ""]  # fmt: skip
        table = pd.DataFrame([[label, *cells] for label, cells in passes], columns=["variant", *PASS_HEADER])
        lines += [markdown_table(table), ""]
    if ratios := bullmq_ratios(rows):
        lines += ["**BullMQ's all-stalled sweep beside echomq-deadline's sliced pass**, Redis µs a "
                  "stalled id (commandstats, median of the timed sweeps):", ""]  # fmt: skip
        lines += [markdown_table(pd.DataFrame([r.cells() for r in ratios], columns=list(RATIO_HEADER))), ""]
    return lines


def sweep_section(data: RunData) -> list[str]:
    lines, frame = section_head(data, "sweep", "Sweep cost against active-list size", "point(s)")
    if frame is None:
        return lines
    lines += bullmq_note(frame)
    if "protocol" in frame.columns and (frame["protocol"] == DEADLINE).any():
        lines += [DEADLINE_TIMING, ""]
    skipped = frame[frame["skipped"] != ""]
    measured = frame[frame["skipped"] == ""]
    lines += figure(sweep_time(protocol_labelled(measured), data.path), "no measured sweep points")
    lines += figure(probe_max(protocol_labelled(measured), data.path), "no probe_max_us values")
    hold = hold_against_size(protocol_labelled(measured), data.frames.get("sweep_hazard"), data.path)
    lines += figure(hold, "no redis_hold_ms_max values")
    slopes = _slopes(measured)
    if not slopes.empty:
        lines += ["Slope of log(sweep time) against log(size) (1 = linear, 2 = quadratic):", "",
                  markdown_table(slopes), ""]  # fmt: skip
    lines += goal_lines(frame, data.frames.get("sweep_control"))
    if not skipped.empty:
        lines += [f"**Skipped points ({len(skipped)})**, not measured:", ""]
        named = protocol_labelled(skipped)
        points = named[["variant", "scenario", "active_size", "skipped"]].itertuples(index=False)
        lines += [f"- {v} / {s} / {fmt(n)}: {why}" for v, s, n, why in points]
        lines.append("")
    busy = measured[measured["probe_busy"].fillna(0) > 0]
    if not busy.empty:
        lines += [f"> **The probe got BUSY replies at {len(busy)} point(s)**: Redis refused other clients "
                  "while a script ran.", ""]  # fmt: skip
    shown = present(data, "sweep", frame)
    order = [c for c in ("scenario", "active_size", "protocol", "variant") if c in shown.columns]
    shown = shown.sort_values(order)
    shown["skipped"] = shown["skipped"].map(lambda why: f"**skipped**: {why}" if why else "")
    lines += ["All points:", "", markdown_table(flag_rows(shown)), ""]
    lines += _hazard(data)
    return lines


def _hazard(data: RunData) -> list[str]:
    """The client-default hazard: BullMQ's sweep past its client's timeout, against ours."""
    if (frame := data.frame("sweep_hazard")) is None:
        return []
    lines = ["### The client-default hazard: a sweep held past the socket timeout", ""]
    lines += missing_note(data, "sweep_hazard") + contended_note(frame, "call(s)")
    lines += [
        "One all-stalled BullMQ sweep per row, sent once by a client: `bullmq` is BullMQ's own connection "
        "(redis-py's socket timeout, re-sent on a timeout: `Retry(ExponentialBackoff(cap=20, base=1), 20)`), "
        "`suite` is the suite's client, which never re-sends. *server_executions* counts the script's runs "
        "on the server for the one call, *server_rejected* the re-sends Redis refused (BUSY), *probe_busy* "
        "the BUSY replies another client got meanwhile; *reply_matches* says whether the call returned "
        "exactly the jobs that moved.",
        "",
    ]
    for row in frame.to_dict("records"):
        reply = "raised" if pd.isna(row["reply_ids"]) else f"returned {fmt(row['reply_ids'])} ids"
        verdict = "matches" if row["reply_matches"] is True else "**does not match**"
        error = str(row["error"] or "")
        lines.append(
            f"- {row['client']}, {fmt(row['stalled_jobs'])} stalled, "
            f"timeout {fmt(row['socket_timeout_s'])} s: "
            f"{fmt(row['server_executions'])} execution{'' if row['server_executions'] == 1 else 's'} and "
            f"{fmt(row['server_rejected'])} refused for one "
            f"call; it {reply} for {fmt(row['moved_ids'])} moved ({verdict}); other clients got "
            f"{fmt(row['probe_busy'])} BUSY" + (f"; the caller saw {error}" if error else "")
        )
    lines += ["", markdown_table(flag_rows(present(data, "sweep_hazard", frame))), ""]
    return lines


def _slopes(frame: pd.DataFrame) -> pd.DataFrame:
    """The stage's own loglog_fit as a table: over every size, and between the two largest."""
    table = []
    for (protocol, variant, scenario), group in frame.groupby(["protocol", "variant", "scenario"]):
        fit = loglog_fit(zip(group["active_size"], group["sweep_ms_median"], strict=True))
        if fit is None:
            continue
        table.append({
            "protocol": protocol, "variant": variant, "scenario": scenario,
            "sizes": f"{fmt(fit.from_x)}..{fmt(fit.to_x)}",
            "slope (all sizes)": round(fit.slope, 3), "slope (two largest)": round(fit.slope_top_two, 3),
        })  # fmt: skip
    return pd.DataFrame(table)
