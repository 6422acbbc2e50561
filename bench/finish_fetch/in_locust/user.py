"""Locust's custom-client pattern for Redis: the abstract user that holds the client and reports it.

A user's loop (producer_loop.py, driver.py) times each exchange in µs
into our own HdrHistograms (Locust's buckets are too coarse for ~100 µs
calls); this user adds Locust's ``events.request`` for each, so Locust's UI
and CSVs work as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import ClassVar

from locust import User, constant

from bench.errors import BenchError, first_line
from bench.finish_fetch.in_locust.current import Current
from bench.finish_fetch.loadstats import RunSettings
from bench.finish_fetch.seats import mark_started, seated
from bench.protocol.connection import Client
from bench.protocol.queue import Call, Command, Queue
from bench.protocol.spread import queue_names

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
    load: RunSettings

    def on_start(self) -> None:
        if Current.run is None:
            raise BenchError("the test started before its settings were read")
        self.load = Current.run
        self.client = Current.redis.connect()
        # SCRIPT LOADs before any timed call
        names = queue_names(self.client, self.load.queue, self.load.queues)
        first = Queue.open(self.client, names[0], protocol=self.load.protocol)
        name = names[0] if self.role == "probe" else seated(first, names, self.role)
        self.queue = first if name == names[0] else Queue.open(self.client, name, protocol=self.load.protocol)
        mark_started(first)  # the warm-up starts once every user is here, not once each is spawned

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
        """A failed step, one line (it is counted by kind in the summary)."""
        log.warning("echomq: %s step failed: %s: %s", self.role, type(exc).__name__, first_line(exc))
