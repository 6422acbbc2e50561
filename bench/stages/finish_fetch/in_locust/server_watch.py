"""The Redis watcher: a run stops when its server is lost past a grace period, or restarted.

A restarted server (a new ``run_id``) has, without persistence, lost the run's
data: measuring on would compare figures of two different servers. A dropped
connection or a slow reply is not a loss: the users count those themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent
import redis

from bench.errors import first_line
from bench.protocol.connection import Client, CountingRedisCluster, RedisSettings, primaries

WATCH_INTERVAL_S = 0.25  # how often the server is checked to be there and the same
UNREACHABLE_ABORT_S = 2.0  # Redis unreachable this long stops the run (a dropped connection is not that)


class ServerWatch:
    """Polls INFO server on a connection of its own (never queued behind the controller's)
    and calls ``stop(reason)`` once, when the server is lost or restarted."""

    def __init__(self, settings: RedisSettings, run_id: str | None, stop: Callable[[str], None]) -> None:
        self.settings = settings
        self.run_id = run_id  # the server's at the test's start; learned on the first answer when None
        self._stop = stop

    def run(self) -> None:
        """Watch until the server is lost or restarted (a greenlet: killed when the test stops)."""
        client = self.settings.connect()
        try:
            reason = self._watch(client)
        finally:
            client.close()
        self._stop(reason)

    def _watch(self, client: Client) -> str:
        where = self.settings.where
        down_since: float | None = None
        while True:
            try:
                run_id = str(client.info("server")["run_id"])
            except (redis.BusyLoadingError, redis.TimeoutError, redis.ResponseError):
                down_since = None  # there, only slow or busy
            except redis.ConnectionError as exc:
                now = time.monotonic()
                down_since = down_since if down_since is not None else now
                if now - down_since >= UNREACHABLE_ABORT_S:
                    who = _who(client, where)
                    return f"{who} unreachable for {UNREACHABLE_ABORT_S:g}s: {first_line(exc)}"
            else:
                down_since = None
                if self.run_id is None:
                    self.run_id = run_id
                elif run_id != self.run_id:
                    return (
                        f"Redis at {where} restarted during the run (new run_id): "
                        "without persistence its data is gone"
                    )
            gevent.sleep(WATCH_INTERVAL_S)


def _who(client: Client, where: str) -> str:
    """What is unreachable: the server, or on a cluster the masters that do not answer (the URL's
    node may well be alive: it is another shard that is gone)."""
    if not isinstance(client, CountingRedisCluster):
        return f"Redis at {where}"
    down = []
    for name, node in primaries(client):
        try:
            node.ping()
        except redis.RedisError:
            down.append(name)
    return f"Redis Cluster master {', '.join(down)}" if down else f"Redis Cluster at {where}"
