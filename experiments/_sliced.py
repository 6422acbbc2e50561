"""What the sliced diagnoses share: a queue of N active jobs on an embedded server, the script
calls SLOWLOG logged in call order, and one atomic_sliced pass timed at the client (the sweeper's
longest call) and inside Redis (SLOWLOG's script calls over the server's 1 ms threshold)."""

from collections.abc import Iterator
from contextlib import contextmanager

from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import Client, CountingRedis, RedisSettings
from bench.protocol.queue import Queue
from bench.protocol.sweep import Sweeper
from bench.sweep_cost.scenario import ScenarioQueue


@contextmanager
def scenario_queue(size: int) -> Iterator[tuple[CountingRedis, Queue, ScenarioQueue]]:
    """A fresh embedded server holding one echomq queue of ``size`` active jobs, marked."""
    with EmbeddedRedis() as server:
        # one node, not the cluster union: Lua's GC and SLOWLOG are a server's own
        client = RedisSettings.from_url(server.url).connect_single()
        queue = Queue.open(client, "exp", protocol="echomq")
        yield client, queue, ScenarioQueue.build(queue, size)


def logged_script_calls(client: Client, most: int) -> list[int]:
    """The durations (µs) of the script calls SLOWLOG holds, oldest first."""
    entries = [e for e in client.slowlog_get(most) if e["command"].startswith(b"EVALSHA")]
    return [e["duration"] for e in sorted(entries, key=lambda e: e["id"])]


def sliced_pass(client: Client, sweeper: Sweeper) -> str:
    """Run one pass; what it took, as the diagnoses print it."""
    client.slowlog_reset()
    result = sweeper.sweep()
    evals = logged_script_calls(client, 10000)
    return (
        f"client max {result.longest_call_s * 1e3:.2f} ms, "
        f"SLOWLOG EVALSHA over 1 ms: {len(evals)}, max {max(evals, default=0) / 1e3:.2f} ms"
    )
