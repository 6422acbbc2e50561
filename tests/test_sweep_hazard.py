"""The client-default hazard: BullMQ's sweep, sent by BullMQ's own client past a short socket timeout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from bench.protocol.bullmq_client import connection_url, default_socket_timeout_s
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions
from bench.stages.sweep.hazard import HazardCase, effective_timeout_s, measure, run_hazard
from bench.stages.sweep.probe import Probe
from tests.helpers import wait_until

STALLED = 3000
FILLERS = 10_000  # ids ahead of the stalled ones in active: each LREM from the head passes them
TIMEOUT_S = 0.1


@pytest.fixture
def slow_case(client: Client) -> Iterator[HazardCase]:
    """A sweep made slow on purpose at a small size: 3,000 stalled jobs behind 10,000 other ids,
    so BullMQ's LREM of each stalled id scans them all (about a second on 2 cores)."""
    queue = Queue.open(client, f"hz-{uuid.uuid4().hex[:8]}", protocol="bullmq")
    keys = queue.keys
    ids = Producer(queue).add_batch(STALLED)
    assert len(Worker(queue, options=WorkerOptions(lock_ms=1)).fetch_batch(STALLED)) == STALLED
    wait_until(lambda: not client.exists(*(keys.lock(j) for j in ids[:100])), what="1 ms locks to expire")
    for start in range(0, FILLERS, 5000):
        client.lpush(keys.active, *(f"other-{i}" for i in range(start, start + 5000)))
    snapshot = keys.key("test:active")
    client.copy(keys.active, snapshot)

    def prepare() -> None:  # active as built; only the stalled jobs marked, as a previous sweep left them
        client.delete(keys.wait, keys.stalled_check, keys.stalled)
        client.copy(snapshot, keys.active, replace=True)
        client.sadd(keys.stalled, *ids)

    yield HazardCase(queue, ids, prepare)
    queue.delete()


@pytest.fixture
def busy_threshold(client: Client) -> Iterator[None]:
    """Redis's busy threshold at 50 ms, so other clients get BUSY while the slow sweep runs."""
    name = next(n for n in ("busy-reply-threshold", "lua-time-limit") if client.config_get(n))
    old = client.config_get(name)[name]
    client.config_set(name, 50)
    yield
    client.config_set(name, old)


@pytest.mark.slow
def test_bullmqs_client_sends_a_slow_sweep_again_and_ours_does_not(
    settings: RedisSettings, slow_case: HazardCase, busy_threshold: None
):
    bullmq, suite = run_hazard(settings, slow_case, TIMEOUT_S, probe_rate_hz=200)
    assert (bullmq.client, suite.client) == ("bullmq", "suite")
    for row in (bullmq, suite):
        assert row.protocol == "bullmq" and row.stalled_jobs == STALLED and row.socket_timeout_s == TIMEOUT_S
        assert row.moved_ids == STALLED  # the first execution moved every stalled job
        assert row.probe_busy > 0  # the probe was refused while the sweep held Redis past 50 ms
        assert not row.reply_matches
    # BullMQ's connection timed out and sent the sweep again: the copy either ran after the first
    # and met the throttle key (no ids), or was refused with BUSY while the first still ran.
    assert bullmq.server_executions + bullmq.server_rejected >= 2
    resent_and_throttled = bullmq.reply_ids == 0 and bullmq.server_executions >= 2
    resent_and_refused = bullmq.reply_ids is None and bullmq.server_rejected >= 1 and "BUSY" in bullmq.error
    assert resent_and_throttled or resent_and_refused, bullmq
    assert bullmq.elapsed_s > 2.0  # the first re-send waits 2 s (ExponentialBackoff(cap=20, base=1))
    # Ours timed out once, said so, and never sent it again.
    assert (suite.server_executions, suite.server_rejected, suite.reply_ids) == (1, 0, None)
    assert suite.error.startswith("TimeoutError") and suite.elapsed_s < 2.0


def test_a_sweep_inside_the_timeout_is_one_execution_whose_reply_names_what_moved(
    settings: RedisSettings, slow_case: HazardCase
):
    with Probe(settings, 100) as probe:
        row = measure("bullmq", settings, slow_case, 60.0, probe, bullmq_timeout_s=60.0)
    assert (row.server_executions, row.server_rejected, row.error) == (1, 0, "")
    assert row.reply_ids == row.moved_ids == STALLED and row.reply_matches
    # the machine watched over the call: figures, not "not recorded"
    assert row.foreign_cpu_pct is not None and row.foreign_cpu_pct >= 0
    assert row.steal_pct is not None and row.steal_pct >= 0 and isinstance(row.contended, bool)


def test_bullmqs_connection_keeps_redis_pys_default_timeout_unless_told():
    assert default_socket_timeout_s() == 5.0  # redis-py 8's default, which BullMQ's client keeps
    assert effective_timeout_s(0) == (5.0, None)
    assert effective_timeout_s(0.3) == (0.3, 0.3)
    assert connection_url("redis://h:1/0", None) == "redis://h:1/0"
    assert connection_url("redis://h:1/0", 0.3) == "redis://h:1/0?socket_timeout=0.3"
    assert connection_url("redis://h:1/0?db=2", 2) == "redis://h:1/0?db=2&socket_timeout=2"
