"""A run that meets a sick Redis stops at once and says why: real servers with their own flags.

Each test starts `python -m bench run` (tests/test_faults.py's BenchRun) against a server of its
own: full (maxmemory), a read-only replica, a user without write rights, one still loading. It
checks the exit code, the one closing line, meta.json, which stages ran, and that nothing of
the run is left running.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from bench.errors import BenchError
from bench.harness.headroom import check_headroom, measure_need
from bench.harness.profile import load_profile
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings
from bench.protocol.refusal import refusal, replica_line
from tests.helpers import wait_until
from tests.test_faults import BenchRun, descendants, report, tiny_profile

pytestmark = pytest.mark.timeout(90)

SWEEP_KEYS = {  # a sweep stage after the load stage: it must not start after a refusal
    "stages": "finish_fetch, sweep",
    "sweep_variants": "atomic",
    "sweep_scenarios": "healthy",
    "sweep_sizes": 10,
    "sweep_reps": 1,
}


def note_family(run: BenchRun) -> None:
    """Once Locust runs under the run: every process of it, to check none outlives it."""

    def locust_started() -> bool:
        assert run.process.poll() is None, f"the run ended before Locust started:\n{run.stderr}"
        return len(descendants(run.process.pid)) >= 1

    wait_until(locust_started, 30, "Locust to start under the run")
    run.family = descendants(run.process.pid) | {run.process.pid}


def cmdline(pid: int) -> str:
    """A process's command line, or '' once it is gone."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def assert_refused_oom(run: BenchRun) -> None:
    """Exit 2, one line naming OOM and maxmemory, the folder incomplete with no stage done."""
    code = run.finish()
    line = run.last_line()
    print(f"exit {code}: {line}")
    assert code == 2
    assert "OOM" in line and "maxmemory" in line and len(line) <= 100, line
    meta = run.meta()
    assert meta["complete"] is False and meta["reason"] in line and meta["stages_done"] == []


@pytest.fixture
def full() -> Iterator[EmbeddedRedis]:
    """A server with 3 MB of maxmemory: the load stage's kept jobs fill it within seconds."""
    with EmbeddedRedis(extra_args=("--maxmemory", "3mb")) as server:
        yield server


def test_a_server_that_fills_during_the_load_stage_stops_the_run(tmp_path: Path) -> None:
    profile = tiny_profile(tmp_path, measure_s=20, **SWEEP_KEYS)
    with EmbeddedRedis() as server:
        run = BenchRun(tmp_path, profile, server.url, flags=("--skip-memory-check",))
        # The server fills once the window is open, whatever the warm-up managed: a fixed
        # maxmemory was reached in warm-up on a fast machine, and then nothing was measured.
        run.wait_for_window()
        admin = redis.Redis.from_url(server.url)
        try:
            used = int(admin.info("memory")["used_memory"])
            admin.config_set("maxmemory", used + 512 * 1024)
        finally:
            admin.close()
        note_family(run)
        assert_refused_oom(run)  # the load stage did not finish, the sweep never started
        assert not (run.run_dir / "sweep.csv").exists()
        summary = run.summary()
        assert summary["refused"] == "oom" and summary["complete"] is False
        assert summary["audit"]["verdict"].startswith("not audited: the server refused")
        assert summary["derived"]["errors_by_kind"].get("oom", 0) >= 1, summary["derived"]["errors_by_kind"]
        (row,) = run.rows()  # what was measured is written, marked as not audited
        assert row["audit_ok"] == "False"


def test_a_replica_is_refused_before_any_folder(tmp_path: Path) -> None:
    with EmbeddedRedis() as master:
        replica_args = ("--replicaof", "127.0.0.1", str(master.port))
        with EmbeddedRedis(extra_args=replica_args) as replica:
            run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=1), replica.url)
            code = run.finish()
    line = run.last_line()
    print(f"exit {code}: {line}")
    assert code == 2
    assert line == f"echomq-bench: error: {replica_line(f'127.0.0.1:{master.port}')}"
    assert not run.results.exists() or not any(run.results.iterdir())


def test_a_user_without_write_rights_is_one_line(tmp_path: Path) -> None:
    with EmbeddedRedis() as server:
        admin = redis.Redis(port=server.port)
        try:  # every command, but only keys the queue does not use
            admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~other:*", "+@all")
        finally:
            admin.close()
        url = f"redis://reader:pw@127.0.0.1:{server.port}/0"
        run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=1), url)
        code = run.finish()
    line = run.last_line()
    print(f"exit {code}: {line}")
    assert code == 2
    assert "NOPERM" in line and "ACL SETUSER" in line and len(line) <= 100, line
    assert not run.results.exists() or not any(run.results.iterdir())  # the calibration add met it


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), "oom"),
        (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), "readonly"),
        (redis.ResponseError("MISCONF Redis is configured to save RDB snapshots"), "misconf"),
        (redis.ResponseError("Error running script: The user executing the script can't run this"), "noperm"),
        (redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"), "loading"),
        (redis.exceptions.ClusterDownError("The cluster is down"), "clusterdown"),
        (redis.ResponseError("ERR Error running script: user_script:1: bad argument"), None),
        (redis.TimeoutError("Timeout reading from socket"), None),
        (redis.ConnectionError("Connection refused"), None),
    ],
)
def test_the_classifier_knows_each_refusal(reply: Exception, kind: str | None) -> None:
    found = refusal(reply)
    assert (found.kind if found else None) == kind


def test_a_server_that_fills_during_the_sweep_set_up_stops_the_run(
    tmp_path: Path, full: EmbeddedRedis
) -> None:
    keys = {**SWEEP_KEYS, "stages": "sweep, race", "sweep_sizes": 20_000}  # ~10 MB of active jobs
    profile = tiny_profile(tmp_path, measure_s=1, **keys)
    run = BenchRun(tmp_path, profile, full.url, flags=("--skip-memory-check",))
    assert_refused_oom(run)
    assert not list(run.run_dir.glob("race*"))  # the race stage never started
    assert not descendants(run.process.pid)


def test_the_estimate_refuses_a_run_that_cannot_fit_before_any_folder(
    tmp_path: Path, full: EmbeddedRedis
) -> None:
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=1, **SWEEP_KEYS), full.url)
    code = run.finish()
    line = run.last_line()
    print(f"exit {code}: {line}")
    assert code == 2
    assert "needs ~" in line and "maxmemory 3.1 MB" in line and len(line) <= 100, line
    assert not run.results.exists() or not any(run.results.iterdir())
    admin = redis.Redis(port=full.port)
    try:
        assert admin.dbsize() == 0  # the calibration queue is gone
    finally:
        admin.close()


def test_the_estimate_passes_a_run_that_fits_and_refuses_one_that_does_not(full: EmbeddedRedis) -> None:
    settings = RedisSettings.from_url(full.url)
    client = settings.connect()
    try:
        small = dataclasses.replace(
            load_profile("smoke"),
            finish_fetch=dataclasses.replace(load_profile("smoke").finish_fetch, target_rate=100.0),
        )
        fits = measure_need(client, settings, small, ["finish_fetch"], embedded=True)
        # 100 jobs/s over 0.5 + 1 + 1 s: 250 jobs, each a few hundred bytes
        assert fits.jobs == 250 and 100 < fits.bytes_per_job < 5000, fits
        assert fits.limit == "maxmemory" and fits.limit_bytes == 3 * 1024 * 1024
        check_headroom(fits)  # fits: no error
        big = measure_need(client, settings, small, ["finish_fetch", "sweep"], embedded=True)
        assert big.jobs == max(small.sweep.sweep_sizes)
        bigger = dataclasses.replace(big, jobs=20_000, need_bytes=int(20_000 * big.bytes_per_job * 2))
        with pytest.raises(BenchError, match=r"needs ~.*, maxmemory 3.1 MB leaves"):
            check_headroom(bigger)
        assert client.dbsize() == 0  # every calibration queue deleted
    finally:
        client.close()


def test_a_run_records_redis_memory_and_the_report_shows_its_peak(
    tmp_path: Path, figures_undrawn: None
) -> None:
    with EmbeddedRedis(extra_args=("--maxmemory", "500mb")) as server:
        keys = {"target_rate": 500, "raw_driver": "true"}  # estimated: (0.1 + 1 + 1) s x 500 jobs/s
        run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=1, **keys), server.url)
        code = run.finish()
    assert code == 0, run.stderr
    meta = run.meta()
    need = meta["memory_need"]
    assert need["jobs"] == 1050 and need["limit"] == "maxmemory" and need["maxmemory_bytes"] == 500 * 2**20
    assert need["need_bytes"] == int(need["jobs"] * need["bytes_per_job"] * 2)
    around = meta["redis_memory"]["finish_fetch"]
    assert set(around) == {"before", "after"}
    assert around["after"]["used_memory_peak"] >= around["before"]["used_memory"]
    (row,) = run.rows()
    # kept jobs cost memory: the window's growth is positive, a few hundred bytes a job
    assert 10_000 < float(row["redis_mem_growth_bytes_per_1k_jobs"]) < 5_000_000, row
    page = report(run.run_dir)
    peak = max(s["used_memory_peak"] for s in around.values())
    shown = f"{peak / 1e6:.1f} MB of maxmemory 524.3 MB (since the server started)"  # a REDIS_URL's
    assert f"| Redis memory peak (used_memory_peak) | {shown} |" in page
    assert "| Redis memory need, estimated before the run | ~" in page


def test_a_refusal_while_pyperf_times_the_sweep_stops_its_workers(tmp_path: Path) -> None:
    # all_stalled: every restore and every sweep writes; enough values that pyperf is still timing
    keys = {**SWEEP_KEYS, "stages": "sweep, race", "sweep_sizes": 2000, "sweep_reps": 100}
    keys["sweep_scenarios"] = "all_stalled"
    with EmbeddedRedis() as server:
        admin = redis.Redis(port=server.port)
        try:
            run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=1, **keys), server.url)

            def pyperf_started() -> bool:
                assert run.process.poll() is None, run.stderr
                return any(
                    "bench.stages.sweep.pyperf_program" in cmdline(pid)
                    for pid in descendants(run.process.pid)
                )

            wait_until(pyperf_started, 30, "pyperf to start timing the sweep")
            run.family = descendants(run.process.pid) | {run.process.pid}
            # the run's user loses its writes: the next restore or sweep is refused (NOPERM). Redis
            # 6.2 lets a script's writes past maxmemory, so a full server would not show it here.
            admin.execute_command("ACL", "SETUSER", "default", "-@write")
            code = run.finish()
        finally:
            admin.close()
    line = run.last_line()
    print(f"exit {code}: {line}")
    assert code == 2
    assert "NOPERM" in line and len(line) <= 100, line
    meta = run.meta()
    assert meta["complete"] is False and meta["reason"] in line and meta["stages_done"] == []
    assert (run.run_dir / "sweep_cost.csv").exists()  # what was measured is written
    # no step of the stage ran after the refusal (the control point follows the sizes), nor the race
    assert not (run.run_dir / "sweep_control.csv").exists()
    assert not list(run.run_dir.glob("race*"))
