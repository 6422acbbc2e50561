"""A machine calibration at the start of a run, in well under two seconds (docs/method.md).

Three figures that do not depend on the queue: when a run's numbers differ from another's and its
calibration differs the same way, the machine (or the moment) changed, not the code. Each is the
fastest of a few rounds: a burst of steal in one round moved a single batch's evalsha_us x2.9
between two runs a minute apart whose jobs/s moved x0.83. They never widen compare's thresholds
(those are learnt from A/A pairs). Statistics are read, never reset: CONFIG RESETSTAT would disturb
a user's server and any other reader.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import redis
from redis.cluster import RedisCluster

from bench.protocol.commandstats import CommandStats
from bench.results.meta import CalibrationMeta

LOOP_ITERATIONS = 200_000
LOOP_ROUNDS = 5
PINGS = 500
EVALSHAS = 500
ROUNDS = 5  # the pings and the EVALSHAs, each split in this many rounds
RETURN_ONE = "return 1"


@dataclass(frozen=True)
class Calibration:
    python_loop_ns: float
    ping_p50_us: float
    evalsha_us: float | None  # None when the server's commandstats do not count EVALSHA
    took_s: float

    def as_meta(self) -> CalibrationMeta:
        evalsha = None if self.evalsha_us is None else round(self.evalsha_us, 3)
        loop, ping, took = (round(v, 3) for v in (self.python_loop_ns, self.ping_p50_us, self.took_s))
        return CalibrationMeta(python_loop_ns=loop, ping_p50_us=ping, evalsha_us=evalsha, took_s=took)


def python_loop_ns() -> float:
    """ns per iteration of a fixed loop of integer arithmetic (the client's CPU: Locust users and
    load generators are Python); the fastest round is the machine's speed, the slower measured what
    else ran."""
    best = float("inf")
    for _ in range(LOOP_ROUNDS):
        total = 0
        start = time.perf_counter_ns()
        for i in range(LOOP_ITERATIONS):
            total += i * i % 7
        best = min(best, time.perf_counter_ns() - start)
    return best / LOOP_ITERATIONS


def ping_p50_us(client: redis.Redis | RedisCluster) -> float:
    """The PING round trip at one connection (client, kernel and server: the floor of every call),
    the fastest round's median."""
    client.ping()  # the connection is made before the first timed call
    medians = []
    for _ in range(ROUNDS):
        times = []
        for _ in range(max(1, PINGS // ROUNDS)):
            start = time.perf_counter_ns()
            client.ping()
            times.append(time.perf_counter_ns() - start)
        medians.append(statistics.median(times))
    return min(medians) / 1000


def evalsha_us(client: redis.Redis | RedisCluster) -> float | None:
    """Redis's µs per EVALSHA of ``return 1`` (the server's CPU and its Lua entry cost), from the
    commandstats delta of our calls: the fastest round's."""
    sha = str(client.script_load(RETURN_ONE))
    client.evalsha(sha, 0)  # loaded and run once, outside the delta
    rounds = []
    for _ in range(ROUNDS):
        before = CommandStats.read(client)
        for _ in range(max(1, EVALSHAS // ROUNDS)):
            client.evalsha(sha, 0)
        delta = CommandStats.read(client).since(before)
        counted = delta.calls.get("evalsha", 0)
        if counted <= 0:
            return None
        rounds.append(delta.usec.get("evalsha", 0) / counted)
    return min(rounds)


def calibrate(client: redis.Redis | RedisCluster) -> Calibration:
    """All three figures, on the given client's connection."""
    start = time.perf_counter()  # the arguments run in order, the time taken last
    return Calibration(python_loop_ns(), ping_p50_us(client), evalsha_us(client), time.perf_counter() - start)
