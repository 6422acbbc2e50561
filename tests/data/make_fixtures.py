"""Writes the small run folders the report tests read: `python tests/data/make_fixtures.py`.

Three runs, written with the suite's own writers (bench.results, bench.results.hdr)
so their formats are exactly a real run's:

- RUN_A: a complete smoke-like run, every stage, HDR histograms.
- RUN_B: RUN_A with known changes, each chosen for one verdict (see CHANGES).
- PARTIAL: an interrupted run: finish_fetch only, column e2e_p99_us missing,
  one saturated repetition, one failed audit, no hdr/ folder.
- NOISY_A, NOISY_B: an A/A pair as a noisy cloud VM makes it: the same true figures, each window
  drawn with its own noise, a third of them contended (steal takes 20-60% of the work), the
  rtt-0 points saturated in both, instruction counts 0.2% apart at most (NOISY_MODEL).
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.results.files import HDR_DIR, hdr_name, write_csv, write_json
from bench.results.finish_fetch import FinishFetchRow
from bench.results.hdr import new_histogram, record_us, write_hdr
from bench.results.instructions import InstructionsRow
from bench.results.race import RaceRow
from bench.results.rows import PROTOCOL, columns_of, row_dict
from bench.results.script_cost import ScriptCostRow
from bench.results.sweep import SweepCostRow

HERE = Path(__file__).resolve().parent
RUN_A = "20240501-100000-smoke"
RUN_B = "20240502-100000-smoke"
PARTIAL = "20240503-100000-default"

# What RUN_B changes against RUN_A, and the verdict each change must get.
# (stage, point, metric) -> verdict
CHANGES = {
    ("finish_fetch", "strategy=fused workers=2 rtt_ms=0", "jobs_per_s"): "better",  # +25%, spreads apart
    ("finish_fetch", "strategy=two_call workers=2 rtt_ms=0", "jobs_per_s"): "same",  # +1%
    ("finish_fetch", "strategy=fused workers=2 rtt_ms=0", "cycle_p99_us"): "worse",  # +30%
    # cv 20%, unmoved: the same within its own spread
    ("finish_fetch", "strategy=two_call workers=2 rtt_ms=0", "cycle_p99_us"): "same",
    ("finish_fetch", "strategy=fused workers=2 rtt_ms=0", "server_us_per_job"): "same",  # +8%, overlap
    ("finish_fetch", "strategy=two_call workers=2 rtt_ms=0", "server_us_per_job"): "same",  # +4%, apart
    ("finish_fetch", "strategy=fused workers=2 rtt_ms=0", "round_trips_per_job"): "same",  # equal
    ("finish_fetch", "strategy=fused workers=2 rtt_ms=1", "jobs_per_s"): "worse",  # -25%
    # the atomic all-stalled sweep at 1,000 twice as fast, over two repetitions (median ± stdev):
    # too few to judge; Redis µs, hold and probe max are measured once per point: shown
    # (us_per_active_job is the same measurement over the size: judged once, not twice)
    ("sweep", "variant=atomic scenario=all_stalled active_size=1000", "sweep_ms_median"): "not judged",
    **{
        ("sweep", "variant=atomic scenario=all_stalled active_size=1000", metric): "shown"
        for metric in ("server_us", "hold_ms_max", "probe_max_us")
    },
    # race counts are one number a point: shown, never judged
    ("race", "variant=app_side sweepers=4 stalled_jobs=100 delay_ms=2", "double_recoveries"): "shown",
    ("race", "variant=atomic sweepers=4 stalled_jobs=100 delay_ms=2", "double_recoveries"): "shown",  # 0, 0
    ("race", "variant=app_side sweepers=4 stalled_jobs=100 delay_ms=0", "lost_attempt_updates"): "shown",
    # the hot path's script cost, three repetitions a step: the deadline fused cycle 30% dearer, its
    # two-call cycle two commands more (a count the scripts fix), echomq's as it was
    ("script_cost", "protocol=echomq-deadline step=fused cycle", "server_us_per_call"): "worse",
    ("script_cost", "protocol=echomq-deadline step=two-call cycle", "commands_per_call"): "worse",
    ("script_cost", "step=fused cycle", "server_us_per_call"): "same",
}

STEADY = (1.0, 1.01, 0.99)  # a 1% spread over three repetitions
QUIET = {"foreign_cpu_pct": 2.0, "steal_pct": 0.0, "contended": False}  # every window's machine watch


def meta(run_id: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": run_id,
        "profile": run_id.rsplit("-", 1)[1],
        "started": f"{run_id[:4]}-{run_id[4:6]}-{run_id[6:8]}T10:00:00",
        "finished": f"{run_id[:4]}-{run_id[4:6]}-{run_id[6:8]}T10:00:55",
        "complete": True,
        "reason": None,
        "stages_done": ["finish_fetch", "sweep", "race", "report"],
        "git_sha": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
        "git_dirty": False,
        "redis_version": "7.2.4",
        "redis_source": "PATH",
        "redis_binary": "/usr/bin/redis-server",
        "python": "3.11.2",
        "redis_py": "5.0.1",
        "hiredis": True,
        "locust": "2.24.0",
        "pyperf": "2.6.3",
        "cpu_model": "Fixture CPU @ 2.00GHz",
        "cores": 2,
        "script_shas": {"moveToFinished-14.lua": "0" * 40},
        "machine_watch": "client and the embedded redis-server, on this machine",
        "machine_before": {"foreign_cpu_pct": 1.5, "steal_pct": 0.0, "contended": False, "busiest": []},
        "calibration": {"python_loop_ns": 38.5, "ping_p50_us": 48.2, "evalsha_us": 2.9, "took_s": 0.61},
        "system": {"cpu_governor": None, "isolated_cpus": "none", "aslr": "full (2)"},
    }
    base.update(changes)
    return base


def ids(run_id: str) -> dict[str, str]:
    """The columns every row starts with."""
    return {"run_id": run_id, "protocol": PROTOCOL, "profile": run_id.rsplit("-", 1)[1]}


def ff_rows(b: bool, run_id: str) -> list[dict[str, Any]]:
    """finish_fetch.csv: fused and two_call, A B A B, at (2 workers, rtt 0) and (2 workers, rtt 1)."""
    per_variant: dict[tuple[str, float], dict[str, list[float]]] = {
        ("fused", 0): {
            "jobs_per_s": [1250, 1262.5, 1237.5] if b else [1000, 1010, 990],
            "server_us_per_job": [54, 58, 50] if b else [50, 54, 46],
            "cycle_p99_us": [520, 525.2, 514.8] if b else [400, 404, 396],
            "round_trips_per_job": [1.0, 1.0, 1.0],
            "server_calls_per_job": [1.0, 1.0, 1.0],
            "cycle_p50_us": [200 * s for s in STEADY],
        },
        ("two_call", 0): {
            "jobs_per_s": [606, 612.06, 599.94] if b else [600, 606, 594],
            "server_us_per_job": [72.8, 73.84, 71.76] if b else [70, 71, 69],
            "cycle_p99_us": [500, 600, 400],
            "round_trips_per_job": [2.0, 2.0, 2.0],
            "server_calls_per_job": [2.0, 2.0, 2.0],
            "cycle_p50_us": [330 * s for s in STEADY],
        },
        ("fused", 1): {
            "jobs_per_s": [300, 303, 297] if b else [400, 404, 396],
            "server_us_per_job": [50 * s for s in STEADY],
            "cycle_p99_us": [2400 * s for s in STEADY],
            "round_trips_per_job": [1.0, 1.0, 1.0],
            "server_calls_per_job": [1.0, 1.0, 1.0],
            "cycle_p50_us": [1200 * s for s in STEADY],
        },
        ("two_call", 1): {
            "jobs_per_s": [220 * s for s in STEADY],
            "server_us_per_job": [70 * s for s in STEADY],
            "cycle_p99_us": [4600 * s for s in STEADY],
            "round_trips_per_job": [2.0, 2.0, 2.0],
            "server_calls_per_job": [2.0, 2.0, 2.0],
            "cycle_p50_us": [2300 * s for s in STEADY],
        },
    }
    rows = []
    for rtt in (0, 1):
        for rep in (1, 2, 3):
            for variant in ("fused", "two_call"):
                m = {k: v[rep - 1] for k, v in per_variant[(variant, rtt)].items()}
                p50 = m["cycle_p50_us"]
                rows.append({
                    **ids(run_id), "strategy": variant, "rep": rep, "workers": 2, "producers": 1,
                    "rtt_ms": float(rtt), "batch_size": 20, "payload_bytes": 50, "target_rate": 0.0,
                    "warmup_s": 0.5, "measure_s": 1.5, "duration_s": 1.5,
                    "jobs": round(m["jobs_per_s"] * 1.5),
                    "jobs_per_s": round(m["jobs_per_s"], 2),
                    "round_trips_per_job": m["round_trips_per_job"],
                    "server_calls_per_job": m["server_calls_per_job"],
                    "server_us_per_job": round(m["server_us_per_job"], 2),
                    "cycle_p50_us": float(round(p50)), "cycle_p90_us": float(round(p50 * 1.4)),
                    "cycle_p99_us": round(m["cycle_p99_us"], 1), "cycle_p999_us": float(round(p50 * 4)),
                    "cycle_max_us": float(round(p50 * 10)), "e2e_p50_us": float(round(p50 * 6)),
                    "e2e_p99_us": float(round(p50 * 20)), "loadgen_cpu_pct": 60.0, "saturated": False,
                    "audit_ok": True, "concurrency": 1, "job_ms": 0.0, **QUIET,
                })  # fmt: skip
    return rows


# A run of the default profile's shape, written by the report tests into a folder of their own:
# three strategies at 1 and 8 jobs in flight, rtt 0 and 1, with the concurrency and job_ms columns filled.
CONCURRENCY_RUN = "20240504-100000-default"
# (strategy, concurrency, rtt) -> (jobs/s, round trips a job); commands a job follow the strategy
CONCURRENCY_POINTS = {
    ("fused", 1, 0): (2000, 1.0), ("two_call", 1, 0): (1200, 2.0),
    ("two_call_pipelined", 1, 0): (1800, 1.0),
    ("fused", 8, 0): (4000, 0.13), ("two_call", 8, 0): (2800, 0.26),
    ("two_call_pipelined", 8, 0): (2700, 0.13),
    ("fused", 1, 1): (800, 1.0), ("two_call", 1, 1): (420, 2.0),
    ("two_call_pipelined", 1, 1): (760, 1.0),
    ("fused", 8, 1): (3600, 0.13), ("two_call", 8, 1): (2300, 0.26),
    ("two_call_pipelined", 8, 1): (2500, 0.13),
}  # fmt: skip


def concurrency_rows(run_id: str) -> list[dict[str, Any]]:
    rows = []
    for (strategy, concurrency, rtt), (jobs_per_s, trips) in CONCURRENCY_POINTS.items():
        commands = 1.0 if strategy == "fused" else 2.0
        redis_us = 60.0 * commands
        for rep, s in enumerate(STEADY, 1):
            jobs = jobs_per_s * s
            rows.append({
                **ids(run_id), "strategy": strategy, "rep": rep, "workers": 4, "producers": 1,
                "rtt_ms": float(rtt), "batch_size": 50, "payload_bytes": 100, "target_rate": 0.0,
                "warmup_s": 0.5, "measure_s": 2.0, "duration_s": 2.0, "jobs": round(jobs * 2),
                "jobs_per_s": round(jobs, 1), "round_trips_per_job": trips,
                "server_calls_per_job": commands + 1,
                "server_us_per_job": redis_us, "cycle_p50_us": 500.0, "cycle_p90_us": 700.0,
                "cycle_p99_us": 900.0, "cycle_p999_us": 1200.0, "cycle_max_us": 3000.0, "e2e_p50_us": 9000.0,
                "e2e_p99_us": 20000.0, "loadgen_cpu_pct": 95.0, "saturated": False, "audit_ok": True,
                "concurrency": concurrency, "job_ms": 0.0, "commands_per_job": commands,
                "server_commands_per_job": commands + 0.01, "fetches_alone_per_job": 0.0,
                "loadgen_cpu_us_per_job": 240.0, "redis_cpu_pct": 40.0,
                "redis_ceiling_jobs_per_s": round(1e6 / redis_us), "limit": "client", "limit_share": 0.95,
                "redis_mem_growth_bytes_per_1k_jobs": 420_000.0,
                "raw_jobs_per_s": jobs_per_s * 1.1, "raw_cpu_us_per_job": 200.0,
                "raw_round_trips_per_job": trips, "raw_commands_per_job": commands,
                "locust_raw_jobs_ratio": round(s / 1.1, 3),
                "reference_jobs_per_s": jobs_per_s * 1.5, "reference_cpu_us_per_job": 160.0,
                "reference_round_trips_per_job": trips, "raw_reference_cpu_ratio": 1.25,
                "rtt_slept_ms": float(rtt) * 1.05,
            })  # fmt: skip
    return rows


FIDELITY = {
    "calls": 2000, "redis_benchmark_p50_us": 55.0, "redis_benchmark_note": "/usr/bin/redis-benchmark",
    "redis_py_p50_us": 96.0, "raw_path_p50_us": 80.0, "locust_path_p50_us": 104.0,
    "locust_note": "4000 calls",
}  # fmt: skip


def write_concurrency_run(folder: Path) -> Path:
    """CONCURRENCY_RUN under ``folder``: finish_fetch.csv and meta.json with the fidelity figures."""
    run = folder / CONCURRENCY_RUN
    run.mkdir(parents=True)
    write_json(run / "meta.json", meta(CONCURRENCY_RUN, stages_done=["finish_fetch"],
                                       finish_fetch_fidelity=FIDELITY))  # fmt: skip
    write_csv(run / "finish_fetch.csv", columns_of(FinishFetchRow), concurrency_rows(CONCURRENCY_RUN))
    return run


def sweep_rows(b: bool, run_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for scenario in ("healthy", "all_stalled"):
        for size in (10, 100, 1000):
            for variant in ("atomic", "atomic_linear", "app_side"):
                stalled = scenario == "all_stalled"
                if variant == "app_side" and size > 100:
                    why = "app_side capped at 100 by the profile (minutes per sweep)"
                    rows.append(row_dict(SweepCostRow(
                        **ids(run_id), variant=variant, scenario=scenario, active_size=size,
                        slice_size=100, probe_rate_hz=200.0, skipped=why,
                    )))  # fmt: skip
                    continue
                if variant == "atomic":
                    ms = 0.05 + (1.5e-5 * size * size if stalled else 0.003 * size)
                    if b and stalled and size == 1000:
                        ms = 7.0
                    hold, trips = ms, 1
                elif variant == "atomic_linear":
                    ms = 0.05 + (0.0066 if stalled else 0.003) * size
                    hold, trips = ms, 1
                else:
                    ms = 0.1 * (size + 1) * (2 if stalled else 1)
                    hold, trips = 0.05, size + 1
                rows.append(row_dict(SweepCostRow(
                    **ids(run_id), variant=variant, scenario=scenario, active_size=size,
                    slice_size=100, probe_rate_hz=200.0, reps=2,
                    sweep_ms_median=round(ms, 4), sweep_ms_stdev=round(ms * 0.02, 5),
                    us_per_active_job=round(ms * 1000 / size, 3), round_trips=trips,
                    server_us=round(ms * 900), hold_ms_max=round(hold, 4),
                    probe_p99_us=90, probe_max_us=round(max(150.0, hold * 1000 + 60)), probe_busy=0,
                    foreign_cpu_pct=2.0, steal_pct=0.0, contended=False,
                )))  # fmt: skip
    return rows


def race_rows(b: bool, run_id: str) -> list[dict[str, Any]]:
    counts: dict[tuple[str, float], tuple[int, int, int]] = {
        ("atomic", 0): (0, 0, 0),
        ("atomic", 2): (0, 0, 0),
        ("app_side", 0): (1, 1 if b else 0, 0),
        ("app_side", 2): (20 if b else 10, 8, 2),
    }
    return [
        {**ids(run_id), "variant": v, "sweepers": 4, "stalled_jobs": 100, "delay_ms": float(d),
         "workers": 1, "slice_size": 50, "max_stalled": 1000, "reps": 1,
         "double_recoveries": c[0], "lost_attempt_updates": c[1], "requeued_after_finish": c[2],
         "audit_violations": 0, **QUIET}
        for (v, d), c in counts.items()
    ]  # fmt: skip


# (protocol, step) -> (Redis µs a call, commands a call, the commands by name, a call)
SCRIPT_COSTS = {
    ("echomq", "fused cycle"): (40.0, 12.0, {"evalsha": 1, "hset": 3, "lpush": 1, "rpoplpush": 1}),
    ("echomq", "two-call cycle"): (48.0, 13.0, {"evalsha": 2, "hset": 3, "lpush": 1, "rpoplpush": 1}),
    ("echomq", "extendLock"): (6.0, 2.0, {"evalsha": 1, "set": 1}),
    ("echomq-deadline", "fused cycle"): (44.0, 14.0, {"evalsha": 1, "hset": 3, "zadd": 1, "zrem": 1}),
    ("echomq-deadline", "two-call cycle"): (52.0, 15.0, {"evalsha": 2, "hset": 3, "zadd": 1, "zrem": 1}),
    ("echomq-deadline", "extendLock"): (7.0, 3.0, {"evalsha": 1, "set": 1, "zadd": 1}),
}


def script_cost_rows(b: bool, run_id: str) -> list[dict[str, Any]]:
    rows = []
    for (protocol, step), (us, commands, by_name) in SCRIPT_COSTS.items():
        if b and (protocol, step) == ("echomq-deadline", "fused cycle"):
            us *= 1.3
        if b and (protocol, step) == ("echomq-deadline", "two-call cycle"):
            commands += 2
        for rep, s in enumerate(STEADY, 1):
            rows.append(row_dict(ScriptCostRow(
                run_id=run_id, protocol=protocol, profile=run_id.rsplit("-", 1)[1], step=step, rep=rep,
                calls=200, server_us_per_call=round(us * s, 3), commands_per_call=commands,
                commands=by_name, foreign_cpu_pct=2.0, steal_pct=0.0, contended=False,
            )))  # fmt: skip
    return rows


def write_histograms(run: Path, seed: int, slower: float) -> None:
    rng = random.Random(seed)
    for variant, centre in (("fused", 200.0), ("two_call", 330.0)):
        for rep in (1, 2, 3):
            for metric, scale in (("cycle", 1.0), ("e2e", 6.0)):
                histogram = new_histogram()
                for _ in range(2000):
                    record_us(histogram, centre * scale * slower * rng.lognormvariate(0, 0.5))
                write_hdr(run / HDR_DIR / hdr_name("finish_fetch", variant, rep, metric), histogram)


def write_run(name: str, b: bool) -> None:
    run = HERE / name
    shutil.rmtree(run, ignore_errors=True)
    (run / HDR_DIR).mkdir(parents=True)
    write_json(run / "meta.json", meta(name, git_sha="f" * 40, redis_version="7.4.1") if b else meta(name))
    write_csv(run / "finish_fetch.csv", columns_of(FinishFetchRow), ff_rows(b, name))
    write_csv(run / "sweep_cost.csv", columns_of(SweepCostRow), sweep_rows(b, name))
    write_csv(run / "race.csv", columns_of(RaceRow), race_rows(b, name))
    write_csv(run / "script_cost.csv", columns_of(ScriptCostRow), script_cost_rows(b, name))
    write_histograms(run, seed=2 if b else 1, slower=1.0)


def write_partial() -> None:
    run = HERE / PARTIAL
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    write_json(
        run / "meta.json",
        meta(
            PARTIAL,
            complete=False,
            reason="interrupted (Ctrl-C)",
            stages_done=["finish_fetch"],
            finished=None,
        ),
    )
    rows = [r for r in ff_rows(False, PARTIAL) if r["rtt_ms"] == 0]
    rows[3]["saturated"] = True  # two_call, rep 2
    rows[4]["audit_ok"] = False  # fused, rep 3
    columns = [c for c in columns_of(FinishFetchRow) if c != "e2e_p99_us"]
    write_csv(run / "finish_fetch.csv", columns, [{c: r.get(c, "") for c in columns} for r in rows])


NOISY_A = "20240505-100000-smoke"
NOISY_B = "20240506-100000-smoke"
# The noise of an A/A pair on a cloud VM whose hypervisor steals CPU in bursts: each window's
# value is the truth times a lognormal of the metric's own spread; a contended window (this
# share of them) loses a fifth to three fifths of its throughput and its latencies and µs grow
# as much; the rtt-0 points are saturated (the client set the pace) in both runs.
NOISY_MODEL = {"contended_share": 0.33, "jobs_cv": 0.04, "us_cv": 0.05, "sweep_between_runs_cv": 0.05}
LATENCY_CV = {"cycle_p50_us": 0.05, "cycle_p90_us": 0.08, "cycle_p99_us": 0.15, "cycle_p999_us": 0.25,
              "cycle_max_us": 0.4, "e2e_p50_us": 0.08, "e2e_p99_us": 0.2}  # fmt: skip


def noisy_ff_rows(rng: random.Random, run_id: str) -> list[dict[str, Any]]:
    rows = []
    truth = {
        "fused": (1600.0, 60.0, 1.0),
        "two_call": (1000.0, 70.0, 2.0),
        "two_call_pipelined": (1400.0, 70.0, 1.0),
    }
    for workers in (2, 4):
        for rtt in (0, 1):
            for rep in (1, 2, 3):
                for strategy, (jobs, redis_us, trips) in truth.items():
                    contended = rng.random() < NOISY_MODEL["contended_share"]
                    loss = rng.uniform(0.4, 0.8) if contended else 1.0
                    jobs_s = (
                        jobs * workers / 2 / (1 + rtt) * loss * rng.lognormvariate(0, NOISY_MODEL["jobs_cv"])
                    )
                    p50 = 1e6 / jobs_s * workers
                    latency = {m: p50 * f * rng.lognormvariate(0, cv) for (m, cv), f in
                               zip(LATENCY_CV.items(), (1, 1.4, 3, 6, 12, 6, 20), strict=True)}  # fmt: skip
                    commands = 1.0 if strategy == "fused" else 2.0
                    server_us = redis_us / loss * rng.lognormvariate(0, NOISY_MODEL["us_cv"])
                    rows.append({
                        **ids(run_id), "strategy": strategy, "rep": rep, "workers": workers, "producers": 1,
                        "rtt_ms": float(rtt), "batch_size": 20, "payload_bytes": 50, "target_rate": 0.0,
                        "warmup_s": 0.5, "measure_s": 1.0, "duration_s": 1.0, "jobs": round(jobs_s),
                        "jobs_per_s": round(jobs_s, 1), "round_trips_per_job": trips,
                        "server_calls_per_job": commands + 0.05,
                        "server_us_per_job": round(server_us, 2),
                        **{m: round(v, 1) for m, v in latency.items()},
                        "loadgen_cpu_pct": 95.0 if rtt == 0 else 50.0, "saturated": rtt == 0,
                        "audit_ok": True,
                        "concurrency": 1, "job_ms": 0.0, "commands_per_job": commands,
                        "server_commands_per_job": commands + 0.01,
                        "loadgen_cpu_us_per_job": round(300 / loss * rng.lognormvariate(0, 0.05), 1),
                        "foreign_cpu_pct": 70.0 if contended else 3.0,
                        "steal_pct": rng.uniform(56, 65) if contended else rng.uniform(0, 1),
                        "contended": contended,
                    })  # fmt: skip
    return rows


def noisy_script_cost_rows(rng: random.Random, run_id: str) -> list[dict[str, Any]]:
    rows = []
    for (protocol, step), (us, commands, by_name) in SCRIPT_COSTS.items():
        for rep in (1, 2, 3):
            contended = rng.random() < NOISY_MODEL["contended_share"]
            slower = rng.uniform(1.25, 2.5) if contended else 1.0
            rows.append(row_dict(ScriptCostRow(
                run_id=run_id, protocol=protocol, profile="smoke", step=step, rep=rep, calls=200,
                server_us_per_call=round(us * slower * rng.lognormvariate(0, NOISY_MODEL["us_cv"]), 3),
                commands_per_call=commands, commands=by_name, foreign_cpu_pct=70.0 if contended else 2.0,
                steal_pct=60.0 if contended else 0.5, contended=contended,
            )))  # fmt: skip
    return rows


def noisy_sweep_rows(rng: random.Random, run_id: str) -> list[dict[str, Any]]:
    rows = []
    for scenario in ("healthy", "all_stalled"):
        for size in (10, 100, 1000):
            for variant, per_id_ms in (("atomic", 0.006), ("atomic_linear", 0.004), ("app_side", 0.2)):
                contended = rng.random() < NOISY_MODEL["contended_share"]
                slower = rng.uniform(1.25, 2.5) if contended else 1.0
                ms = (
                    (0.05 + per_id_ms * size)
                    * slower
                    * rng.lognormvariate(0, NOISY_MODEL["sweep_between_runs_cv"])
                )
                rows.append(row_dict(SweepCostRow(
                    **ids(run_id), variant=variant, scenario=scenario, active_size=size, slice_size=100,
                    probe_rate_hz=200.0, reps=2, sweep_ms_median=round(ms, 4),
                    sweep_ms_stdev=round(ms * 0.03, 5), us_per_active_job=round(ms * 1000 / size, 3),
                    round_trips=1 if variant != "app_side" else 3 * size + 1,
                    server_us=round(ms * 900 * rng.lognormvariate(0, 0.1)),
                    hold_ms_max=round(ms * rng.lognormvariate(0, 0.1), 4),
                    probe_p99_us=round(90 * rng.lognormvariate(0, 0.1)),
                    probe_max_us=round(400 * rng.lognormvariate(0, 0.3)), probe_busy=0,
                    foreign_cpu_pct=70.0 if contended else 2.0, steal_pct=60.0 if contended else 0.5,
                    contended=contended,
                )))  # fmt: skip
    return rows


# (protocol, step, active_size, unit) -> instructions inside command execution; the whole server's
# are 4,000 a call more (a job of two calls: 8,000; a stalled id of a sweep: a little)
INSTRUCTIONS = {
    ("none", "PING", 0, "call"): 680.0,
    ("none", "EVALSHA return 1", 0, "call"): 6150.0,
    ("echomq", "moveToFinished (fetch next = 1)", 0, "call"): 258_500.0,
    ("echomq", "moveToFinished (fetch next = 0)", 0, "call"): 112_000.0,
    ("echomq", "moveToActive", 0, "call"): 157_300.0,
    ("echomq", "extendLock", 0, "call"): 26_800.0,
    ("echomq", "fused cycle", 0, "job"): 258_500.0,
    ("echomq", "two-call cycle", 0, "job"): 269_300.0,
    ("echomq", "sweep atomic", 100, "stalled id"): 41_900.0,
    ("echomq", "sweep app_side", 100, "stalled id"): 19_600.0,
}


def noisy_instruction_rows(rng: random.Random, run_id: str) -> list[dict[str, Any]]:
    rows = []
    for (protocol, step, size, unit), count in INSTRUCTIONS.items():
        moved = count * (1 + rng.uniform(-0.002, 0.002))  # two servers' random hash seeds
        server = 4000.0 * (2 if unit == "job" else 1 if unit == "call" else 0.01)
        rows.append(row_dict(InstructionsRow(
            run_id=run_id, protocol=protocol, profile="smoke", step=step, active_size=size, completed_size=0,
            unit=unit,
            calls=1 if size else 400, instructions_per_call=round(moved, 1),
            server_instructions_per_call=round((count + server) * (1 + rng.uniform(-0.002, 0.002)), 1),
            instructions_2n_diff_pct=None if size else round(rng.uniform(-0.3, 0.3), 3),
            server_instructions_2n_diff_pct=None if size else round(rng.uniform(-0.3, 0.3), 3),
            foreign_cpu_pct=3.0, steal_pct=0.5, contended=False,
        )))  # fmt: skip
    return rows


def write_noisy(name: str, seed: int) -> None:
    """One run of the noisy A/A pair: the same truths, this seed's noise."""
    rng = random.Random(seed)
    run = HERE / name
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    write_json(run / "meta.json", meta(name, stages_done=["finish_fetch", "script_cost", "sweep", "race",
                                                          "instructions", "report"]))  # fmt: skip
    write_csv(run / "finish_fetch.csv", columns_of(FinishFetchRow), noisy_ff_rows(rng, name))
    write_csv(run / "script_cost.csv", columns_of(ScriptCostRow), noisy_script_cost_rows(rng, name))
    write_csv(run / "sweep_cost.csv", columns_of(SweepCostRow), noisy_sweep_rows(rng, name))
    write_csv(run / "race.csv", columns_of(RaceRow), race_rows(False, name))
    write_csv(run / "instructions.csv", columns_of(InstructionsRow), noisy_instruction_rows(rng, name))


if __name__ == "__main__":
    write_run(RUN_A, b=False)
    write_run(RUN_B, b=True)
    write_partial()
    write_noisy(NOISY_A, seed=11)
    write_noisy(NOISY_B, seed=12)
    print(f"wrote {RUN_A}, {RUN_B}, {PARTIAL}, {NOISY_A}, {NOISY_B} under {HERE}")
