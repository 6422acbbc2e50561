"""The probe: another client's view of Redis while a sweep holds it.

A child process on its own connection sends PING at a fixed rate inside a
window the caller opens and closes, and records each reply's latency in an
HdrHistogram (µs). Latency runs from the time the PING was due, not the time
it was sent, so a stall counts for every PING that should have gone out during
it (coordinated omission). A ``BUSY`` reply (a script past Redis's busy
threshold) is counted, as are timeouts and connection errors, and the probe
carries on. The child, not a thread, so the sweeping process's own Python work
never delays a PING.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

import redis
from hdrh.histogram import HdrHistogram

from bench.connection import RedisSettings
from bench.metrics import decode, encode, new_histogram, record_us

PROBE_TIMEOUT_S = 60.0  # a PING waits this long at most (Redis answers BUSY after 5 s)
START_DEADLINE_S = 30.0
_BEGIN, _END, _QUIT = "begin", "end", "quit"


@dataclass
class ProbeWindow:
    """What the probe saw in one window."""

    histogram: HdrHistogram
    busy: int = 0  # BUSY replies
    errors: int = 0  # timeouts, connection errors, other error replies
    sent: int = 0

    def add(self, other: ProbeWindow) -> None:
        self.histogram.add(other.histogram)
        self.busy += other.busy
        self.errors += other.errors
        self.sent += other.sent


def empty_window() -> ProbeWindow:
    return ProbeWindow(new_histogram())


def _ping(client: redis.Redis, window: ProbeWindow) -> bool:
    """One PING; False when the connection should be replaced."""
    try:
        client.ping()
    except redis.ResponseError as exc:
        if str(exc).startswith("BUSY"):
            window.busy += 1
        else:
            window.errors += 1
    except (redis.TimeoutError, redis.ConnectionError, OSError):
        window.errors += 1
        return False
    return True


def _run_window(
    client: redis.Redis, settings: RedisSettings, pipe: Connection, rate_hz: float
) -> ProbeWindow:
    """PING on schedule until told to end, then drain the PINGs due before the end."""
    window = empty_window()
    interval = 1.0 / rate_hz
    start = time.perf_counter()
    pipe.send(_BEGIN)  # the schedule has started
    end_at: float | None = None
    due_index = 0
    while True:
        due = start + due_index * interval
        if end_at is None:
            wait = due - time.perf_counter()
            if pipe.poll(max(0.0, wait)):
                pipe.recv()
                end_at = time.perf_counter()
        if end_at is not None and due > end_at:
            return window
        if not _ping(client, window):
            client.close()
            client = settings.connect()
        record_us(window.histogram, (time.perf_counter() - due) * 1e6)
        window.sent += 1
        due_index += 1


def _probe_main(settings: RedisSettings, rate_hz: float, pipe: Connection) -> None:
    client = settings.connect()
    client.ping()
    pipe.send("ready")
    while True:
        command = pipe.recv()
        if command == _QUIT:
            client.close()
            return
        window = _run_window(client, settings, pipe, rate_hz)
        pipe.send((encode(window.histogram), window.busy, window.errors, window.sent))


class Probe:
    """``with Probe(settings, 500) as probe: probe.begin(); ...; seen = probe.end()``."""

    def __init__(self, settings: RedisSettings, rate_hz: float) -> None:
        self.settings = RedisSettings(settings.url, PROBE_TIMEOUT_S, settings.connect_timeout_s)
        self.rate_hz = rate_hz
        self._pipe: Connection | None = None
        self._process: Any = None  # a multiprocessing Process of the chosen start method

    def start(self) -> Probe:
        # fork: the child needs nothing re-imported, and starts in milliseconds
        method = "fork" if sys.platform == "linux" else "spawn"
        context: Any = multiprocessing.get_context(method)
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_probe_main, args=(self.settings, self.rate_hz, child), daemon=True
        )
        self._process.start()
        child.close()
        self._pipe = parent
        if not parent.poll(START_DEADLINE_S):
            self.close()
            raise RuntimeError(f"the probe did not reach Redis within {START_DEADLINE_S:.0f}s")
        parent.recv()
        return self

    def begin(self) -> None:
        """Open a window; returns once the probe's schedule has started."""
        assert self._pipe is not None, "start the probe first"
        self._pipe.send(_BEGIN)
        self._pipe.recv()

    def end(self) -> ProbeWindow:
        """Close the window: what the probe saw since ``begin``."""
        assert self._pipe is not None, "start the probe first"
        self._pipe.send(_END)
        encoded, busy, errors, sent = self._pipe.recv()
        return ProbeWindow(decode(encoded), busy, errors, sent)

    def close(self) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):  # the child may be gone already
                self._pipe.send(_QUIT)
            self._pipe.close()
            self._pipe = None
        if self._process is not None:
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(timeout=5)
            self._process = None

    def __enter__(self) -> Probe:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
