"""Where in an all-stalled atomic_sliced pass are its long calls, and what grows with the size?

One queue of N active jobs, all stalled (marked by an earlier sweep, locks gone), Lua's garbage
collected first as the sweep stage does. SLOWLOG logs every call over 0.3 ms (its inner commands
are logged too, and are shorter) so each call's time
inside Redis is known in order; prints the longest calls, where in the pass they fell (the stalled
set's size then), and how many calls went over 1 and 2 ms.
Usage: .venv/bin/python experiments/sliced_stalled_calls.py 1000000 (diagnosis, not a benchmark)."""

import sys

from _sliced import logged_script_calls, scenario_queue

from bench.protocol.lua_gc import collect_lua_garbage
from bench.protocol.sweep import make_sweeper
from bench.sweep_cost.scenario import stalled_share

size = int(sys.argv[1])
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 2
with scenario_queue(size) as (client, q, sc):
    sliced = make_sweeper("atomic_sliced", q, max_stalled=10**9, slice_size=100, clear_throttle=False)
    stalled = stalled_share(sc.ids, "all_stalled")
    client.config_set("slowlog-max-len", size // 100 + 1000)
    for n in range(passes):
        sc.restore(stalled, locks=True)
        collect_lua_garbage(client)
        client.config_set("slowlog-log-slower-than", 300)  # 0 would log every command inside the scripts too
        client.slowlog_reset()
        result = sliced.sweep()
        client.config_set("slowlog-log-slower-than", 1000)
        durations = logged_script_calls(client, size // 100 + 1000)
        total = len(durations)
        print(
            f"pass {n}: {total} calls, moved {len(result.moved)}, "
            f"client max {result.longest_call_s * 1e3:.2f} ms, "
            f"median {sorted(durations)[total // 2]} us, over 1 ms {sum(d > 1000 for d in durations)}, "
            f"over 2 ms {sum(d > 2000 for d in durations)}",
            flush=True,
        )
        top = sorted(range(total), key=lambda i: -durations[i])[:12]
        for i in sorted(top):
            left = size - 100 * (i + 1)
            print(f"  call {i:6d} ({durations[i]:6d} us), stalled set then ~{left}", flush=True)
        tenth = max(1, total // 10)
        for b in range(0, total, tenth):
            part = durations[b : b + tenth]
            print(f"  calls {b:6d}+: mean {sum(part) / len(part):7.1f} us, max {max(part):6d} us", flush=True)
