"""The sweep section's goals table (the goals docs/protocols.md states, judged by
bench.results.sweep with the run's control), BullMQ's all-stalled sweep beside echomq-deadline's
sliced pass, and what echomq-deadline's timed sweep call holds."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd

from bench.report.markdown import markdown_table
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
    found = control_of(control_rows)
    if found is not None:
        shown = found.text().removeprefix("control: ")
        lines += ["**The control**, a Lua loop of plain arithmetic (no key, no allocation) timed call "
                  f"by call inside Redis in this run: {shown}.", ""]  # fmt: skip
    passes = sliced_passes(rows)
    if passes:
        lines += ["**The sliced passes.** Each row gives the median calls per pass. "
                  "It gives the longest call inside Redis (SLOWLOG; the threshold when none was logged). "
                  "It gives the most calls of one pass over the threshold. "
                  "Then Redis time of the pass (commandstats), per stalled id too, and the probe's "
                  "tail meanwhile:",
                  ""]  # fmt: skip
        table = pd.DataFrame([[label, *cells] for label, cells in passes], columns=["variant", *PASS_HEADER])
        lines += [markdown_table(table), ""]
    ratios = bullmq_ratios(rows)
    if ratios:
        lines += ["**BullMQ's all-stalled sweep beside echomq-deadline's sliced pass**, Redis µs a "
                  "stalled id (commandstats, median of the timed sweeps):", ""]  # fmt: skip
        lines += [markdown_table(pd.DataFrame([r.cells() for r in ratios], columns=list(RATIO_HEADER))), ""]
    return lines


def deadline_timing_lines(frame: pd.DataFrame) -> list[str]:
    if "protocol" in frame.columns and (frame["protocol"] == DEADLINE).any():
        return [DEADLINE_TIMING, ""]
    return []
