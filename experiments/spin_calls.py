"""Are rare 2x-3x long script calls the machine's, not the sweep's? A control with no data at all.

Runs N calls of a Lua loop that does only arithmetic (no key, no allocation), sized to about
the sliced sweep's typical call, and prints their time inside Redis (SLOWLOG, threshold 0.1 ms):
median, 99.9th percentile, max, and how many went over 1 and 2 ms; a run folder keeps them.
Usage: .venv/bin/python experiments/spin_calls.py 20000 [iterations] [--quiet-machine]
(diagnosis, not a benchmark)."""

import sys

from bench.harness.experiment import experiment_run
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings

SPIN = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1"

with experiment_run("spin_calls", sys.argv[1:]) as exp, EmbeddedRedis() as srv:
    calls = int(exp.args[0])
    iterations = int(exp.args[1]) if len(exp.args) > 1 else 70_000
    client = RedisSettings.from_url(srv.url).connect()
    exp.record_server(client)
    sha = client.script_load(SPIN)
    client.config_set("slowlog-max-len", calls + 100)
    client.config_set("slowlog-log-slower-than", 100)
    client.slowlog_reset()
    for _ in range(calls):
        client.evalsha(sha, 0, iterations)
    durations = sorted(
        e["duration"] for e in client.slowlog_get(calls + 100) if e["command"].startswith(b"EVALSHA")
    )
    logged = durations or [0]  # none over 0.1 ms: a loop too short to log
    row = {
        "calls": calls,
        "iterations": iterations,
        "logged": len(durations),
        "median_us": logged[len(logged) // 2],
        "p999_us": logged[int(len(logged) * 0.999)],
        "max_us": logged[-1],
        "over_1ms": sum(d > 1000 for d in durations),
        "over_2ms": sum(d > 2000 for d in durations),
    }
    exp.row(**row)
    print(", ".join(f"{key} {value}" for key, value in row.items()))
