"""Locust's custom-client pattern for Redis: the abstract user that holds the client and reports it.
A user's loop times each exchange in µs into our own HdrHistograms (Locust's buckets are too coarse
for ~100 µs calls); this user adds Locust's ``events.request`` for each, for Locust's UI and CSVs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import ClassVar

import redis
from locust import User, constant

from bench.errors import BenchError, first_line
from bench.protocol.connection import Client
from bench.protocol.queue import Call, Command, Queue
from bench.protocol.refusal import LOADING_WAIT_S, refusal, refusal_line
from bench.protocol.spread import queue_names
from bench.stages.finish_fetch.in_locust.current import REFUSED_MESSAGE, Current
from bench.stages.finish_fetch.seats import mark_started, seated
from bench.stages.finish_fetch.trial_settings import TrialSettings

log = logging.getLogger("echomq")


def request_type(calls: Sequence[Call]) -> str:
    """How Locust's table names an exchange's kind: the command, or PIPELINE for several."""
    if len(calls) != 1:
        return "PIPELINE"
    (call,) = calls
    return str(call.args[0]) if isinstance(call, Command) else "EVALSHA"


class RedisUser(User):
    """One connection a user. Concrete users set ``role`` ("producer", "worker" or "probe") and
    declare tasks."""

    abstract = True
    wait_time = constant(0)
    role: ClassVar[str] = ""

    client: Client
    queue: Queue
    load: TrialSettings

    def on_start(self) -> None:
        if Current.trial is None:
            raise BenchError("the test started before its settings were read")
        self.load = Current.trial
        self.client = Current.redis.connect()
        self.loading_since: float | None = None
        try:
            first = self._open_queue()
            self.get_ready()
        except redis.RedisError as exc:
            self.report_refusal(exc)  # a replica or a user without rights: the run stops, one line
            raise
        mark_started(first)  # the warm-up starts once every user is ready, not once each is spawned

    def _open_queue(self) -> Queue:
        """The user's queue, its scripts loaded before any timed call; the run's first queue."""
        names = queue_names(self.client, self.load.queue, self.load.queues)
        first = Queue.open(self.client, names[0], protocol=self.load.protocol)
        name = names[0] if self.role == "probe" else seated(first, names, self.role)
        self.queue = first if name == names[0] else Queue.open(self.client, name, protocol=self.load.protocol)
        return first

    def get_ready(self) -> None:
        """What the user does before it counts as started (a producer's pre-fill)."""

    def on_stop(self) -> None:
        self.client.close()

    def request_event(
        self, calls: Sequence[Call], label: str, elapsed_s: float, error: BaseException | None
    ) -> None:
        """Locust's event for one exchange (a TimedSender's ``on_call``)."""
        self.environment.events.request.fire(
            request_type=request_type(calls),
            name=label,
            response_time=elapsed_s * 1000.0,
            response_length=len(calls),
            exception=error,
            context={},
        )

    def log_error(self, exc: BaseException) -> None:
        """A failed step, one line (it is counted by kind in the summary); a refusal stops the run."""
        log.warning("echomq: %s step failed: %s: %s", self.role, type(exc).__name__, first_line(exc))
        self.report_refusal(exc)

    def report_refusal(self, exc: BaseException) -> None:
        """A reply every later call gets too (OOM, READONLY, ...): the process that runs the test
        stops it (window.py), once per process. LOADING only once it has lasted LOADING_WAIT_S."""
        found = refusal(exc)
        if found is None or Current.refusal_reported:
            self.loading_since = None
            return
        if found.kind == "loading":
            now = time.monotonic()
            self.loading_since = self.loading_since or now
            if now - self.loading_since < LOADING_WAIT_S:
                return
        Current.refusal_reported = True
        line = refusal_line(found, Current.redis.where, self.client)
        assert self.environment.runner is not None
        self.environment.runner.send_message(REFUSED_MESSAGE, {"line": line, "kind": found.kind})
