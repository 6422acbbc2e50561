"""Do the sliced sweep's long calls at a million stalled ids come with page faults in Redis?

One queue of N active jobs, all stalled, Lua's garbage collected first. The pass is driven call by
call; between calls Redis's minor page faults are read from /proc (same machine), and each call's
time inside Redis from SLOWLOG (threshold 0.1 ms). Prints the faults of the long calls against
those of the typical call; a run folder keeps the pass (sliced_call_faults.csv) and each call
over 2 ms (sliced_call_faults_slow.csv).
Usage: .venv/bin/python experiments/sliced_call_faults.py 1000000 [slice [budget_us]] [--quiet-machine]
(diagnosis, not a benchmark)."""

import statistics

from _sliced import logged_script_calls, sliced_experiment

from bench.protocol.lua_gc import collect_lua_garbage
from bench.protocol.sweep import AtomicSlicedSweeper, make_sweeper
from bench.stages.sweep.scenario import stalled_share


def faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # minflt


def sched(pid: int) -> tuple[int, int]:
    """The main thread's time on a CPU and time runnable but waiting for one (ns)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        run, wait, _ = f.read().split()
    return int(run), int(wait)


with sliced_experiment("sliced_call_faults") as (exp, client, q, sc):
    size = int(exp.args[0])
    slice_size = int(exp.args[1]) if len(exp.args) > 1 else 100
    budget = [int(exp.args[2])] if len(exp.args) > 2 else []  # µs; none given: the script's default
    pid = int(client.info("server")["process_id"])
    sliced = make_sweeper("atomic_sliced", q, max_stalled=10**9, slice_size=slice_size, clear_throttle=False)
    assert isinstance(sliced, AtomicSlicedSweeper)  # its calls one at a time, below
    sc.restore(stalled_share(sc.ids, "all_stalled"), locks=True)
    collect_lua_garbage(client)
    client.config_set("slowlog-max-len", size // 25 + 1000)
    client.config_set("slowlog-log-slower-than", 100)
    client.slowlog_reset()
    deltas, ran, waited = [], [], []
    while True:
        before, (run0, wait0) = faults(pid), sched(pid)
        reply = sliced._call((slice_size, *budget))
        deltas.append(faults(pid) - before)
        run1, wait1 = sched(pid)
        ran.append((run1 - run0) // 1000)
        waited.append((wait1 - wait0) // 1000)
        if len(reply) < 3:
            break
    client.config_set("slowlog-log-slower-than", 1000)
    durations = logged_script_calls(client, size // 25 + 1000)
    ordered = sorted(durations)

    def at(share: float) -> int | None:  # the logged calls' quantile; none logged on a fast moment
        return ordered[min(int(len(ordered) * share), len(ordered) - 1)] if ordered else None

    exp.row(
        size=size,
        slice=slice_size,
        budget_us=budget[0] if budget else "",
        calls=len(deltas),
        logged_over_100us=len(durations),
        median_us=at(0.5),
        p999_us=at(0.999),
        max_us=at(1.0),
        faults_median=statistics.median(deltas),
        faults_max=max(deltas),
        faults_total=sum(deltas),
    )
    print(f"inside Redis: median {at(0.5)} us, 99.9th {at(0.999)} us, max {at(1.0)} us")
    print(
        f"{len(deltas)} calls, {len(durations)} logged over 0.1 ms; faults a call: median "
        f"{statistics.median(deltas)}, max {max(deltas)}, total {sum(deltas)}"
    )
    if len(durations) == len(deltas):
        slow = [i for i, d in enumerate(durations) if d > 2000]
        for i in slow:
            exp.row(
                "slow",
                call=i,
                duration_us=durations[i],
                faults=deltas[i],
                on_cpu_us=ran[i],
                waiting_us=waited[i],
            )
        normal = [i for i, d in enumerate(durations) if d <= 1500]
        print(f"calls over 2 ms: {len(slow)}; their faults: {[deltas[i] for i in slow]}")
        print(f"calls over 2 ms: durations {[durations[i] for i in slow]}")
        print(
            f"calls over 2 ms: on CPU us {[ran[i] for i in slow]}, "
            f"waiting for a CPU us {[waited[i] for i in slow]}"
        )
        if normal:  # on a loaded machine every call may be over 1.5 ms
            print(
                f"calls up to 1.5 ms: on CPU median {statistics.median(ran[i] for i in normal)} us, "
                f"waiting median {statistics.median(waited[i] for i in normal)} us"
            )
            print(f"calls up to 1.5 ms: mean faults {statistics.mean(deltas[i] for i in normal):.1f}")
        many = sorted(range(len(deltas)), key=lambda i: -deltas[i])[:10]
        print(f"most faults: {[(deltas[i], durations[i]) for i in many]}")
