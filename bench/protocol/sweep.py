"""The stalled-job sweepers, behind one interface: atomic in Lua, or app-side in round trips."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.errors import BenchError
from bench.protocol.base import ScriptCall, SweepSlice, protocol_named
from bench.protocol.queue import Queue, _text
from bench.protocol.scripts import SCRIPT_FILES, script_source

STALLED_REASON = "job stalled more than allowable limit"
# Commands per pipeline in the pipelined sweep: bounds client memory at 1M ids.
PIPELINE_CHUNK = 10_000


@dataclass
class SweepResult:
    failed: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    round_trips: int = 0
    calls: int = 0  # EVALSHA calls (atomic) or 0
    longest_call_s: float = 0.0  # the longest single round trip: the hold on Redis


class Sweeper(ABC):
    """Sweeps one queue's active list for jobs whose lock has gone."""

    name: str

    def __init__(self, queue: Queue, max_stalled: int = 1) -> None:
        self.queue = queue
        self.max_stalled = max_stalled

    def sweep(self) -> SweepResult:
        before = self.queue.client.round_trips
        result = SweepResult()
        self._sweep(result)
        result.round_trips = self.queue.client.round_trips - before
        return result

    @abstractmethod
    def _sweep(self, result: SweepResult) -> None: ...

    def _timed(self, result: SweepResult, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        reply = call(*args)
        result.longest_call_s = max(result.longest_call_s, time.perf_counter() - started)
        return reply


class AtomicSweeper(Sweeper):
    """The protocol's moveStalledJobsToWait: mark on one sweep, move on the next."""

    name = "atomic"
    script_file = "moveStalledJobsToWait-8.lua"

    def __init__(
        self, queue: Queue, max_stalled: int = 1, check_interval_ms: int = 0, clear_throttle: bool = True
    ) -> None:
        super().__init__(queue, max_stalled)
        self.check_interval_ms = check_interval_ms
        # A throttled protocol's sweep (BullMQ's) does nothing while its throttle key lives. Asked
        # for no interval, each call sweeps: the key is deleted in the same round trip, before it.
        # A caller that clears it untimed itself (the sweep-cost restore) passes clear_throttle=False.
        self.clear_throttle = clear_throttle and check_interval_ms == 0 and queue.protocol.sweep_throttled
        if not self.protocol_step:
            ensure_script(queue, self.script_file)

    # True for the protocol's own sweep step: its call and reply come from the queue's
    # protocol. The linear and sliced forms are extra scripts of lua/ with the same KEYS.
    protocol_step = True
    extra_args: tuple[Any, ...] = ()  # ARGV after the protocol's (a slice's size and budget)

    def _build(self, extra_args: tuple[Any, ...] = ()) -> ScriptCall:
        call = self.queue.protocol.sweep(
            self.queue.keys,
            max_stalled=self.max_stalled,
            now_ms=self.queue.clock(),
            interval_ms=self.check_interval_ms,
        )
        if not self.protocol_step:
            call = ScriptCall(self.script_file, call.keys, [*call.args, *extra_args])
        return call

    def _call(self, extra_args: tuple[Any, ...]) -> Any:
        call = self._build(extra_args)
        if not self.clear_throttle:
            return self.queue.call(call)
        pipe = self.queue.client.pipeline(transaction=False)
        pipe.delete(self.queue.keys.stalled_check)
        self.queue.pipeline_call(pipe, call)
        return pipe.execute()[1]

    def _goes_on(self, reply: Any) -> bool:
        """Whether the pass goes on in another call (a sliced sweep's)."""
        return False

    def _sweep(self, result: SweepResult) -> None:
        while True:
            reply = self._timed(result, self._call, self.extra_args)
            result.calls += 1
            failed, moved = self.queue.protocol.read_swept(reply)
            result.failed.extend(failed)
            result.moved.extend(moved)
            if not self._goes_on(reply):
                break


class AppSideSweeper(Sweeper):
    """The non-atomic baseline of protocol.md: one command a round trip, gaps kept (what the
    suite measures). It reclaims a job as soon as its lock is missing, so two overlapping
    sweeps can both reclaim one job, and a job finished between EXISTS and LPUSH ends in
    both completed and wait."""

    name = "app_side"

    def __init__(
        self, queue: Queue, max_stalled: int = 1, act_delay: Callable[[], None] = lambda: None
    ) -> None:
        super().__init__(queue, max_stalled)
        self.act_delay = act_delay  # between check and act: simulates a network round trip

    def _recover(self, pipe: Any, job_id: str, attempts: int, result: SweepResult) -> None:
        """Queue one job's recovery writes after its LREM: to failed or wait, then atm."""
        keys = self.queue.keys
        job_key = keys.job(job_id)
        if attempts > self.max_stalled:
            ts = self.queue.clock()
            pipe.zadd(keys.failed, {job_id: ts})
            pipe.hset(job_key, mapping={"failedReason": STALLED_REASON, "finishedOn": ts})
            result.failed.append(job_id)
        else:
            pipe.lpush(keys.wait, job_id)
            result.moved.append(job_id)
        pipe.hset(job_key, "atm", attempts)

    def _snapshot(self, result: SweepResult) -> list[str]:
        """LRANGE active: the loop works from this copy, which is where its gaps come from."""
        reply = self._timed(result, self.queue.client.lrange, self.queue.keys.active, 0, -1)
        return [_text(i) for i in reply]

    def _sweep(self, result: SweepResult) -> None:
        client, keys = self.queue.client, self.queue.keys
        for job_id in self._snapshot(result):
            if self._timed(result, client.exists, keys.lock(job_id)):
                continue
            fields = self._timed(result, client.hgetall, keys.job(job_id))
            attempts = int(fields.get(b"atm", fields.get("atm", 0)) or 0) + 1
            self.act_delay()
            # LREM alone (its result unchecked), then the push and HSET atm pipelined.
            self._timed(result, client.lrem, keys.active, 1, job_id)
            pipe = client.pipeline(transaction=False)
            self._recover(pipe, job_id, attempts, result)
            self._timed(result, pipe.execute)


class AppSidePipelinedSweeper(AppSideSweeper):
    """The same loop with its commands batched: every EXISTS in one pipeline, the lockless
    ids' attempt counts in one more, every recovery in one more (chunked). Same gaps."""

    name = "app_side_pipelined"

    def _chunked(
        self, result: SweepResult, ids: list[str], queue_one: Callable[[Any, str], None]
    ) -> list[Any]:
        replies: list[Any] = []
        for start in range(0, len(ids), PIPELINE_CHUNK):
            pipe = self.queue.client.pipeline(transaction=False)
            for job_id in ids[start : start + PIPELINE_CHUNK]:
                queue_one(pipe, job_id)
            replies.extend(self._timed(result, pipe.execute))
        return replies

    def _sweep(self, result: SweepResult) -> None:
        keys = self.queue.keys
        active = self._snapshot(result)
        exists = self._chunked(result, active, lambda p, j: p.exists(keys.lock(j)))
        lockless = [j for j, e in zip(active, exists, strict=True) if not e]
        atms = self._chunked(result, lockless, lambda p, j: p.hget(keys.job(j), "atm"))
        self.act_delay()
        attempts = {j: int(a or 0) + 1 for j, a in zip(lockless, atms, strict=True)}

        def recover(pipe: Any, job_id: str) -> None:
            pipe.lrem(keys.active, 1, job_id)
            self._recover(pipe, job_id, attempts[job_id], result)

        self._chunked(result, lockless, recover)


def ensure_script(queue: Queue, file_name: str) -> None:
    """Register and load a lua/ script on the queue's client when Queue.open was
    not given it, so a sweeper works on any queue and no timed call pays a load."""
    if file_name in SCRIPT_FILES.values() or file_name in queue.scripts.extra:
        return
    script = queue.client.register_script(script_source(file_name))
    queue.client.script_load(script.script)
    queue.scripts.extra[file_name] = script


class AtomicLinearSweeper(AtomicSweeper):
    """The same contract in one pass over active, whatever share of it stalled."""

    name = "atomic_linear"
    script_file = "moveStalledJobsToWaitLinear-8.lua"
    protocol_step = False


# Ids of active one sliced call visits at most, unless told otherwise.
DEFAULT_SLICE = 100
# Redis time after which a sliced call takes no further chunk of ids (µs; 0 = none). At a
# million all-stalled ids a 100-id call took 1.0-1.1 ms inside Redis, and about one in 500
# over 2 ms, on the CPU, with no page fault (experiments/sliced_call_faults.py); a Lua loop of
# arithmetic alone is as uneven on the suite's VM (experiments/spin_calls.py). With this
# budget the median call was 0.36 ms and the 99.9th percentile 0.86 ms.
DEFAULT_SLICE_BUDGET_US = 250
# Keys the sliced script keeps while a pass is spread over calls (after the prefix).
SLICED_PASS_KEYS = ("stalled-prev", "stalled-pass")


class AtomicSlicedSweeper(AtomicSweeper):
    """The same contract with a bounded hold: each EVALSHA visits at most ``slice_size`` ids
    of active, until the pass is done (a reply of two elements); what it gives up is in the
    script's header. A protocol with ``sliced_sweep_own`` (echomq-deadline) is called instead."""

    name = "atomic_sliced"
    script_file = "moveStalledJobsToWaitSliced-8.lua"
    protocol_step = False

    def __init__(
        self,
        queue: Queue,
        max_stalled: int = 1,
        check_interval_ms: int = 0,
        slice_size: int = DEFAULT_SLICE,
        clear_throttle: bool = True,
        budget_us: int = DEFAULT_SLICE_BUDGET_US,
    ) -> None:
        self.protocol_step = queue.protocol.sliced_sweep_own
        super().__init__(queue, max_stalled, check_interval_ms, clear_throttle)
        self.slice_size = slice_size
        self.budget_us = budget_us
        self.extra_args = (slice_size, budget_us)

    def _build(self, extra_args: tuple[Any, ...] = ()) -> ScriptCall:
        if not self.protocol_step:
            return super()._build(extra_args)
        return self.queue.protocol.sliced_sweep(
            self.queue.keys,
            max_stalled=self.max_stalled,
            now_ms=self.queue.clock(),
            interval_ms=self.check_interval_ms,
            cut=SweepSlice(self.slice_size, self.budget_us),
        )

    def _goes_on(self, reply: Any) -> bool:
        return len(reply) >= 3  # two elements: the pass is done (or throttled)


_ALL = (AtomicSweeper, AtomicLinearSweeper, AtomicSlicedSweeper, AppSideSweeper, AppSidePipelinedSweeper)
SWEEPERS: dict[str, type[Sweeper]] = {cls.name: cls for cls in _ALL}


def has_gap(variant: str) -> bool:
    """True when the sweep checks and acts in separate round trips (a pause can go between)."""
    return issubclass(sweeper_class(variant), AppSideSweeper)


def is_sliced(variant: str) -> bool:
    """True when the sweep's pass is spread over calls of a bounded slice."""
    return issubclass(sweeper_class(variant), AtomicSlicedSweeper)


def variants_of(protocol: str, variants: Sequence[str]) -> tuple[str, ...]:
    """The variants that are sweeps of ``protocol`` (BullMQ has one: its own atomic sweep)."""
    proto = protocol_named(protocol)
    return tuple(v for v in variants if proto.supports_sweep(v))


def sweeper_class(variant: str) -> type[Sweeper]:
    if variant not in SWEEPERS:
        raise BenchError(f"unknown sweep variant {variant!r}; use one of {', '.join(SWEEPERS)}")
    return SWEEPERS[variant]


def make_sweeper(
    variant: str,
    queue: Queue,
    *,
    max_stalled: int = 1,
    act_delay_ms: float = 0.0,
    slice_size: int = DEFAULT_SLICE,
    clear_throttle: bool = True,
    budget_us: int = DEFAULT_SLICE_BUDGET_US,
) -> Sweeper:
    """A sweeper of ``variant`` on ``queue``, given those of the options that apply to it (a
    variant ignores the others); a variant not of the queue's protocol is a one-line error."""
    factory = sweeper_class(variant)
    protocol = queue.protocol
    if not protocol.supports_sweep(variant):
        raise BenchError(
            f"sweep variant {variant!r} is not a {protocol.name} sweep; "
            f"{protocol.name} has {', '.join(protocol.sweep_variants or ())}"
        )
    if issubclass(factory, AppSideSweeper) and act_delay_ms > 0:
        pause_s = act_delay_ms / 1000.0
        return factory(queue, max_stalled, act_delay=lambda: time.sleep(pause_s))
    if issubclass(factory, AtomicSlicedSweeper):
        return factory(
            queue, max_stalled, slice_size=slice_size, clear_throttle=clear_throttle, budget_us=budget_us
        )
    if issubclass(factory, AtomicSweeper):
        return factory(queue, max_stalled, clear_throttle=clear_throttle)
    return factory(queue, max_stalled)
