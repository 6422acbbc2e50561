"""Does the first sliced sweep after writing a million locks stall Redis because of how they are written?

Six atomic_sliced passes over one queue in a row, the locks rewritten by MSET, by SET PX, or left
alone before each; the longest call at the client and inside Redis (SLOWLOG over 1 ms); a run
folder keeps them.
Usage: .venv/bin/python experiments/sliced_passes.py 1000000 healthy [--quiet-machine]
(diagnosis, not a benchmark)."""

from dataclasses import asdict

from _sliced import sliced_experiment, sliced_pass

from bench.protocol.sweep import make_sweeper
from bench.stages.sweep.scenario import LOCK_MS, LOCK_TOKEN, stalled_share

with sliced_experiment("sliced_passes") as (exp, client, q, sc):
    size, scenario = int(exp.args[0]), exp.args[1]
    sw = make_sweeper("atomic_sliced", q, max_stalled=10**9, slice_size=100, clear_throttle=False)
    stalled = stalled_share(sc.ids, scenario)

    def px_locks() -> None:
        pipe = client.pipeline(transaction=False)
        for n, i in enumerate(sc.ids):
            pipe.set(q.keys.lock(i), LOCK_TOKEN, px=LOCK_MS)
            if n % 10000 == 9999:
                pipe.execute()
        pipe.execute()

    for how in ["mset", "px", "none", "mset", "px", "none"]:
        sc.restore(stalled, locks=(how == "mset"))
        if how == "px":
            px_locks()
        times = sliced_pass(client, sw)
        exp.row(size=size, scenario=scenario, locks_written_by=how, **asdict(times))
        print(f"{how:5s}: {times.text()}", flush=True)
