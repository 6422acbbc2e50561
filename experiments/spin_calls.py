"""Are rare 2x-3x long script calls the machine's, not the sweep's? A control with no data at all.

Runs N calls of a Lua loop that does only arithmetic (no key, no allocation), sized to about
the sliced sweep's typical call, and prints their time inside Redis (SLOWLOG, threshold 0.1 ms):
median, 99.9th percentile, max, and how many went over 1 and 2 ms.
Usage: .venv/bin/python experiments/spin_calls.py 20000 [iterations] (diagnosis, not a benchmark)."""

import sys

from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings

SPIN = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1"

calls = int(sys.argv[1])
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 70_000
with EmbeddedRedis() as srv:
    client = RedisSettings.from_url(srv.url).connect()
    sha = client.script_load(SPIN)
    client.config_set("slowlog-max-len", calls + 100)
    client.config_set("slowlog-log-slower-than", 100)
    client.slowlog_reset()
    for _ in range(calls):
        client.evalsha(sha, 0, iterations)
    durations = sorted(
        e["duration"] for e in client.slowlog_get(calls + 100) if e["command"].startswith(b"EVALSHA")
    )
    print(
        f"{len(durations)} of {calls} calls logged; median {durations[len(durations) // 2]} us, "
        f"99.9th {durations[int(len(durations) * 0.999)]} us, max {durations[-1]} us, "
        f"over 1 ms {sum(d > 1000 for d in durations)}, over 2 ms {sum(d > 2000 for d in durations)}"
    )
