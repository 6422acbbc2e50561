"""Is the sliced sweep's long call at a million ids the Lua garbage a big script left behind?

One million-id queue (healthy). Sliced passes, each after an atomic sweep of the whole list (as the sweep
stage runs atomic and atomic_linear before atomic_sliced at each size); before some, full Lua garbage
collections in an untimed EVAL (Lua 5.1 halves its string table at most once a collection). Prints Redis's
Lua memory, and each pass's longest call at the client and inside Redis (SLOWLOG over 1 ms).
Usage: .venv/bin/python experiments/sliced_after_big_script.py 1000000 (diagnosis, not a benchmark)."""

import sys
import time

from _sliced import scenario_queue, sliced_pass

from bench.protocol.sweep import make_sweeper
from bench.sweep_cost.scenario import stalled_share

size = int(sys.argv[1])
with scenario_queue(size) as (client, q, sc):
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
        note = f"lua {lua_mb():.0f} MB"
        if collect:
            t0 = time.perf_counter()
            for _ in range(collect):
                client.eval("collectgarbage('collect') return 1", 0)
            note += f", GC {1e3 * (time.perf_counter() - t0):.1f} ms -> lua {lua_mb():.0f} MB"
        if settle:
            while int(client.info("memory")["lazyfree_pending_objects"]) > 0:
                time.sleep(0.01)
            time.sleep(1.0)
        print(f"{label}: {note}; sliced pass: {sliced_pass(client, sliced)}", flush=True)
