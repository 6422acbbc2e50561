"""Locust's custom-client pattern for Redis: the abstract user that holds the client and times it.

Each call is timed with ``perf_counter``, fires ``events.request`` (so Locust's
UI and CSVs work as usual) and is recorded in µs into our own HdrHistograms:
Locust's buckets are too coarse for ~100 µs calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import gevent
import redis
from locust import User, constant

from bench.errors import BenchError
from bench.finish_fetch.current import RECORDER, Current
from bench.finish_fetch.loadstats import ERROR_PREFIX, RunSettings, error_kind
from bench.protocol.connection import CountingRedis
from bench.protocol.queue import Queue

T = TypeVar("T")

RECONNECT_BACKOFF_S = 0.05  # a user pauses this long after a connection error (a refused connect is instant)


class RedisUser(User):
    """One connection a user, every call timed. Concrete users set ``role`` ("producer" or
    "worker") and declare tasks."""

    abstract = True
    wait_time = constant(0)
    role: ClassVar[str] = ""

    client: CountingRedis
    queue: Queue
    load: RunSettings

    def on_start(self) -> None:
        if Current.run is None:
            raise BenchError("the test started before its settings were read")
        self.load = Current.run
        self.client = Current.redis.connect()
        # SCRIPT LOADs before any timed call
        self.queue = Queue.open(self.client, self.load.queue, protocol=self.load.protocol)
        self._rtt_s = self.load.rtt_ms / 1000.0

    def on_stop(self) -> None:
        self.client.close()

    def simulate_rtt(self) -> None:
        """The simulated network: wait ``rtt_ms`` before a round trip (gevent.sleep, so others run)."""
        if self._rtt_s > 0:
            before = time.perf_counter()
            gevent.sleep(self._rtt_s)
            RECORDER.count("rtt_slept_us", int((time.perf_counter() - before) * 1e6))
            RECORDER.count("rtt_sleeps")

    def timed(
        self, request_type: str, name: str, call: Callable[..., T], *args: Any, size: int = 0, **kwargs: Any
    ) -> T:
        """One timed exchange with Redis: simulated RTT, the call, Locust's event and our µs."""
        started = time.perf_counter()
        trips = self.client.round_trips
        exception: Exception | None = None
        try:
            self.simulate_rtt()
            return call(*args, **kwargs)
        except Exception as exc:
            # Counted by kind, and raised: Locust logs it and the task starts over. Never re-sent
            # (the client has no retries): a script that may have run must not run twice.
            exception = exc
            RECORDER.count("errors")
            RECORDER.count(ERROR_PREFIX + error_kind(exc))
            raise
        finally:
            elapsed = time.perf_counter() - started
            RECORDER.count(f"{self.role}_round_trips", self.client.round_trips - trips)
            if exception is None:
                RECORDER.record(f"call:{name}", elapsed * 1e6)
            self.environment.events.request.fire(
                request_type=request_type,
                name=name,
                response_time=elapsed * 1000.0,
                response_length=size,
                exception=exception,
                context={},
            )
            if isinstance(exception, redis.ConnectionError):
                # A refused connect fails at once: do not spin (and flood the log) while Redis is away.
                gevent.sleep(RECONNECT_BACKOFF_S)
