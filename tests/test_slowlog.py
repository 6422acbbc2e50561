"""SLOWLOG read around a span: Redis's own time of its longest script call, against a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bench.harness.server import SLOWLOG_THRESHOLD_US, EmbeddedRedis
from bench.protocol.slowlog import SlowlogWatch

pytestmark = pytest.mark.protocol

SPIN = "for i = 1, tonumber(ARGV[1]) do end return 1"  # a script that holds Redis a while
LONG_SPIN = 3_000_000  # tens of ms in Redis's Lua on any machine: far over a 1 ms threshold


@pytest.fixture(scope="module")
def node() -> Iterator[redis.Redis]:
    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url)
        yield client
        client.close()


@pytest.fixture(autouse=True)
def suite_threshold(node: redis.Redis) -> None:
    node.config_set("slowlog-log-slower-than", SLOWLOG_THRESHOLD_US)
    node.config_set("slowlog-max-len", 128)


def span(node: redis.Redis, *spins: int) -> SlowlogWatch:
    watch = SlowlogWatch(node)
    watch.start()
    sha = node.script_load(SPIN)
    for count in spins:
        node.evalsha(sha, 0, count)
    return watch


def test_the_embedded_server_logs_calls_over_its_threshold(node: redis.Redis):
    assert SlowlogWatch(node).threshold == SLOWLOG_THRESHOLD_US


def test_a_slow_script_call_is_the_longest_and_its_time_is_redis_own(node: redis.Redis):
    got = span(node, 1, LONG_SPIN, 1).stop()
    assert got.longest_us is not None and got.longest_us > SLOWLOG_THRESHOLD_US
    assert got.bound_us() == got.longest_us and not got.overflowed


def test_the_span_counts_its_script_calls_over_the_threshold(node: redis.Redis):
    got = span(node, LONG_SPIN, 1, LONG_SPIN, 1).stop()
    assert got.slow_count() == 2
    assert span(node, 1, 1).stop().slow_count() == 0


def test_no_call_logged_bounds_the_longest_by_the_threshold(node: redis.Redis):
    got = span(node, 1, 1).stop()
    assert got.longest_us is None and got.bound_us() == SLOWLOG_THRESHOLD_US


def test_a_slow_command_outside_a_script_is_not_a_script_call(node: redis.Redis):
    node.delete("numbers")
    for start in range(0, 300_000, 10_000):
        node.rpush("numbers", *range(start, start + 10_000))
    watch = span(node)
    node.sort("numbers", store="sorted")  # logged: a sort of 300,000 is far over 1 ms
    entries_before = node.slowlog_len()
    got = watch.stop()
    assert entries_before > 0 and got.longest_us is None


def test_calls_pushed_out_of_the_log_leave_the_span_unknown(node: redis.Redis):
    node.config_set("slowlog-max-len", 1)
    got = span(node, LONG_SPIN, LONG_SPIN).stop()
    assert got.overflowed and got.bound_us() is None and got.slow_count() is None


def test_a_threshold_too_loose_to_bound_anything_says_nothing(node: redis.Redis):
    node.config_set("slowlog-log-slower-than", 10_000)  # Redis's default
    got = span(node, 1).stop()
    assert got.bound_us() is None and got.slow_count() is None
