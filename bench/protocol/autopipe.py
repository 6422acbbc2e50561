"""One connection shared by many jobs in flight, auto-pipelined as a Node BullMQ worker's is.

With no exchange on the wire a caller sends at once; while one is in flight, the
calls issued meanwhile wait and all go out together in the next exchange, in
order. So round trips per job fall below one, while each call is still one command.
The caller whose flush it is does the sending (no sender thread): a lone caller
pays no hand-over. Only the standard library's ``threading``: inside Locust gevent
has patched it, so the locks are cooperative.

While an operator moves a queue's slot, the cluster's answers that a call belongs
elsewhere (MOVED, ASK, TRYAGAIN; docs/cluster.md) are followed here: redis-py's
cluster client follows them only on its own command path. None of those calls
ran where it was refused, so sending them again runs each once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from bench.protocol.connection import CountingRedisCluster, node_client, write_and_read
from bench.protocol.queue import Call, Command, Queue

REDIRECT_ROUNDS = 5  # MOVED, ASK and TRYAGAIN followed this many times over for one flush
REFUSED_ELSEWHERE = (MovedError, AskError, TryAgainError)  # a cluster's slot moving
TRYAGAIN_PAUSE_S = 0.02
# A script's keys are moved over several MIGRATE batches: until the last, it is refused. About
# 2 s for the slot's move to end before the call fails (redis-py's own gives up after 0.15 s).
TRYAGAIN_TIMES = 100


@dataclass(frozen=True)
class Flush:
    """One exchange on the wire, reported after the reply came back."""

    calls: int  # commands it carried (script calls and plain commands)
    script_calls: int  # of which EVALSHA of the queue's scripts
    slept_us: int  # the simulated network's wait (rtt), 0 without one
    noscript: int = 0  # calls Redis refused with NOSCRIPT (they had not run: sent again after SCRIPT LOAD)
    resent: bool = False  # this exchange is such a second sending
    # a cluster's slot moving: calls answered MOVED, ASK or TRYAGAIN, followed
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
    ``rtt_s``: each exchange waits that long once, as a round trip would, by ``sleep`` (default
    time.sleep, looked up when called: cooperative under gevent). ``pause(woken)`` runs before
    every exchange and must yield when the last one's replies woke other callers."""

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
        self._shas: dict[str, str] = {}

    def sleep(self, seconds: float) -> None:
        """Sleep as this connection's simulated network does (its caller's greenlet or thread)."""
        (self._sleep or time.sleep)(seconds)

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
        # Callers the last replies woke issue their next calls first, so those join this exchange
        # (as a Node worker's reply callbacks all run before its auto-pipeline flushes).
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
        if missing := [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]:
            # SCRIPT FLUSH (or a restart) dropped the scripts: those calls did not run, so,
            # as redis-py's Script does, load them again and send those calls once more.
            self.queue.scripts.load(self.queue.client)
            self._resend(calls, replies, missing)
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
            if moved := redirected(replies, MovedError):
                if isinstance(self.queue.client, CountingRedisCluster):  # its slot map learns the owner
                    self.queue.client.nodes_manager.move_slot(replies[moved[0]])
                self.close()  # the next exchange takes a connection of the slot's new owner
                self._resend(calls, replies, moved)
            for i in redirected(replies, AskError):
                replies[i] = ask(self.queue.client, replies[i], self._command(calls[i]))
            # TRYAGAIN: a call over keys of the slot, some moved and some not; sent again until it runs
            waiting = redirected(replies, TryAgainError)
            for _ in range(TRYAGAIN_TIMES):
                if not waiting:
                    break
                (self._sleep or time.sleep)(TRYAGAIN_PAUSE_S)
                self._resend(calls, replies, waiting)
                waiting = [i for i in waiting if isinstance(replies[i], TryAgainError)]

    def _resend(self, calls: list[Call], replies: list[Any], indices: list[int]) -> None:
        again = self._exchange([calls[i] for i in indices], resent=True)
        for i, reply in zip(indices, again, strict=True):
            replies[i] = reply

    def _exchange(self, calls: list[Call], resent: bool) -> list[Any]:
        """One round trip: the simulated network's wait, then the calls, one reply each (as Redis
        sent them). On the held connection, not the client's execute_command, whose pool and
        stale-data poll on every command cost more client CPU than the exchange (most under gevent)."""
        slept_us = 0
        if self.rtt_s > 0:
            before = time.perf_counter()
            (self._sleep or time.sleep)(self.rtt_s)
            slept_us = int((time.perf_counter() - before) * 1e6)
        if self._held is None:  # the pool of the queue's server (on a cluster, its slot's master)
            self._held_pool = node_client(self.queue.client, self.queue.keys.tag).connection_pool
            self._held = self._held_pool.get_connection()
        self.queue.client.round_trips += 1  # one exchange on the wire, however many it carries
        replies = write_and_read(self._held, [self._command(call) for call in calls])
        self.flushes += 1
        if self._on_flush is not None:
            scripts = sum(1 for call in calls if not isinstance(call, Command))
            refused = [reply for reply in replies if isinstance(reply, redis.ResponseError)]  # rare
            noscript, moved, asked, tryagain = (
                len(redirected(refused, kind)) for kind in (NoScriptError, *REFUSED_ELSEWHERE)
            )
            self._on_flush(Flush(len(calls), scripts, slept_us, noscript, resent, moved, asked, tryagain))
        return replies

    def close(self) -> None:
        if self._held is not None:
            self._held_pool.release(self._held)
            self._held = None

    def _command(self, call: Call) -> tuple[Any, ...]:
        if isinstance(call, Command):
            return call.args
        # a script's SHA is its text's: looked up once (a reload after NOSCRIPT keeps it)
        if (sha := self._shas.get(call.script)) is None:
            sha = self._shas[call.script] = self.queue.scripts.by_step(call.script).sha
        return ("EVALSHA", sha, len(call.keys), *call.keys, *call.args)


def redirected(replies: Sequence[Any], kind: type[Exception]) -> list[int]:
    return [i for i, reply in enumerate(replies) if isinstance(reply, kind)]


def ask(client: Any, asked: AskError, command: tuple[Any, ...]) -> Any:
    """One command on the importing master, after ASKING: its reply (an error as a value)."""
    if not isinstance(client, CountingRedisCluster):
        return asked
    host, port = asked.node_addr
    if (node := client.nodes_manager.get_node(host=host, port=port)) is None:
        client.nodes_manager.initialize()
        node = client.nodes_manager.get_node(host=host, port=port)
    if node is None:
        return asked
    pool = client.get_redis_connection(node).connection_pool
    connection = pool.get_connection()
    client.round_trips += 1
    try:
        return write_and_read(connection, [("ASKING",), command])[1]
    finally:
        pool.release(connection)
