"""How the suite connects to Redis: settings, no silent re-sends, round-trip counting."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.retry import Retry

from bench.errors import BenchError


def redact_url(url: str) -> str:
    """The URL with any password replaced by ***, safe to print or record."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


@dataclass(frozen=True)
class RedisSettings:
    """Where and how to connect. ``socket_timeout_s`` bounds every read; it never triggers a re-send."""

    url: str = "redis://127.0.0.1:6379/0"
    socket_timeout_s: float = 30.0
    connect_timeout_s: float = 5.0

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> RedisSettings:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise BenchError(
                f"REDIS_URL scheme {parts.scheme!r} is not supported; use redis://, rediss:// or unix://"
            )
        try:
            _ = parts.port
        except ValueError:
            raise BenchError(
                f"REDIS_URL {redact_url(url)!r} has a bad port; use redis://host:port/db"
            ) from None
        return replace(cls(url=url), **overrides)

    @property
    def where(self) -> str:
        """host:port (or the socket path), never the password."""
        parts = urlsplit(self.url)
        if parts.scheme == "unix":
            return parts.path
        return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"

    def connect(self) -> CountingRedis:
        """A client on its own connection pool that never re-sends a command.

        redis-py retries a failed or timed-out command by default. A script such
        as moveToFinished or the sweep is not idempotent: a re-send could apply
        it twice, or pile a second long sweep behind a first one. So retries are
        off, and a timeout surfaces as redis.TimeoutError for the caller to count.
        """
        client = CountingRedis.from_url(
            self.url,
            socket_timeout=self.socket_timeout_s,
            socket_connect_timeout=self.connect_timeout_s,
            retry=Retry(NoBackoff(), 0),
            retry_on_error=[],
            health_check_interval=0,
        )
        assert isinstance(client, CountingRedis)  # from_url builds cls
        return client


class CountingRedis(redis.Redis):
    """A redis-py client that counts its round trips.

    One request/response exchange counts one: a command, each step of
    redis-py's NOSCRIPT recovery (EVALSHA, SCRIPT LOAD, EVALSHA), and a whole
    pipeline. Connection set-up (HELLO, AUTH, CLIENT SETINFO) is not counted:
    it happens once per connection, outside the measured loop.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_trips = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.round_trips += 1
        return super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = False, shard_hint: Any = None) -> CountingPipeline:
        return CountingPipeline(self, transaction, shard_hint)


class CountingPipeline(Pipeline):
    """A pipeline that adds one round trip to its client per non-empty execute."""

    def __init__(self, owner: CountingRedis, transaction: bool, shard_hint: Any) -> None:
        super().__init__(owner.connection_pool, owner.response_callbacks, transaction, shard_hint)
        self._owner = owner

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        if len(self.command_stack) > 0:
            self._owner.round_trips += 1
        return super().execute(raise_on_error)
