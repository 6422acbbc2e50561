"""Finish-then-fetch under load: `locust -f bench/locustfile.py` (web UI, or --headless).

Producers add jobs in pipelined batches; each worker keeps `concurrency` jobs
in flight on one auto-pipelined connection, holds each `job-ms`, finishes it
and takes the next: `fused` (one moveToFinished with fetch next),
`two_call` (moveToFinished, then moveToActive) or `two_call_pipelined` (the
two back to back in one round trip). Every option of a profile is a Locust
option, so `--config profiles/default.conf` works; the run's single values are
the first of each list, and `--strategy` picks one strategy.

    locust -f bench/locustfile.py --config profiles/smoke.conf --headless --strategy fused

With no --run-time, a headless run measures for warmup-s + measure-s and
stops. The summary (merged µs histograms, round trips, Redis commandstats,
saturation) goes to --summary-json, or <--csv prefix>_summary.json.
"""

from __future__ import annotations

import sys
import time
from importlib.util import find_spec
from pathlib import Path

if find_spec("bench") is None:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent
from locust import task

from bench.protocol.autopipe import AutoPipeline
from bench.protocol.queue import Command
from bench.stages.finish_fetch.fidelity_probe import PROBE_LABEL, PROBE_SCRIPT
from bench.stages.finish_fetch.in_locust import hooks
from bench.stages.finish_fetch.in_locust.current import RECORDER
from bench.stages.finish_fetch.in_locust.sleep import timer_sleep, yield_if_overdue
from bench.stages.finish_fetch.in_locust.user import RedisUser
from bench.stages.finish_fetch.producer_loop import ProducerLoop
from bench.stages.finish_fetch.timed import LoadHooks, TimedSender, run_steps
from bench.stages.finish_fetch.worker_loop import WorkerLoop

hooks.install()  # the options, the user counts, the measured window (bench/stages/finish_fetch/)


def _running() -> bool:
    return False  # a user's loop runs until Locust kills its greenlet


POLL_AT_LEAST_S = 0.002  # the event loop polls I/O at least this often, however busy the loops


class _Polled:
    """When the event loop last polled I/O (its iteration count moves each time it does)."""

    iteration = -1
    at = 0.0


def _pause(woken: bool) -> None:
    """Before each exchange of a user's connection (AutoPipeline's pause).

    A reply already on the socket is read without a switch to the event loop, so busy loops
    could keep it from polling I/O and starve Locust's own greenlets (timers, messages, stats):
    when it has not polled for POLL_AT_LEAST_S, gevent.idle lets it (after every greenlet ready
    to run has run, so slots just woken still join this exchange). Else, when the last
    exchange woke other slots, sleep(0) lets them issue their next calls first.
    """
    loop = gevent.get_hub().loop
    now = time.monotonic()
    if loop.iteration != _Polled.iteration:
        _Polled.iteration, _Polled.at = loop.iteration, now
    if now - _Polled.at >= POLL_AT_LEAST_S:
        gevent.idle()
        _Polled.iteration, _Polled.at = loop.iteration, time.monotonic()
    elif woken:
        gevent.sleep(0)


def _load_hooks(user: RedisUser) -> LoadHooks:
    """Locust's request event hears each of the user's exchanges; _pause runs before each; each
    connection sleeps (rtt, job-ms) on a timerfd of its own, as gevent's 1 ms tick would overpay."""
    return LoadHooks(user.request_event, _pause, timer_sleep, yield_if_overdue)


class ProducerUser(RedisUser):
    """Adds jobs in pipelined batches: closed loop (keep a backlog), or open loop at target-rate."""

    role = "producer"

    def get_ready(self) -> None:
        self.loop = ProducerLoop(self.queue, self.load, RECORDER, _load_hooks(self))
        self.loop.fill()

    @task
    def add_batches(self) -> None:
        run_steps(self.loop.step, RECORDER, _running, self.log_error)


class WorkerUser(RedisUser):
    """One worker connection and its jobs in flight, driven in rounds by this user's one greenlet
    (worker_loop.py), by the run's strategy."""

    role = "worker"

    def on_start(self) -> None:
        super().on_start()
        self.loop = WorkerLoop(self.queue, self.load, RECORDER, _load_hooks(self))

    @task
    def work(self) -> None:
        run_steps(self.loop.step, RECORDER, _running, self.log_error)


class ProbeUser(RedisUser):
    """The latency-fidelity probe: one trivial EVALSHA at a time on the workers' timed path."""

    role = "probe"

    def on_start(self) -> None:
        super().on_start()
        sha = self.client.script_load(PROBE_SCRIPT)
        self.timer = TimedSender(AutoPipeline(self.queue, pause=_pause), RECORDER, self.request_event)
        self.call = [Command(("EVALSHA", sha, 0))]

    @task
    def probe(self) -> None:
        run_steps(self._once, RECORDER, _running, self.log_error)

    def _once(self) -> None:
        self.timer.send(self.call, PROBE_LABEL)
        RECORDER.count("probe_calls")
