"""What the sliced diagnoses share: a queue of N active jobs on an embedded server, the script
calls SLOWLOG logged in call order, and one atomic_sliced pass timed at the client (the sweeper's
longest call) and inside Redis (SLOWLOG's script calls over the server's 1 ms threshold)."""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from bench.harness.experiment import Experiment, experiment_run
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import Client, CountingRedis, RedisSettings
from bench.protocol.queue import Queue
from bench.protocol.sweep import Sweeper
from bench.stages.sweep.scenario import ScenarioQueue


@contextmanager
def scenario_queue(size: int, exp: Experiment) -> Iterator[tuple[CountingRedis, Queue, ScenarioQueue]]:
    """A fresh embedded server holding one echomq queue of ``size`` active jobs, marked; the
    experiment's meta.json records the server."""
    with EmbeddedRedis() as server:
        # one node, not the cluster union: Lua's GC and SLOWLOG are a server's own
        client = RedisSettings.from_url(server.url).connect_single()
        exp.record_server(client)
        queue = Queue.open(client, "exp", protocol="echomq")
        yield client, queue, ScenarioQueue(queue, []).grow(size)


@contextmanager
def sliced_experiment(name: str) -> Iterator[tuple[Experiment, CountingRedis, Queue, ScenarioQueue]]:
    """The experiment ``name`` as a run (bench.harness.experiment), on a queue of as many active
    jobs as its first argument says."""
    with experiment_run(name, sys.argv[1:]) as exp, scenario_queue(int(exp.args[0]), exp) as queue:
        yield (exp, *queue)


def logged_script_calls(client: Client, most: int) -> list[int]:
    """The durations (µs) of the script calls SLOWLOG holds, oldest first."""
    entries = [e for e in client.slowlog_get(most) if e["command"].startswith(b"EVALSHA")]
    return [e["duration"] for e in sorted(entries, key=lambda e: e["id"])]


@dataclass(frozen=True)
class PassTimes:
    """One sliced pass's longest call at the client, and its calls SLOWLOG logged (over 1 ms)."""

    client_max_ms: float
    slow_calls: int
    slow_max_ms: float

    def text(self) -> str:
        return (
            f"client max {self.client_max_ms:.2f} ms, "
            f"SLOWLOG EVALSHA over 1 ms: {self.slow_calls}, max {self.slow_max_ms:.2f} ms"
        )


def sliced_pass(client: Client, sweeper: Sweeper) -> PassTimes:
    """Run one pass; what it took."""
    client.slowlog_reset()
    result = sweeper.sweep()
    evals = logged_script_calls(client, 10000)
    return PassTimes(round(result.longest_call_s * 1e3, 3), len(evals), max(evals, default=0) / 1e3)
