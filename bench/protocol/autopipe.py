"""One connection shared by many jobs in flight, auto-pipelined as a Node BullMQ worker's is.

Callers (threads, or greenlets where gevent has patched ``threading``) call
``send`` at any time. With no exchange on the wire, the caller sends at once.
While one is in flight, the calls issued meanwhile wait, and all go out
together in the next exchange, in the order issued. So a flush carries
several jobs' calls and round trips per job fall below one, while each call
is still exactly one command.

The caller whose flush it is does the sending (there is no sender thread):
the first caller, and after each flush the first of the calls that waited.
A lone caller therefore pays no hand-over at all. After an exchange whose
replies woke other callers, the next sender first yields once, so the calls
those callers issue on their replies join its exchange, as a Node worker's
reply callbacks all run before its auto-pipeline flushes.

Only the standard library's ``threading`` here: inside Locust gevent has
patched it, so the locks are cooperative and a flush in flight lets the
other greenlets run and queue their calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from bench.protocol.connection import node_client, write_and_read
from bench.protocol.queue import Call, Command, Queue
from bench.protocol.redirects import ask, learn_moved, redirected, retry_tryagain

REDIRECT_ROUNDS = 5  # MOVED, ASK and TRYAGAIN followed this many times over for one flush
REFUSED_ELSEWHERE = (MovedError, AskError, TryAgainError)  # a cluster's slot moving (redirects.py)


@dataclass(frozen=True)
class Flush:
    """One exchange on the wire, as the connection reports it after the reply came back."""

    calls: int  # commands it carried (script calls and plain commands)
    script_calls: int  # of which EVALSHA of the queue's scripts
    slept_us: int  # the simulated network's wait (rtt), 0 without one
    noscript: int = 0  # calls Redis refused with NOSCRIPT (they had not run: sent again after SCRIPT LOAD)
    resent: bool = False  # this exchange is such a second sending
    # a cluster's slot moving (redirects.py): calls answered MOVED, ASK or TRYAGAIN, followed
    moved: int = 0
    asked: int = 0
    tryagain: int = 0


class _Ticket:
    """One caller's calls: their replies, or the exchange's failure, once the flush is back."""

    __slots__ = ("calls", "done", "error", "replies", "wake")

    def __init__(self, calls: Sequence[Call]) -> None:
        self.calls = calls
        self.replies: list[Any] = []
        self.error: BaseException | None = None
        self.done = False
        self.wake: Any = None  # a held lock, released to wake a caller that waits

    def result(self) -> list[Any]:
        if self.error is not None:
            raise self.error
        return self.replies


class AutoPipeline:
    """A Sender over one connection (the queue's client) that pipelines calls issued meanwhile.

    ``rtt_s`` simulates the network: each exchange waits that long once, whatever
    it carries, as a real round trip would. ``sleep`` is how it waits (default
    time.sleep, looked up when called: cooperative once gevent has patched it).
    ``pause(woken)`` runs before every exchange, ``woken`` telling whether the last
    one's replies woke other callers; it must yield then, so their next calls join
    (default: time.sleep(0) when woken; Locust's also lets its event loop poll).
    ``on_flush`` hears of every exchange.
    """

    def __init__(
        self,
        queue: Queue,
        rtt_s: float = 0.0,
        *,
        sleep: Callable[[float], None] | None = None,
        pause: Callable[[bool], None] | None = None,
        on_flush: Callable[[Flush], None] | None = None,
    ) -> None:
        self.queue = queue
        self.rtt_s = rtt_s
        self._sleep = sleep
        self._pause = pause
        self._on_flush = on_flush
        self._lock = threading.Lock()
        self._waiting: list[_Ticket] = []
        self._busy = False  # an exchange is on the wire, or its sender is about to send
        self._held: Any = None  # the pool's connection this pipeline keeps for its exchanges
        self._held_pool: Any = None  # ... and its pool (a slot moved: no longer the queue's)
        self._woken = False  # the last exchange woke callers other than its sender
        self.flushes = 0
        self.calls = 0
        self._shas: dict[str, str] = {}

    def sleep(self, seconds: float) -> None:
        """Sleep as this connection's simulated network does (its caller's greenlet or thread)."""
        (self._sleep or time.sleep)(seconds)

    @property
    def waiting(self) -> int:
        """Callers whose calls wait for the next exchange."""
        with self._lock:
            return len(self._waiting)

    def send(self, calls: Sequence[Call], label: str = "") -> list[Any]:
        ticket = _Ticket(calls)
        with self._lock:
            self._waiting.append(ticket)
            lead = not self._busy
            if lead:
                self._busy = True
            else:
                ticket.wake = threading.Lock()
                ticket.wake.acquire()
        if not lead:
            ticket.wake.acquire()  # released when its flush is back, or when it is its turn to send
            if ticket.done:
                return ticket.result()
        self._lead(ticket)
        return ticket.result()

    def _lead(self, own: _Ticket) -> None:
        """Send everything waiting (``own`` among it) in one exchange; hand over to the next."""
        # When the last exchange's replies woke other callers, let them run and issue their next
        # calls first, so those go in this exchange (a Node worker's reply callbacks all run
        # before its auto-pipeline flushes). time.sleep(0) yields: to the woken greenlets under
        # gevent, the interpreter to the woken threads otherwise.
        woken, self._woken = self._woken, False
        if self._pause is not None:
            self._pause(woken)
        elif woken:
            (self._sleep or time.sleep)(0)
        with self._lock:
            batch, self._waiting = self._waiting, []
        try:
            self._flush(batch)
        except BaseException as exc:  # the exchange failed: every call in it failed, none is re-sent
            for ticket in batch:
                ticket.error = exc
        finally:
            with self._lock:
                following = self._waiting[0] if self._waiting else None
                if following is None:
                    self._busy = False
            for ticket in batch:
                ticket.done = True
                if ticket is not own:
                    ticket.wake.release()
                    self._woken = True
            if following is not None:
                following.wake.release()  # its turn to send what waited meanwhile

    def _flush(self, batch: list[_Ticket]) -> None:
        calls = [call for ticket in batch for call in ticket.calls]
        replies = self._exchange(calls, resent=False)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            # SCRIPT FLUSH (or a restart) dropped the scripts: those calls did not run, so,
            # as redis-py's Script does, load them again and send those calls once more.
            self.queue.scripts.load(self.queue.client)
            again = self._exchange([calls[i] for i in missing], resent=True)
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        self._follow(calls, replies)
        at = 0
        for ticket in batch:
            ticket.replies = replies[at : at + len(ticket.calls)]
            at += len(ticket.calls)

    def _follow(self, calls: list[Call], replies: list[Any]) -> None:
        """A cluster's slot moving: each call refused elsewhere sent where it now runs. While
        the masters learn the slot's new owner one by one, an answer can send a call back
        (MOVED to the source, then ASK): a few rounds."""
        for _ in range(REDIRECT_ROUNDS):
            if not any(isinstance(r, REFUSED_ELSEWHERE) for r in replies):
                return
            moved = redirected(replies, MovedError)
            if moved:
                learn_moved(self.queue.client, replies[moved[0]])
                self.close()  # the next exchange takes a connection of the slot's new owner
                again = self._exchange([calls[i] for i in moved], resent=True)
                for i, reply in zip(moved, again, strict=True):
                    replies[i] = reply
            for i in redirected(replies, AskError):
                replies[i] = ask(self.queue.client, replies[i], self._command(calls[i]))
            if redirected(replies, TryAgainError):
                retry_tryagain(replies, calls, self._resend, self._sleep or time.sleep)

    def _resend(self, calls: list[Call]) -> list[Any]:
        return self._exchange(calls, resent=True)

    def _exchange(self, calls: list[Call], resent: bool) -> list[Any]:
        """One round trip: the simulated network's wait, then the calls, one reply each."""
        slept_us = 0
        if self.rtt_s > 0:
            before = time.perf_counter()
            (self._sleep or time.sleep)(self.rtt_s)
            slept_us = int((time.perf_counter() - before) * 1e6)
        replies = self._send_now(calls)
        self.flushes += 1
        self.calls += len(calls)
        if self._on_flush is not None:
            scripts = sum(1 for call in calls if not isinstance(call, Command))
            refused = [reply for reply in replies if isinstance(reply, redis.ResponseError)]  # rare
            noscript, moved, asked, tryagain = (
                len(redirected(refused, kind)) for kind in (NoScriptError, *REFUSED_ELSEWHERE)
            )
            self._on_flush(Flush(len(calls), scripts, slept_us, noscript, resent, moved, asked, tryagain))
        return replies

    def _send_now(self, calls: list[Call]) -> list[Any]:
        """Write every call, then read one reply each, on the connection this pipeline holds.

        redis-py's Connection directly, not the client's execute_command: that path asks
        the pool for a connection and polls it for stale data on every command, which
        costs more client CPU than the exchange itself (most under gevent, whose poll is
        Python). Replies come as Redis sent them (no redis-py response callbacks).
        """
        connection = self._connection()
        self.queue.client.round_trips += 1  # one exchange on the wire, however many it carries
        return write_and_read(connection, [self._command(call) for call in calls])

    def _connection(self) -> Any:
        if self._held is None:
            self._held_pool = self._pool()
            self._held = self._held_pool.get_connection()
        return self._held

    def close(self) -> None:
        """Give the held connection back to the pool it came from."""
        if self._held is not None:
            self._held_pool.release(self._held)
            self._held = None

    def _pool(self) -> Any:
        """The pool of the server that holds the queue (on a cluster, its slot's master)."""
        return node_client(self.queue.client, self.queue.keys.tag).connection_pool

    def _command(self, call: Call) -> tuple[Any, ...]:
        return call.args if isinstance(call, Command) else self._evalsha(call)

    def _evalsha(self, call: Any) -> tuple[Any, ...]:
        # a script's SHA is its text's: looked up once (a reload after NOSCRIPT keeps it)
        sha = self._shas.get(call.script)
        if sha is None:
            sha = self._shas[call.script] = self.queue.scripts.by_step(call.script).sha
        return ("EVALSHA", sha, len(call.keys), *call.keys, *call.args)
