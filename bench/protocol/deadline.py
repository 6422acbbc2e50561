"""echomq-deadline: lua/'s protocol with each lock's deadline also kept in a sorted set.

The same contract for every caller, but the sweep reads only the ids whose deadline has
passed, so a healthy sweep costs a few commands however long active is. What each script
(lua/*Deadline-*.lua) adds, and the full pass that finds a missing entry, is in its header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from bench.protocol.base import STAGE_CHUNK, EchoMQ, Job, ScriptCall, SweepSlice, WorkerOptions
from bench.protocol.keys import QueueKeys

# addJob takes no lock, so it is lua/'s own.
DEADLINE_SCRIPT_FILES: dict[str, str] = {
    "add_job": "addJob-6.lua",
    "move_to_active": "moveToActiveDeadline-11.lua",
    "move_to_finished": "moveToFinishedDeadline-14.lua",
    "sweep": "moveStalledJobsToWaitDeadline-8.lua",
    "extend_lock": "extendLockDeadline-3.lua",
}
# The full pass runs at most this often (ms): a job whose entry is missing is found
# by the first full pass after it went missing and reclaimed by the sweep after that.
FULL_PASS_MS = 60_000


# Keys the scripts build from the prefix (so in the queue's slot).
def deadlines_key(keys: QueueKeys) -> str:
    """The deadline index: a ZSET, one entry a locked job, score = when its lock expires (ms)."""
    return keys.key("deadlines")


def full_pass_key(keys: QueueKeys) -> str:
    """The full pass's throttle (a STRING set with PX)."""
    return keys.key("deadline-full")


def pass_key(keys: QueueKeys) -> str:
    """Where a pass spread over calls (a limit) stands (a HASH), while it runs."""
    return keys.key("deadline-pass")


def lapse_deadlines(pipe: Any, keys: QueueKeys, job_ids: Sequence[str], at_ms: int) -> None:
    """Queue on ``pipe`` deadline entries that have passed for ``job_ids`` (XX: a missing
    entry stays missing), in the order their locks lapsed, oldest first, each a
    millisecond after the one before and the last at ``at_ms``: the sweep visits them in
    that order (in fetch order, each LREM finds its id at the oldest end of active)."""
    first = at_ms - len(job_ids) + 1
    for start in range(0, len(job_ids), STAGE_CHUNK):
        chunk = job_ids[start : start + STAGE_CHUNK]
        pipe.zadd(deadlines_key(keys), {job_id: first + start + i for i, job_id in enumerate(chunk)}, xx=True)


class EchoMQDeadline(EchoMQ):
    """lua/'s protocol with a deadline index: cheap sweeps, one ZADD or ZREM more a step."""

    name = "echomq-deadline"
    # The sweep variants that keep the index: the protocol's own (bench.protocol.sweep), in one
    # call or its pass spread over calls of a limit (its sliced form).
    sweep_variants: ClassVar[tuple[str, ...] | None] = ("atomic", "atomic_sliced")
    sliced_sweep_own: ClassVar[bool] = True

    def __init__(self, full_pass_ms: int = FULL_PASS_MS, sweep_limit: int = 0) -> None:
        self.full_pass_ms = full_pass_ms  # 0: a full pass every sweep call
        self.sweep_limit = sweep_limit  # expired deadlines a sweep call reads; 0: all

    def script_files(self) -> Mapping[str, str]:
        return dict(DEADLINE_SCRIPT_FILES)

    def extend_lock(self, keys: QueueKeys, job: Job, *, options: WorkerOptions, now_ms: int) -> ScriptCall:
        # the queue's clock, not the server's TIME: a fixed clock gives the same deadline, so the same cost
        return ScriptCall(
            "extend_lock",
            [*keys.extend_lock_keys(job.id), deadlines_key(keys)],
            [job.token, options.lock_ms, job.id, now_ms],
        )

    def sweep(self, keys: QueueKeys, *, max_stalled: int, now_ms: int, interval_ms: int) -> ScriptCall:
        call = super().sweep(keys, max_stalled=max_stalled, now_ms=now_ms, interval_ms=interval_ms)
        return ScriptCall(call.script, call.keys, [*call.args, self.full_pass_ms, self.sweep_limit])

    def sliced_sweep(
        self, keys: QueueKeys, *, max_stalled: int, now_ms: int, interval_ms: int, cut: SweepSlice
    ) -> ScriptCall:
        # The limit (ARGV[6]) is the slice: expired deadlines a call reads at most.
        call = super().sweep(keys, max_stalled=max_stalled, now_ms=now_ms, interval_ms=interval_ms)
        return ScriptCall(call.script, call.keys, [*call.args, self.full_pass_ms, cut.size, cut.budget_us])

    def sweep_state_keys(self, keys: QueueKeys) -> list[str]:
        # The index is the sweep's state too: a timed sweep removes and moves entries.
        return [*super().sweep_state_keys(keys), deadlines_key(keys)]

    def reset_sweep_throttles(self, pipe: Any, keys: QueueKeys) -> None:
        # A full pass just done: every timed call skips it alike (the steady state between
        # full passes), where an expired key would make one call of many scan active.
        super().reset_sweep_throttles(pipe, keys)
        pipe.delete(pass_key(keys))  # and no pass half done
        if self.full_pass_ms > 0:
            pipe.set(full_pass_key(keys), 0, px=self.full_pass_ms)

    def leave_stalled(self, pipe: Any, keys: QueueKeys, job_ids: Sequence[str], at_ms: int) -> None:
        # The previous sweep marked only what it found due and lockless: due entries, marked.
        super().leave_stalled(pipe, keys, job_ids, at_ms)
        lapse_deadlines(pipe, keys, job_ids, at_ms)
