"""Where in an all-stalled atomic_sliced pass are its long calls, and what grows with the size?

One queue of N active jobs, all stalled (marked by an earlier sweep, locks gone), Lua's garbage
collected first as the sweep stage does. SLOWLOG logs every call over 0.3 ms (its inner commands
are logged too, and are shorter) so each call's time
inside Redis is known in order; prints the longest calls, where in the pass they fell (the stalled
set's size then), and how many calls went over 1 and 2 ms. A run folder keeps each pass
(sliced_stalled_calls.csv), its longest calls (_top.csv) and each tenth of it (_tenths.csv).
Usage: .venv/bin/python experiments/sliced_stalled_calls.py 1000000 [passes] [--quiet-machine]
(diagnosis, not a benchmark)."""

from _sliced import logged_script_calls, sliced_experiment

from bench.protocol.lua_gc import collect_lua_garbage
from bench.protocol.sweep import make_sweeper
from bench.stages.sweep.scenario import stalled_share

with sliced_experiment("sliced_stalled_calls") as (exp, client, q, sc):
    size = int(exp.args[0])
    passes = int(exp.args[1]) if len(exp.args) > 1 else 2
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
        # no call over the threshold (a small queue on a fast moment): no median, no top, no tenths
        median = sorted(durations)[total // 2] if durations else None
        exp.row(
            size=size,
            sweep_pass=n,
            calls=total,
            moved=len(result.moved),
            client_max_ms=round(result.longest_call_s * 1e3, 3),
            median_us=median,
            over_1ms=sum(d > 1000 for d in durations),
            over_2ms=sum(d > 2000 for d in durations),
        )
        print(
            f"pass {n}: {total} calls, moved {len(result.moved)}, "
            f"client max {result.longest_call_s * 1e3:.2f} ms, "
            f"median {median} us, over 1 ms {sum(d > 1000 for d in durations)}, "
            f"over 2 ms {sum(d > 2000 for d in durations)}",
            flush=True,
        )
        top = sorted(range(total), key=lambda i: -durations[i])[:12]
        for i in sorted(top):
            left = size - 100 * (i + 1)
            exp.row("top", sweep_pass=n, call=i, duration_us=durations[i], stalled_left=left)
            print(f"  call {i:6d} ({durations[i]:6d} us), stalled set then ~{left}", flush=True)
        tenth = max(1, total // 10)
        for b in range(0, total, tenth):
            part = durations[b : b + tenth]
            exp.row(
                "tenths",
                sweep_pass=n,
                first_call=b,
                mean_us=round(sum(part) / len(part), 1),
                max_us=max(part),
            )
            print(f"  calls {b:6d}+: mean {sum(part) / len(part):7.1f} us, max {max(part):6d} us", flush=True)
