"""Every stage runs with ``protocols = bullmq`` (beside echomq) at smoke size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main as bench_main
from bench.errors import BenchError
from bench.harness.profile import Profile, SweepOptions
from bench.protocol.bullmq_package import REQUIRED_VERSION
from bench.results.race import RaceRow
from bench.results.rows import columns_of
from bench.results.sweep import SweepCostRow
from bench.stages.bullmq_worker.node import NodePeer, find_peer
from bench.stages.bullmq_worker.plan import NODE_DRIVERS
from bench.stages.race.plan import RacePlan, points_of
from bench.stages.sweep.plan import points_of as sweep_points_of
from bench.stages.sweep.stage import check_profile
from tests.helpers import csv_rows


def test_the_sweep_plan_gives_bullmq_its_own_sweep_only():
    options = SweepOptions(
        sweep_variants=("atomic", "app_side"), sweep_scenarios=("mixed",), sweep_sizes=(10,)
    )
    points = [p.point for p in sweep_points_of(options, ("echomq", "bullmq"))]
    assert [(p.protocol, p.variant) for p in points] == [
        ("echomq", "atomic"), ("echomq", "app_side"), ("bullmq", "atomic"),
    ]  # fmt: skip
    assert points[-1].name == "sweep/bullmq.atomic/mixed/10" and points[0].name == "sweep/atomic/mixed/10"
    with pytest.raises(BenchError, match="no sweep variant of app_side is a bullmq sweep; add one of atomic"):
        check_profile(Profile("p", protocols=("bullmq",), sweep=SweepOptions(sweep_variants=("app_side",))))


def test_an_unknown_protocol_in_a_profile_is_a_one_line_error(tmp_path: Path, capsys):
    conf = tmp_path / "p.conf"
    conf.write_text("protocols = echomq, rq\n")
    assert bench_main(["race", "--profile", str(conf)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["echomq-bench: error: unknown protocol 'rq'; use one of echomq, bullmq, echomq-deadline"]
    assert bench_main(["race", "--profile", "smoke", "--protocols", "bullmq,bullmq"]) == 2
    assert "--protocols names one twice" in capsys.readouterr().err


def test_the_sweep_stage_measures_both_protocols(tmp_path: Path, settings, monkeypatch):
    monkeypatch.setenv("REDIS_URL", settings.url)
    argv = ["sweep", "--profile", "smoke", "--protocols", "echomq,bullmq", "--sizes", "5", "--reps", "1"]
    argv += ["--variants", "atomic", "--scenarios", "mixed,all_stalled", "--results", str(tmp_path)]
    assert bench_main(argv) == 0
    [run_dir] = list(tmp_path.iterdir())
    rows = csv_rows(run_dir / "sweep_cost.csv")
    assert set(rows[0]) == set(columns_of(SweepCostRow))
    assert {(r["protocol"], r["scenario"]) for r in rows} == {
        (p, s) for p in ("echomq", "bullmq") for s in ("mixed", "all_stalled")
    }
    for row in rows:
        assert row["skipped"] == "no" and row["round_trips"] == "1.0", row  # checked: every stalled job moved
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["protocols"]["bullmq"]["version"] == REQUIRED_VERSION
    assert (
        meta["sweep"]["script_shas"]["bullmq.atomic"] == meta["protocols"]["bullmq"]["script_shas"]["sweep"]
    )
    assert meta["sweep"]["script_shas"]["atomic"] == meta["protocols"]["echomq"]["script_shas"]["sweep"]


def test_the_race_stage_runs_bullmqs_sweep_at_zero_anomalies(tmp_path: Path, settings, monkeypatch):
    monkeypatch.setenv("REDIS_URL", settings.url)
    argv = [
        "race",
        "--profile",
        "smoke",
        "--protocols",
        "echomq,bullmq",
        "--variants",
        "all",
        "--sweepers",
        "3",
    ]
    argv += ["--jobs", "30", "--delay-ms", "0", "--reps", "1", "--workers", "1", "--results", str(tmp_path)]
    assert bench_main(argv) == 0
    [run_dir] = list(tmp_path.iterdir())
    rows = csv_rows(run_dir / "race.csv")
    assert tuple(rows[0]) == columns_of(RaceRow)
    [bullmq] = [r for r in rows if r["protocol"] == "bullmq"]
    assert bullmq["variant"] == "atomic"
    anomalies = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish", "audit_violations")
    assert [bullmq[k] for k in anomalies] == ["0", "0", "0", "0"]
    assert len([r for r in rows if r["protocol"] == "echomq"]) == 5  # every echomq variant beside it
    plan_ = RacePlan.from_options(Profile("p").race, ("echomq", "bullmq"))
    assert [c.protocol for c in points_of(plan_) if c.variant == "atomic"] == ["echomq", "bullmq"] * 2


@pytest.mark.slow
def test_bullmqs_own_worker_and_the_suites_loops_process_a_prefilled_queue(
    tmp_path: Path, settings, monkeypatch
):
    monkeypatch.setenv("REDIS_URL", settings.url)
    conf = tmp_path / "bw.conf"
    keys = ["protocols = bullmq", "bullmq-worker-concurrency = 8", "bullmq-worker-jobs = 1100"]
    conf.write_text("\n".join([*keys, "bullmq-worker-reps = 1", "bullmq-worker-window-s = 0", ""]))
    peer = find_peer()  # BullMQ's Node package runs beside when node can run it, and says why not
    results = tmp_path / "results"
    assert (
        bench_main(["run", "--profile", str(conf), "--stages", "bullmq_worker", "--results", str(results)])
        == 0
    )
    [run_dir] = list(results.iterdir())
    rows = {r["driver"]: r for r in csv_rows(run_dir / "bullmq_worker.csv")}
    node_drivers = set(NODE_DRIVERS) if isinstance(peer, NodePeer) else set()
    assert set(rows) == {"bullmq_worker", "fused", "two_call", *node_drivers}
    for row in rows.values():
        assert row["protocol"] == "bullmq" and row["audit_ok"] == "True" and row["prefilled_jobs"] == "1100"
        assert row["jobs"] == "100" or row["driver"] in node_drivers  # Node's window: see test_bullmq_node
        assert float(row["jobs_per_s"]) > 0 and float(row["client_cpu_us_per_job"]) > 0
        assert float(row["foreign_cpu_pct"]) >= 0 and row["contended"] in ("True", "False")  # watched
        # Redis's own CPU over the window (INFO cpu) ran the window's jobs; the driver's judged
        assert float(row["redis_cpu_pct"]) > 0 and row["saturated"] in ("True", "False")
    assert rows["bullmq_worker"]["concurrency"] == "8"
    # BullMQ's Worker finishes with fetch next off, then fetches: two script calls a job
    assert 2.0 <= float(rows["bullmq_worker"]["redis_calls_per_job"]) <= 2.1
    assert float(rows["fused"]["redis_calls_per_job"]) == 1.0
    assert float(rows["two_call"]["redis_calls_per_job"]) == (2 * 100 - 1) / 100  # no fetch after the last
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["bullmq_worker"]["window_from"] == 1000 and "lock 30 s" in meta["bullmq_worker"]["options"]
    shas = meta["protocols"]["bullmq"]["script_shas"]
    assert meta["bullmq_worker"]["scripts_called"] == {
        "moveToActive-11.lua": shas["move_to_active"], "moveToFinished-14.lua": shas["move_to_finished"],
    }  # fmt: skip
    assert meta["bullmq_worker"]["python_bullmq"] == REQUIRED_VERSION
    node = meta["bullmq_worker"]["node"]
    if not isinstance(peer, NodePeer):
        assert node == {"absent": peer}
        return
    assert (node["bullmq"], node["ioredis"], node["node"]) == (peer.bullmq, peer.ioredis, peer.node_version)
    called = node["scripts_called"]  # the Node package's own SHAs, not the Python port's
    assert {"moveToActive-11.lua", "moveToFinished-14.lua", "moveStalledJobsToWait-9.lua"} <= set(called)
    assert called == {name: peer.scripts[name] for name in called}
    assert (
        float(rows["node_worker"]["redis_calls_per_job"])
        < 1.5
        < float(rows["node_manual_two_call"]["redis_calls_per_job"])
    )


def test_the_bullmq_worker_stage_is_skipped_without_bullmq(tmp_path: Path, settings, monkeypatch):
    monkeypatch.setenv("REDIS_URL", settings.url)
    results = tmp_path / "results"
    assert (
        bench_main(["run", "--profile", "smoke", "--stages", "bullmq_worker", "--results", str(results)]) == 0
    )
    [run_dir] = list(results.iterdir())
    assert not (run_dir / "bullmq_worker.csv").exists()


@pytest.mark.locust
@pytest.mark.slow
def test_finish_fetch_alternates_the_protocols_and_audits_bullmqs_queue(
    tmp_path: Path, settings, redis_server, capsys
):
    from bench.harness.context import RunContext
    from bench.harness.profile import FinishFetchOptions
    from bench.harness.server import ServerInfo
    from bench.stages.finish_fetch.stage import run_stage

    quick = FinishFetchOptions(
        strategies=("fused", "two_call"),
        repetitions=1,
        workers=(2,),
        rtt_ms=(0.0,),
        batch_size=20,
        payload_bytes=20,
        warmup_s=0.1,
        measure_s=0.5,  # counts: hundreds of jobs a window, round trips a job well within their bounds
        fidelity_calls=0,  # the fidelity check is no protocol's: tests/test_finish_fetch.py runs it
        raw_driver=False,  # the raw driver and reference loops: tests/test_finish_fetch.py runs them
    )
    server = ServerInfo(redis_server.url, redis_server.source, redis_server.binary, redis_server.version())
    profile = Profile("quick", protocols=("echomq", "bullmq"), finish_fetch=quick)
    run_stage(RunContext(profile, settings, server, tmp_path))
    rows = csv_rows(tmp_path / "finish_fetch.csv")
    assert [(r["protocol"], r["strategy"]) for r in rows] == [
        ("echomq", "fused"), ("echomq", "two_call"), ("bullmq", "fused"), ("bullmq", "two_call"),
    ]  # fmt: skip
    for row in rows:
        assert row["audit_ok"] == "True" and int(row["jobs"]) > 50, row
    bullmq = {r["strategy"]: r for r in rows if r["protocol"] == "bullmq"}
    assert 0.95 <= float(bullmq["fused"]["round_trips_per_job"]) <= 1.2
    assert 1.95 <= float(bullmq["two_call"]["round_trips_per_job"]) <= 2.3
    for metric in ("cycle", "e2e"):
        assert (tmp_path / "hdr" / f"finish_fetch__bullmq.fused-w2-rtt0__r1__{metric}.hdr").is_file()
    summary = json.loads((tmp_path / "locust" / "bullmq.two_call-w2-rtt0__r1_summary.json").read_text())
    assert summary["settings"]["protocol"] == "bullmq"
    out = capsys.readouterr().out
    assert "echomq: backlog, workers 2" in out and "bullmq: backlog, workers 2" in out  # a block a protocol


def test_a_wrong_bullmq_version_stops_a_run_in_one_line_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    import sys
    from importlib import metadata

    from bench.protocol import base as registry

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "3.5.0" if name == "bullmq" else real(name))
    monkeypatch.setattr(registry, "_LOADED", {})
    monkeypatch.delitem(sys.modules, "bench.protocol.bullmq", raising=False)
    results = tmp_path / "results"
    assert bench_main(["race", "--profile", "smoke", "--protocols", "bullmq", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"echomq-bench: error: the bullmq protocol needs bullmq {REQUIRED_VERSION}, but 3.5.0 is installed; "
        f"run `make venv` (or pip install bullmq=={REQUIRED_VERSION})"
    ]
    assert not results.exists()  # nothing was started or written


def test_a_window_that_counted_no_job_is_one_line_not_a_division_by_zero() -> None:
    """The last completions can overtake the window's first mark on a loaded machine (a window of
    one job at bullmq-worker-jobs 1001): the row says so in one line."""
    from bench.stages.bullmq_worker.plan import Point
    from bench.stages.bullmq_worker.rows import row_of
    from bench.stages.bullmq_worker.worker_process import WorkerProcessResult

    empty = WorkerProcessResult("node_worker", 1, 0, 0.0, 0.01, {}, {}, 0.0, [])
    with pytest.raises(BenchError, match=r"its window counted 0 jobs.*raise bullmq-worker-jobs"):
        row_of(Point("node_worker", 1), 1, empty, 0.0, True, 1001)
