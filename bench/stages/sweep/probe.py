"""The probe: another client's view of Redis while a sweep holds it.

A child process (so the sweeper's own Python work never delays it) PINGs on its own connection at
a fixed rate, open-loop: each PING goes out when due, pipelined, a reader thread taking the
replies, so it waits only for what holds Redis. Its latency (µs, an HdrHistogram) runs from when it
was due, so a late probe counts against the result (coordinated omission). BUSY replies, timeouts
and connection errors are counted, and the probe carries on.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection as Pipe
from types import TracebackType
from typing import Any

import redis
from hdrh.histogram import HdrHistogram

from bench.protocol.connection import RedisSettings, node_client
from bench.results.hdr import decode, encode, new_histogram, record_us

DEFAULT_RATE_HZ = 500.0  # PINGs a second, unless the profile says otherwise
PROBE_TIMEOUT_S = 60.0  # a PING waits this long at most (Redis answers BUSY after 5 s)
START_DEADLINE_S = 30.0
_BEGIN, _END, _QUIT = "begin", "end", "quit"


@dataclass
class ProbeWindow:
    histogram: HdrHistogram = field(default_factory=new_histogram)
    busy: int = 0  # BUSY replies
    errors: int = 0  # timeouts, connection errors, other error replies
    sent: int = 0

    def add(self, other: ProbeWindow) -> None:
        self.histogram.add(other.histogram)
        self.busy += other.busy
        self.errors += other.errors
        self.sent += other.sent


class _OpenLoopPinger:
    """Sends PINGs on one connection without waiting; a reader thread takes the replies in order."""

    def __init__(self, settings: RedisSettings, tag: str) -> None:
        self.client = settings.connect()
        # On a cluster, the master that holds the swept queue: the hold is per shard.
        self.node = node_client(self.client, tag)
        self.conn: Any = self.node.connection_pool.get_connection()
        self.conn.connect()
        self.due: collections.deque[float] = collections.deque()  # due times of PINGs in flight
        self.in_flight = threading.Semaphore(0)
        self.window = ProbeWindow()
        self.drained = threading.Condition()
        self.broken = False
        threading.Thread(target=self._read_replies, daemon=True).start()

    def send(self, due: float) -> None:
        if self.broken:
            self.window.errors += 1
            return
        self.due.append(due)
        try:
            self.conn.send_command("PING")
        except (redis.RedisError, OSError):
            self.due.pop()
            self.window.errors += 1
            self.broken = True
            return
        self.window.sent += 1
        self.in_flight.release()

    def _read_replies(self) -> None:
        while True:
            self.in_flight.acquire()
            try:
                self.conn.read_response()
            except redis.ResponseError as exc:
                if str(exc).startswith("BUSY"):
                    self.window.busy += 1
                else:
                    self.window.errors += 1
            except (redis.RedisError, OSError):
                self.window.errors += 1  # and each reply still owed fails the same way
                self.broken = True
            due = self.due.popleft()
            record_us(self.window.histogram, (time.perf_counter() - due) * 1e6)
            with self.drained:
                self.drained.notify_all()

    def finish_window(self) -> ProbeWindow:
        """Wait for every reply owed, then hand the window over (and mend a broken connection)."""
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        with self.drained:
            while self.due and time.monotonic() < deadline:
                self.drained.wait(0.05)
        window, self.window = self.window, ProbeWindow()
        if self.broken and not self.due:  # the reader has failed every PING owed: reconnect
            with contextlib.suppress(redis.RedisError, OSError):
                self.conn.disconnect()
                self.conn.connect()
                self.broken = False
        return window

    def close(self) -> None:
        with contextlib.suppress(redis.RedisError, OSError):
            self.conn.disconnect()
        self.client.close()


def _run_window(pinger: _OpenLoopPinger, pipe: Pipe, rate_hz: float) -> ProbeWindow:
    """PING on schedule until told to end, including those due before the end."""
    interval = 1.0 / rate_hz
    start = time.perf_counter()
    pipe.send(_BEGIN)  # the schedule has started
    due_index = 0
    while True:
        due = start + due_index * interval
        if pipe.poll(max(0.0, due - time.perf_counter())):
            pipe.recv()
            end_at = time.perf_counter()
            while due <= end_at:  # due before the end but not yet sent: the probe was late
                pinger.send(due)
                due_index += 1
                due = start + due_index * interval
            return pinger.finish_window()
        pinger.send(due)
        due_index += 1


def _probe_main(settings: RedisSettings, tag: str, rate_hz: float, pipe: Pipe, sweeper_end: Pipe) -> None:
    # The fork copied the sweeper's end of the pipe: closed here, so the sweeper's death is an
    # EOF, and the probe leaves with it instead of waiting for a command forever.
    sweeper_end.close()
    pinger = _OpenLoopPinger(settings, tag)
    pinger.node.ping()
    pipe.send("ready")
    try:
        while pipe.recv() != _QUIT:
            window = _run_window(pinger, pipe, rate_hz)
            pipe.send((encode(window.histogram), window.busy, window.errors, window.sent))
    except (EOFError, OSError):
        pass  # the sweeping process is gone
    pinger.close()


class Probe:
    """``with Probe(settings, 500) as probe: probe.begin(); ...; seen = probe.end()``."""

    def __init__(self, settings: RedisSettings, rate_hz: float, queue: str = "") -> None:
        self.settings = replace(settings, socket_timeout_s=PROBE_TIMEOUT_S)
        self.rate_hz = rate_hz
        self.tag = f"{{{queue}}}"  # the queue's hash tag: its master, on a cluster
        self._pipe: Pipe | None = None
        self._process: Any = None  # a multiprocessing Process of the chosen start method

    def start(self) -> Probe:
        # fork: the child needs nothing re-imported, and starts in milliseconds
        method = "fork" if sys.platform == "linux" else "spawn"
        context: Any = multiprocessing.get_context(method)
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_probe_main, args=(self.settings, self.tag, self.rate_hz, child, parent), daemon=True
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
