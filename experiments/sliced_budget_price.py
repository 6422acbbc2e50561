"""What the sliced sweep's time budget costs in Redis time: one all-stalled pass, budget off and on.

One queue of N active jobs, all stalled; passes of atomic_sliced (slice 100) with the budget off
(0) and at 250 µs taking turns, each after a restore and a Lua collection, as the sweep stage
times them. Prints each pass's calls and Redis µs an id (commandstats of its EVALSHAs); a run
folder keeps them.
Usage: .venv/bin/python experiments/sliced_budget_price.py 1000000 [--quiet-machine]
(diagnosis, not a benchmark)."""

from _sliced import sliced_experiment

from bench.protocol.commandstats import CommandStats
from bench.protocol.lua_gc import collect_lua_garbage
from bench.protocol.sweep import AtomicSlicedSweeper
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, stalled_share

with sliced_experiment("sliced_budget_price") as (exp, client, q, sc):
    size = int(exp.args[0])
    stalled = stalled_share(sc.ids, "all_stalled")
    for budget_us in (0, 250, 0, 250):
        sweeper = AtomicSlicedSweeper(
            q, max_stalled=BENCH_MAX_STALLED, slice_size=100, clear_throttle=False, budget_us=budget_us
        )
        sc.restore(stalled, locks=True)
        collect_lua_garbage(client)
        before = CommandStats.read(client)
        result = sweeper.sweep()
        spent = CommandStats.read(client).since(before).usec.get("evalsha", 0)
        exp.row(size=size, budget_us=budget_us, calls=result.calls, redis_us_per_id=round(spent / size, 3))
        print(f"budget {budget_us} us: {result.calls} calls, {spent / size:.2f} Redis us an id", flush=True)
