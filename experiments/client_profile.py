"""Where does the client's time go? The raw driver at one point under cProfile, as shares.

Runs the finish-fetch stage's raw driver (its producer loops and worker drivers in plain threads)
on an embedded server at one point: a protocol, a strategy, workers 1, concurrency 32, rtt 0, for
a few seconds. Each of the driver's threads runs under a profiler of its own that reads the
thread's CPU clock, so a thread waiting on its socket counts nothing; the profiles are merged.
It prints the top functions by own CPU and by CPU including what they call, each as a share of
all the profiled CPU (shares, not times: the profiler's overhead and a shared machine move the
times, much less the shares), the protocol's call builders with what they call, and the shares
of a few places (the bullmq package, msgpack, redis-py, the suite's protocol layer), and writes
them as rows of a run folder.
Usage: .venv/bin/python experiments/client_profile.py [protocol] [strategy] [seconds] [--quiet-machine]
(defaults: bullmq fused 3; diagnosis, not a benchmark)."""

import cProfile
import pstats
import sys
import threading
import time
from typing import Any

from bench.harness.experiment import experiment_run
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.trial_settings import TrialSettings

TOP = 15
# The protocol's call builders and the fetch reply's reader: their CPU with what they call.
STEPS = ("add_job", "move_to_active", "move_to_finished", "read_fetched")
PROFILED = ("producer-", "worker-")  # the raw driver's thread names: the client's own work
# Where a function's file lies, for the shares by place (first match wins).
PLACES = (
    ("bullmq package", "/site-packages/bullmq/"),
    ("msgpack", "/msgpack/"),
    ("redis-py", "/site-packages/redis/"),
    ("bench.protocol", "/bench/protocol/"),
    ("bench.stages", "/bench/stages/"),
)

profiles: list[cProfile.Profile] = []
_run = threading.Thread.run


def _profiled_run(self: threading.Thread) -> None:
    """A driver thread's run under a profiler of its own, on the thread's CPU clock."""
    if not self.name.startswith(PROFILED):
        _run(self)
        return
    profile = cProfile.Profile(time.thread_time)
    profiles.append(profile)
    profile.runcall(_run, self)


def _name(func: tuple[str, int, str]) -> str:
    file, line, name = func
    if file == "~":
        return name  # a built-in
    short = file.split("/site-packages/")[-1].split("/i35-templates/")[-1]
    return f"{short}:{line}({name})"


def _place(file: str) -> str:
    return next((place for place, part in PLACES if part in file), "other")


threading.Thread.run = _profiled_run  # type: ignore[method-assign]

with experiment_run("client_profile", sys.argv[1:]) as exp, EmbeddedRedis() as srv:
    protocol = exp.args[0] if exp.args else "bullmq"
    strategy = exp.args[1] if len(exp.args) > 1 else "fused"
    seconds = float(exp.args[2]) if len(exp.args) > 2 else 3.0
    settings = RedisSettings.from_url(srv.url)
    exp.record_server(settings.connect())
    run = TrialSettings(
        strategy=strategy,
        workers=1,
        producers=1,
        batch_size=50,
        payload_bytes=100,
        target_rate=0.0,
        warmup_s=0.5,
        measure_s=seconds,
        rtt_ms=0.0,
        queue="profile",
        protocol=protocol,
        concurrency=32,
    )
    summary = run_raw(settings, run)
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        stats.add(profile)
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in entries.values()) or 1.0
    point = {"protocol": protocol, "strategy": strategy, "workers": 1, "concurrency": 32, "rtt_ms": 0}
    verdict = summary.audit.verdict if summary.audit else "not audited"
    print(f"{protocol} {strategy}: audit {verdict}; threads profiled {len(profiles)}")
    by_place: dict[str, float] = {}
    for func, (_, _, own, _, _) in entries.items():
        by_place[_place(func[0])] = by_place.get(_place(func[0]), 0.0) + own
    print("own CPU by place:")
    for place, own in sorted(by_place.items(), key=lambda item: -item[1]):
        print(f"  {100 * own / total:5.1f}%  {place}")
        exp.row("places", **point, place=place, own_share_pct=round(100 * own / total, 2))
    print("CPU of the protocol's steps, with what they call:")
    for func, (_, _, _, inclusive, _) in sorted(entries.items(), key=lambda item: -item[1][3]):
        if func[2] in STEPS and "/bench/protocol/" in func[0]:
            share = 100 * inclusive / total
            print(f"  {share:5.1f}%  {_name(func)}")
            exp.row("steps", **point, function=_name(func), share_pct=round(share, 2))
    for kind, column in (("own", 2), ("inclusive", 3)):
        print(f"top {TOP} functions by {kind} CPU:")
        ranked = sorted(entries.items(), key=lambda item: -item[1][column])[:TOP]
        for func, values in ranked:
            share = 100 * values[column] / total
            print(f"  {share:5.1f}%  {values[1]:>9} calls  {_name(func)}")
            exp.row(kind, **point, function=_name(func), calls=values[1], share_pct=round(share, 2))
