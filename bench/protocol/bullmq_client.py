"""BullMQ's own client, as a BullMQ user runs it: its RedisConnection and its async Scripts.

Unlike the suite's client, BullMQ's connection re-sends a command after a timeout (redis-py's
5 s socket timeout, and ``Retry(ExponentialBackoff(cap=20, base=1), 20)``), so a script that
holds Redis past it is sent again behind the caller's back: the sweep stage's hazard scenario.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from bullmq.redis_connection import RedisConnection
from bullmq.scripts import Scripts
from redis.asyncio.connection import AbstractConnection

from bench.protocol.bullmq import NAMESPACE, STALLED_INTERVAL_MS  # checks the bullmq version
from bench.protocol.keys import QueueKeys


def default_socket_timeout_s() -> float | None:
    """redis-py's own default socket timeout, which BullMQ's connection keeps (5 s in redis-py 8)."""
    default = inspect.signature(AbstractConnection.__init__).parameters["socket_timeout"].default
    return float(default) if isinstance(default, int | float) else None


def connection_url(url: str, socket_timeout_s: float | None) -> str:
    """The URL a BullMQ user passes as ``connection``, with a socket timeout of its own if given
    (redis-py reads ``socket_timeout`` from the query string)."""
    if socket_timeout_s is None:
        return url
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, f"socket_timeout={socket_timeout_s:g}") if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


@dataclass
class SweepCall:
    """What one call of BullMQ's sweep returned to its caller: the ids, or what it raised."""

    reply: list[str] | None
    error: str = ""


def sweep_once(
    url: str, keys: QueueKeys, max_stalled: int, interval_ms: int = STALLED_INTERVAL_MS
) -> SweepCall:
    """One ``Scripts.moveStalledJobsToWait`` through a fresh BullMQ RedisConnection on ``url``,
    exactly as BullMQ's Worker sends it (its retries included), in an event loop of its own."""

    async def call() -> SweepCall:
        connection = RedisConnection(url)
        scripts = Scripts(NAMESPACE, keys.tag, connection)
        try:
            reply = await scripts.moveStalledJobsToWait(max_stalled, interval_ms)
            return SweepCall([str(i) for i in reply or []])
        except Exception as exc:  # what the caller would see: BUSY, a timeout past every retry
            return SweepCall(None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        finally:
            await connection.close()

    return asyncio.run(call())
