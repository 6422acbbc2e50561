"""Is the sliced sweep's long call at a million ids the Lua garbage a big script left behind?

One million-id queue (healthy). Sliced passes, each after an atomic sweep of the whole list (as the sweep
stage runs atomic and atomic_linear before atomic_sliced at each size); before some, full Lua garbage
collections in an untimed EVAL (Lua 5.1 halves its string table at most once a collection). Prints Redis's
Lua memory, and each pass's longest call at the client and inside Redis (SLOWLOG over 1 ms); a run
folder keeps them.
Usage: .venv/bin/python experiments/sliced_after_big_script.py 1000000 [--quiet-machine]
(diagnosis, not a benchmark)."""

import time
from dataclasses import asdict

from _sliced import sliced_experiment, sliced_pass

from bench.protocol.sweep import make_sweeper
from bench.stages.sweep.scenario import stalled_share

with sliced_experiment("sliced_after_big_script") as (exp, client, q, sc):
    size = int(exp.args[0])
    sliced = make_sweeper("atomic_sliced", q, max_stalled=10**9, slice_size=100, clear_throttle=False)
    atomic = make_sweeper("atomic", q, max_stalled=10**9, clear_throttle=False)
    stalled = stalled_share(sc.ids, "healthy")

    def lua_mb() -> float:
        return int(client.info("memory")["used_memory_lua"]) / 1e6

    modes = (
        ("after atomic", 0, False),
        ("after atomic, then 1 full Lua GC", 1, False),
        ("after atomic, then 6 full Lua GCs", 6, False),
        ("after atomic, then 6 full Lua GCs and no lazy free pending", 6, True),
        ("after atomic", 0, False),
    )
    for label, collect, settle in modes:
        sc.restore(stalled, locks=False)
        atomic.sweep()
        sc.restore(stalled, locks=False)
        lua_before = lua_mb()
        note = f"lua {lua_before:.0f} MB"
        gc_ms = 0.0
        if collect:
            t0 = time.perf_counter()
            for _ in range(collect):
                client.eval("collectgarbage('collect') return 1", 0)
            gc_ms = 1e3 * (time.perf_counter() - t0)
            note += f", GC {gc_ms:.1f} ms -> lua {lua_mb():.0f} MB"
        if settle:
            while int(client.info("memory")["lazyfree_pending_objects"]) > 0:
                time.sleep(0.01)
            time.sleep(1.0)
        lua_after = lua_mb()
        times = sliced_pass(client, sliced)
        exp.row(
            size=size,
            before_pass=label,
            lua_collections=collect,
            lua_mb_before=round(lua_before, 1),
            gc_ms=round(gc_ms, 1),
            lua_mb_after=round(lua_after, 1),
            **asdict(times),
        )
        print(f"{label}: {note}; sliced pass: {times.text()}", flush=True)
