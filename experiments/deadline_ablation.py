"""What the echomq-deadline all-stalled sweep spends its Redis time on: the script cut short at one
point at a time, Redis µs (commandstats) per stalled id; a run folder keeps every repetition.
Diagnosis, not a benchmark.
Usage: .venv/bin/python experiments/deadline_ablation.py 100000 3 [--quiet-machine]"""

import statistics
import sys

from bench.harness.experiment import experiment_run
from bench.harness.server import EmbeddedRedis
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Queue, now_ms
from bench.protocol.scripts import script_source
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, ScenarioQueue, stalled_share

base = script_source("moveStalledJobsToWaitDeadline-8.lua")
# Each cut returns early at one point of the one-call path (no limit): the cost up to there.
SETTLE = 'local failed, moved = settle(redis.call("ZRANGEBYSCORE", deadlines, "-inf", now))'
CUTS = {
    "full": [],
    "only ZRANGEBYSCORE, then return": [
        (SETTLE, 'redis.call("ZRANGEBYSCORE", deadlines, "-inf", now)\n  local failed, moved = {}, {}')
    ],
    "up to the lock lookups (SMISMEMBER, MGET), then return": [
        (
            "  -- A lock that exists wins (one PTTL each)",
            "  do return {}, {}, {} end\n  -- A lock that exists wins (one PTTL each)",
        )
    ],
    "up to takeOutOfActive, then return": [
        (
            "  local inActive = takeOutOfActive(gone)",
            "  do return {}, {}, {} end\n  local inActive = takeOutOfActive(gone)",
        )
    ],
    "up to reclaimAll, then return": [
        (
            "  local failed, moved = reclaimAll(k, args, reclaim, isPaused)",
            "  do return {}, {}, {} end\n  local failed, moved = reclaimAll(k, args, reclaim, isPaused)",
        )
    ],
    "no HINCRBY": [('if redis.call("HINCRBY", jobKey, "atm", 1) > maxStalled then', "if false then")],
}
with experiment_run("deadline_ablation", sys.argv[1:]) as exp, EmbeddedRedis() as srv:
    size = int(exp.args[0])
    reps = int(exp.args[1]) if len(exp.args) > 1 else 3
    client = RedisSettings.from_url(srv.url).connect()
    exp.record_server(client)
    q = Queue.open(client, "abl", protocol="echomq-deadline")
    sc = ScenarioQueue(q, []).grow(size)
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
    for rep in range(reps):
        for name, sha in shas.items():
            sc.restore(stalled, locks=first)
            first = False
            call = q.protocol.sweep(q.keys, max_stalled=BENCH_MAX_STALLED, now_ms=now_ms(), interval_ms=0)
            before = CommandStats.read(client)
            client.evalsha(sha, len(call.keys), *call.keys, *call.args)
            d = CommandStats.read(client).since(before)
            results[name].append(d.usec.get("evalsha", 0) / size)
            exp.row(size=size, cut=name, rep=rep + 1, redis_us_per_id=round(results[name][-1], 3))
    for name, v in results.items():
        print(f"{name:40s} {statistics.median(v):6.2f} µs/id  {[round(x, 2) for x in v]}")
