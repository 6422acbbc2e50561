"""What the machine watch counts as the run's own: a REDIS_URL server on loopback by its pid."""

from __future__ import annotations

import pytest

from bench.harness.server import EmbeddedRedis, ServerInfo
from bench.harness.watch_scope import EMBEDDED, REMOTE, is_loopback, watch_scope
from bench.protocol.connection import RedisSettings


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("redis://127.0.0.1:6379/0", True),
        ("redis://127.0.0.2:6379", True),
        ("redis://localhost", True),
        ("redis://[::1]:6379", True),
        ("unix:///run/redis.sock", True),
        ("rediss://:secret@10.0.0.5:6380/1", False),
        ("redis://cache.example.com:6379", False),
    ],
)
def test_loopback_is_this_machine(url: str, loopback: bool) -> None:
    assert is_loopback(RedisSettings.from_url(url)) is loopback


def user_server(url: str) -> ServerInfo:
    return ServerInfo(url, "REDIS_URL", None, "7.0")


def test_a_loopback_redis_url_adds_the_servers_pid(redis_server: EmbeddedRedis) -> None:
    assert redis_server.process is not None
    scope = watch_scope(RedisSettings.from_url(redis_server.url), user_server(redis_server.url))
    assert scope.extra_pids == (redis_server.process.pid,)
    assert scope.note.startswith("client and the REDIS_URL redis-server")
    assert f"pid {redis_server.process.pid}" in scope.note


def test_a_remote_redis_url_is_watched_on_the_client_side_only() -> None:
    url = "redis://cache.example.com:6379/0"  # never connected to: not on this machine
    scope = watch_scope(RedisSettings.from_url(url), user_server(url))
    assert scope.extra_pids == () and scope.note == REMOTE


def test_an_embedded_server_is_in_the_runs_family_already(redis_server: EmbeddedRedis) -> None:
    server = ServerInfo(redis_server.url, redis_server.source, redis_server.binary, "7.0")
    scope = watch_scope(RedisSettings.from_url(redis_server.url), server)
    assert scope.extra_pids == () and scope.note == EMBEDDED
