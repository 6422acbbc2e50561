"""What the echomq-deadline all-stalled sweep spends its Redis time on: the script cut short at one
point at a time, Redis µs (commandstats) per stalled id. Diagnosis, not a benchmark.
Usage: .venv/bin/python experiments/deadline_ablation.py 100000 3"""

import statistics
import sys

from bench.harness.server import EmbeddedRedis
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Queue, now_ms
from bench.protocol.scripts import script_source
from bench.sweep_cost.scenario import BENCH_MAX_STALLED, ScenarioQueue, stalled_share

size = int(sys.argv[1])
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
base = script_source("moveStalledJobsToWaitDeadline-8.lua")
CUTS = {
    "full": [],
    "only ZRANGEBYSCORE, then return": [
        ("if #due == 0 then\n  return {{}, {}}\nend", "if true then\n  return {{}, {}}\nend")
    ],
    "up to the MGET loop, then return": [
        (
            "-- Takes one copy of each of `ids` out of active",
            "do return {{}, {}} end\n-- Takes one copy of each of `ids` out of active",
        )
    ],
    "up to takeOutOfActive, then return": [
        (
            "local inActive = takeOutOfActive(gone)",
            "do return {{}, {}} end\nlocal inActive = takeOutOfActive(gone)",
        )
    ],
    "up to reclaimAll, then return": [
        (
            'local isPaused = redis.call("HGET", k.meta, "paused") == "1"\n'
            "local failed, moved = reclaimAll(k, args, reclaim, isPaused)",
            "do return {{}, {}} end\nlocal isPaused = false\nlocal failed, moved = {}, {}",
        )
    ],
    "no HINCRBY": [('if redis.call("HINCRBY", jobKey, "atm", 1) > maxStalled then', "if false then")],
}
with EmbeddedRedis() as srv:
    client = RedisSettings.from_url(srv.url).connect()
    q = Queue.open(client, "abl", protocol="echomq-deadline")
    sc = ScenarioQueue.build(q, size)
    stalled = stalled_share(sc.ids, "all_stalled")
    shas = {}
    for name, cuts in CUTS.items():
        src = base
        for a, b in cuts:
            assert a in src, (name, a)
            src = src.replace(a, b)
        shas[name] = client.script_load(src)
    call = q.protocol.sweep(q.keys, max_stalled=BENCH_MAX_STALLED, now_ms=now_ms(), interval_ms=0)
    results: dict[str, list[float]] = {n: [] for n in CUTS}
    first = True
    for _ in range(reps):
        for name, sha in shas.items():
            sc.restore(stalled, locks=first)
            first = False
            call = q.protocol.sweep(q.keys, max_stalled=BENCH_MAX_STALLED, now_ms=now_ms(), interval_ms=0)
            before = CommandStats.read(client)
            client.evalsha(sha, len(call.keys), *call.keys, *call.args)
            d = CommandStats.read(client).since(before)
            results[name].append(d.usec.get("evalsha", 0) / size)
    for name, v in results.items():
        print(f"{name:40s} {statistics.median(v):6.2f} µs/id  {[round(x, 2) for x in v]}")
