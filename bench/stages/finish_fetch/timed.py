"""The timed path: every exchange a producer or a worker slot asks for, timed in µs and recorded,
the same way in Locust and the raw loops (Locust adds only its ``on_call``). No Locust or gevent import here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis

from bench.harness.children import prctl
from bench.protocol.autopipe import AutoPipeline, Flush
from bench.protocol.queue import FINISH_LABELS, Call, Queue, Sender, now_us
from bench.stages.finish_fetch.loadstats import ERROR_PREFIX, FOLLOWED_PREFIX, error_kind


class Meter(Protocol):
    """Where measurements go: a Recorder (loadstats.py), which keeps only the measured window."""

    def record(self, metric: str, value_us: float, count: int = 1) -> None: ...

    def count(self, name: str, amount: int = 1) -> None: ...


# (the calls, the exchange's name, seconds it took, its failure or None): Locust fires its event
OnCall = Callable[[Sequence[Call], str, float, BaseException | None], None]


def count_error(meter: Meter, exc: BaseException) -> None:
    """One failed step, by kind (the summary's errors_by_kind)."""
    meter.count("errors")
    meter.count(ERROR_PREFIX + error_kind(exc))


def flush_counter(meter: Meter, role: str) -> Callable[[Flush], None]:
    """An AutoPipeline's on_flush: round trips and commands on the wire, the simulated wait."""
    trips, commands, scripts = f"{role}_round_trips", f"{role}_commands", f"{role}_script_calls"

    def counted(flush: Flush) -> None:
        meter.count(trips)
        meter.count(commands, flush.calls)
        meter.count(scripts, flush.script_calls)
        if flush.slept_us:
            meter.count("rtt_slept_us", flush.slept_us)
            meter.count("rtt_sleeps")
        if flush.noscript:  # refused, then sent again: counted as failed calls, as a reload is worth seeing
            meter.count("errors", flush.noscript)
            meter.count(ERROR_PREFIX + "noscript", flush.noscript)
        for kind, count in (("moved", flush.moved), ("ask", flush.asked), ("tryagain", flush.tryagain)):
            if count:  # a cluster slot moving: followed, not failed
                meter.count(FOLLOWED_PREFIX + kind, count)

    return counted


class TimedSender:
    """A Sender that times each exchange it is asked for, from the call to its reply: the wait
    for a flush of the shared connection included, as a job in flight sees it.

    One a slot (or producer): ``finished_us`` is when the exchange that finished this
    slot's last job came back, for end-to-end latency.
    """

    def __init__(self, inner: Sender, meter: Meter, on_call: OnCall | None = None) -> None:
        self.inner = inner
        self.meter = meter
        self.on_call = on_call
        self.finished_us = 0

    def send(self, calls: Sequence[Call], label: str = "") -> list[Any]:
        started = time.perf_counter()
        try:
            replies = self.inner.send(calls, label)
        except Exception as exc:  # not GreenletExit: a user stopped mid-call failed no call
            self._done(calls, label, started, exc)
            raise
        self._done(calls, label, started, next((r for r in replies if isinstance(r, Exception)), None))
        return replies

    def _done(self, calls: Sequence[Call], label: str, started: float, error: Exception | None) -> None:
        elapsed = time.perf_counter() - started
        if error is None:
            self.meter.record(f"call:{label}", elapsed * 1e6)
            if label in FINISH_LABELS:
                self.finished_us = now_us()
        if self.on_call is not None:
            self.on_call(calls, label, elapsed, error)


RECONNECT_BACKOFF_S = 0.05  # after a connection error a loop pauses this long (a refused connect is instant)


PR_SET_TIMERSLACK = 29
TIMER_SLACK_NS = 1


def tight_timer_slack() -> None:
    """This thread's sleeps end at their deadline: Linux lets a sleep run up to 50 µs late by
    default (its timer slack), 5% of a simulated 1 ms round trip (on this suite's VM a 1 ms
    time.sleep took 1.134 ms with it, 1.076 ms without). Elsewhere, nothing changes."""
    prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS)


def run_steps(
    step: Callable[[], None],
    meter: Meter,
    stopping: Callable[[], bool],
    on_error: Callable[[BaseException], None] | None = None,
) -> None:
    """Call ``step`` until ``stopping()``; a failed step is counted by kind and the loop goes on.
    (Under gevent the yields happen before each exchange: AutoPipeline's pause, not here.)

    Nothing is re-sent: a step that failed starts over (a job whose finish failed stays
    active, as a crashed worker's would, and the audit counts it there)."""
    tight_timer_slack()
    while not stopping():
        try:
            step()
        except Exception as exc:
            count_error(meter, exc)
            if on_error is not None:
                on_error(exc)
            if isinstance(exc, redis.ConnectionError):
                time.sleep(RECONNECT_BACKOFF_S)  # do not spin (and flood the log) while Redis is away


@dataclass(frozen=True)
class LoadHooks:
    """What Locust plugs into a run's connections (the raw driver plugs in none): ``on_call`` hears
    every exchange, ``pause`` runs before each one on the wire, ``sleep`` makes each connection's
    sleep (a timerfd's, in_locust/sleep.py), ``overdue`` runs between a round's jobs."""

    on_call: OnCall | None = None
    pause: Callable[[bool], None] | None = None
    sleep: Callable[[], Callable[[float], None]] | None = None
    overdue: Callable[[], None] | None = None

    def pipe(self, queue: Queue, rtt_ms: float, meter: Meter, role: str) -> AutoPipeline:
        """A connection of ``role`` (producer or worker): the simulated rtt, its exchanges counted."""
        sleep = self.sleep() if self.sleep is not None else None
        counter = flush_counter(meter, role)
        return AutoPipeline(queue, rtt_ms / 1000.0, sleep=sleep, pause=self.pause, on_flush=counter)

    def timer(self, inner: Sender, meter: Meter) -> TimedSender:
        return TimedSender(inner, meter, self.on_call)


NO_HOOKS = LoadHooks()
