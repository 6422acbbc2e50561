"""The sweep stage's control: a Lua loop of plain arithmetic, timed inside Redis call by call.

It reads no key and allocates nothing, so its calls differ only by what the machine does to them;
the goals read the sliced sweeps' longest calls against its worst, on this machine, not a constant.
"""

from __future__ import annotations

from dataclasses import replace

import redis

from bench.protocol.commandstats import CommandStats
from bench.results.rows import RunIds
from bench.results.sweep import SweepControlRow

SPIN = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1"
ONE_MS_US = 1000


def spin_times(node: redis.Redis, calls: int, iterations: int) -> tuple[list[int], int]:
    """Each call's µs inside Redis (INFO commandstats' EVALSHA µs read before and after it), and
    how many calls another client's script call overlapped (their µs cannot be told apart)."""
    sha = node.script_load(SPIN)
    times: list[int] = []
    before = CommandStats.read(node)
    for _ in range(calls):
        node.evalsha(sha, 0, iterations)
        after = CommandStats.read(node)
        delta, before = after.since(before), after
        if delta.calls.get("evalsha", 0) + delta.calls.get("eval", 0) == 1:
            times.append(delta.usec["evalsha"])
    return times, calls - len(times)


def control_row(ids: RunIds, times: list[int], calls: int, iterations: int, mixed: int) -> SweepControlRow:
    """The control's sweep_control.csv row from its calls' µs (empty figures when none counted)."""
    row = SweepControlRow(ids.run_id, ids.protocol, ids.profile, calls, iterations, calls_mixed=mixed)
    if not times:
        return row
    ordered = sorted(times)
    return replace(
        row,
        redis_us_median=ordered[len(ordered) // 2],
        redis_us_p999=ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))],
        redis_us_max=ordered[-1],
        calls_over_1ms=sum(t > ONE_MS_US for t in ordered),
    )


def control_line(row: SweepControlRow) -> str:
    """The control's figures in one line, as the stage prints them."""
    if row.redis_us_max is None:
        return f"control: none of {row.calls:,} calls could be timed alone (other script calls overlapped)"
    note = "; CONTENDED" if row.contended else ""
    return (
        f"control, a Lua loop ({row.calls:,} calls, in Redis): median {row.redis_us_median:,} µs, "
        f"99.9th {row.redis_us_p999:,}, max {row.redis_us_max:,}, {row.calls_over_1ms:,} over 1 ms{note}"
    )
