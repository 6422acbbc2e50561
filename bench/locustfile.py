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
from importlib.util import find_spec
from pathlib import Path

if find_spec("bench") is None:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent
from gevent.pool import Group
from locust import task

from bench.finish_fetch import hooks
from bench.finish_fetch.current import RECORDER
from bench.finish_fetch.probe import PROBE_LABEL, PROBE_SCRIPT
from bench.finish_fetch.producer_loop import ProducerLoop
from bench.finish_fetch.timed import TimedSender, run_steps
from bench.finish_fetch.user import RedisUser
from bench.finish_fetch.worker_slots import WorkerConnection
from bench.protocol.autopipe import AutoPipeline
from bench.protocol.queue import Command

hooks.install()  # the options, the user counts, the measured window (bench/finish_fetch/)


def _running() -> bool:
    return False  # a user's loop runs until Locust kills its greenlet


_polled = [0]  # the event loop's iteration the last step ended in


def _yield() -> None:
    """After each step: when the event loop has not polled since the last step ended, let it (a
    reply already on the socket is read without a switch, so busy loops could starve Locust's
    own greenlets: timers, messages, stats). gevent.idle, not sleep(0): sleep(0) runs the ready
    greenlets but polls no I/O. A step that waited on I/O needs nothing: the loop ran then."""
    loop = gevent.get_hub().loop
    if loop.iteration == _polled[0]:
        gevent.idle()
    _polled[0] = loop.iteration


class ProducerUser(RedisUser):
    """Adds jobs in pipelined batches: closed loop (keep a backlog), or open loop at target-rate."""

    role = "producer"

    def on_start(self) -> None:
        super().on_start()
        self.loop = ProducerLoop(self.queue, self.load, RECORDER, self.request_event)

    @task
    def add_batches(self) -> None:
        run_steps(self.loop.step, RECORDER, _running, self.log_error, _yield)


class WorkerUser(RedisUser):
    """One worker connection and its jobs in flight: a greenlet a slot, by the run's strategy."""

    role = "worker"

    def on_start(self) -> None:
        super().on_start()
        self.connection = WorkerConnection(self.queue, self.load, RECORDER, self.request_event)
        self.slot_greenlets = Group()

    @task
    def work(self) -> None:
        first, *others = self.connection.slots
        for slot in others:
            self.slot_greenlets.spawn(run_steps, slot.step, RECORDER, _running, self.log_error, _yield)
        run_steps(first.step, RECORDER, _running, self.log_error, _yield)

    def on_stop(self) -> None:
        self.slot_greenlets.kill()
        super().on_stop()


class ProbeUser(RedisUser):
    """The latency-fidelity probe: one trivial EVALSHA at a time on the workers' timed path."""

    role = "probe"

    def on_start(self) -> None:
        super().on_start()
        sha = self.client.script_load(PROBE_SCRIPT)
        self.timer = TimedSender(AutoPipeline(self.queue), RECORDER, self.request_event)
        self.call = [Command(("EVALSHA", sha, 0))]

    @task
    def probe(self) -> None:
        run_steps(self._once, RECORDER, _running, self.log_error, _yield)

    def _once(self) -> None:
        self.timer.send(self.call, PROBE_LABEL)
        RECORDER.count("probe_calls")
