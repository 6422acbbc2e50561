"""Faults injected while the finish_fetch load stage runs, against a real redis-server.

Each test starts `python -m bench run --stages finish_fetch` (what `make bench`
runs) on a tiny profile, pointed by REDIS_URL at a server the test owns, waits
until Locust's measured window is open, injects one fault and checks what a
user would: the exit code, the one line that says what happened, the files
(meta.json, finish_fetch.csv, the run's summary), the errors counted by kind,
and that no process of the run is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from bench.harness.children import group_alive
from bench.harness.server import EmbeddedRedis
from bench.protocol.keys import QueueKeys
from bench.report.cli import report_main
from tests.helpers import csv_rows, wait_until

REPO = Path(__file__).resolve().parent.parent
WINDOW_OPEN = "window 1 opened"  # Locust's log line once warm-up is over and measuring began
START_DEADLINE_S = 30.0  # python + Locust start on a busy 2-core machine
END_DEADLINE_S = 40.0  # the run ends, or finishes its window, within this after the fault

# An open-loop trickle (5 batches of 20 a second) where a fault needs the load running, not a
# backlog's full speed: jobs go on being added and done around the fault, and the window costs a
# fraction of a backlog's CPU.
TRICKLE = 100

pytestmark = pytest.mark.timeout(90)  # past START_DEADLINE_S + END_DEADLINE_S: their message, not ours


def tiny_profile(folder: Path, measure_s: float, **keys: Any) -> Path:
    """One finish_fetch run (fused, one repetition): long enough to inject a fault in its window."""
    lines = {
        "stages": "finish_fetch",
        "strategies": "fused",
        "repetitions": 1,
        "workers": 2,
        "producers": 1,
        "batch-size": 20,
        "payload-bytes": 20,
        "warmup-s": 0.1,
        "measure-s": measure_s,
        "rtt-ms": 0,
        "raw-driver": "false",  # no calibration runs after it: the fault is in the Locust run
        # a small backlog: the producers add all through the window, so "jobs added after the
        # fault" shows the run carried on
        "backlog-jobs": 100,
        "backlog-producers": 1,
        "backlog-batch-size": 20,
        "fidelity-calls": 0,
        **{key.replace("_", "-"): value for key, value in keys.items()},
    }
    path = folder / "tiny.conf"
    path.write_text("".join(f"{key} = {value}\n" for key, value in lines.items()))
    return path


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, by the parent's pid: one look at /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(pid: int) -> set[int]:
    """``pid``'s children, theirs and so on, from one look at /proc (the tests poll it)."""
    children = children_by_parent()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass
class BenchRun:
    """`python -m bench run` in a session of its own, its output in files the test can poll."""

    folder: Path
    profile: Path
    redis_url: str | None
    process: subprocess.Popen[bytes] = field(init=False)
    family: set[int] = field(default_factory=set)  # every process of the run seen while it ran
    flags: tuple[str, ...] = ()  # more of `bench run`'s options

    def __post_init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        self.results = self.folder / "results"
        command = [sys.executable, "-m", "bench", "run", "--profile", str(self.profile)]
        command += ["--results", str(self.results), *self.flags]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=(self.folder / "stdout.txt").open("wb"),
            stderr=(self.folder / "stderr.txt").open("wb"),
            start_new_session=True,  # its own group, as a shell gives a foreground job
        )

    @property
    def run_dir(self) -> Path:
        found = [p for p in self.results.iterdir() if p.is_dir()] if self.results.exists() else []
        assert len(found) == 1, found
        return found[0]

    def _window_open(self) -> bool:
        assert self.process.poll() is None, f"the run ended early:\n{self.stderr}"
        logs = list(self.results.glob("*/locust/*.log")) if self.results.exists() else []
        return any(WINDOW_OPEN in log.read_text(errors="replace") for log in logs)

    def wait_for_window(self, jobs: int = 20) -> None:
        """Until Locust measures and has finished ``jobs`` jobs in its window; then note every
        process of the run, to check none outlives it."""
        wait_until(self._window_open, START_DEADLINE_S, "Locust's measured window to open")
        client = redis.Redis.from_url(self.meta()["redis_url"])
        try:
            start = finished_jobs(client)
            wait_until(lambda: finished_jobs(client) >= start + jobs, 15, f"{jobs} jobs in the window")
        finally:
            client.close()
        self.family = descendants(self.process.pid) | {self.process.pid}
        assert len(self.family) >= 2, "Locust should be running under the run"

    def finish(self) -> int:
        code = self.process.wait(timeout=END_DEADLINE_S)
        deadline = time.monotonic() + 5
        while any(pid_alive(p) for p in self.family) and time.monotonic() < deadline:
            time.sleep(0.02)
        left = sorted(p for p in self.family if pid_alive(p))
        assert not left, f"processes of the run left behind: {left}"
        return code

    @property
    def stderr(self) -> str:
        return (self.folder / "stderr.txt").read_text(errors="replace")

    def last_line(self) -> str:
        """The run's one closing line (a run that may have left keys names them on a line after it,
        tests/test_run_keys.py)."""
        assert "Traceback" not in self.stderr, self.stderr
        lines = self.stderr.strip().splitlines()
        if lines and lines[-1].endswith(" removes them") and "echomq-bench clean " in lines[-1]:
            lines.pop()
        assert lines, "nothing on stderr"
        errors = [line for line in lines if line.startswith("echomq-bench:")]
        assert errors == [lines[-1]], f"one closing line expected:\n{self.stderr}"
        return lines[-1]

    def meta(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "meta.json").read_text())
        return data

    def rows(self) -> list[dict[str, str]]:
        return csv_rows(self.run_dir / "finish_fetch.csv")

    def summary(self) -> dict[str, Any]:
        (path,) = self.run_dir.glob("locust/*_summary.json")
        data: dict[str, Any] = json.loads(path.read_text())
        return data


def report(run_dir: Path) -> str:
    """`echomq-bench report` on a run folder, in this process (its caller asks for
    ``figures_undrawn``: the text is what is read); the report.md it wrote."""
    assert report_main([str(run_dir)]) == 0
    return (run_dir / "report.md").read_text()


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    """A server of this test's own, so it can be killed, restarted or paused."""
    with EmbeddedRedis() as own:
        yield own


@pytest.fixture
def admin(server: EmbeddedRedis) -> Iterator[redis.Redis]:
    """The test's own connection to that server (CLIENT KILL skips it)."""
    client = redis.Redis(port=server.port, socket_timeout=30)
    yield client
    client.close()


def finished_jobs(client: redis.Redis) -> int:
    """Jobs completed so far on the run's finish_fetch queues."""
    return sum(int(client.zcard(key)) for key in client.scan_iter(match="emq:{*ff-*}:completed"))


def jobs_issued(admin: redis.Redis) -> int:
    """The id counter of the run's queue: grows while producers add jobs."""
    keys = list(admin.scan_iter(match="emq:{*ff-*}:id"))
    return int(admin.get(keys[0]) or 0) if keys else 0


def assert_carried_on(admin: redis.Redis, run: BenchRun) -> None:
    """Jobs are still being added after the fault: the run went on, it did not stall. On a loaded
    machine the window may close first (the fault noticed late, the run's keys then deleted):
    then its summary, which the test checks next, says whether the run completed."""
    before = jobs_issued(admin)

    def went_on() -> bool:
        return jobs_issued(admin) > before or bool(list(run.results.glob("*/locust/*_summary.json")))

    wait_until(went_on, 15, "producers to add jobs after the fault, or the window to close")


def assert_completed_with(run: BenchRun, code: int, kinds: set[str]) -> dict[str, int]:
    """A run that carried on: exit 0, complete, audited, the errors counted by the kinds given."""
    assert code == 0, run.stderr
    assert run.meta()["complete"] is True and run.meta()["stages_done"] == ["finish_fetch"]
    (row,) = run.rows()
    assert row["audit_ok"] == "True" and int(row["jobs"]) > 0, row
    summary = run.summary()
    by_kind: dict[str, int] = summary["derived"]["errors_by_kind"]
    assert set(by_kind) == kinds, by_kind
    assert run.meta()["finish_fetch"]["errors"] == by_kind
    assert run.meta()["finish_fetch"]["audit_failures"] == {}
    assert summary["derived"]["errors"] == sum(by_kind.values())
    return by_kind


def assert_stopped(run: BenchRun, code: int, *words: str) -> str:
    """A run that ended early: exit 2, one closing line, meta.json incomplete with the reason,
    and the row of what it measured written."""
    assert code == 2, run.stderr
    line = run.last_line()
    assert line.startswith("echomq-bench: error: finish_fetch run fused w2-rtt0 rep 1 stopped:"), line
    assert all(word in line for word in words), line
    meta = run.meta()
    assert meta["complete"] is False and meta["stages_done"] == []
    assert all(word in meta["reason"] for word in words), meta["reason"]
    (row,) = run.rows()
    assert row["audit_ok"] == "False" and int(row["jobs"]) > 0, row
    summary = run.summary()
    assert summary["complete"] is False and all(word in summary["aborted"] for word in words)
    return line


@pytest.mark.locust
@pytest.mark.slow
def test_a_restart_on_the_same_port_ends_the_run_and_the_audit_says_the_data_is_gone(
    tmp_path: Path, server: EmbeddedRedis, figures_undrawn: None
):
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=30), server.url)
    run.wait_for_window()
    server.restart()
    code = run.finish()
    assert_stopped(run, code, "restarted", "its data is gone")
    summary = run.summary()
    # The audit neither counts the jobs lost nor calls them conserved.
    assert summary["audit"]["ok"] is False
    assert summary["audit"]["verdict"].startswith("server restarted"), summary["audit"]
    assert "missing" not in summary["audit"]["verdict"]
    (verdict,) = run.meta()["finish_fetch"]["audit_failures"].values()
    assert verdict.startswith("server restarted: its data is gone"), verdict
    # `report` shows the run incomplete, and the audit's words rather than "jobs lost".
    text = report(run.run_dir)
    assert "Incomplete run" in text and "server restarted: its data is gone" in text
    assert "jobs lost or duplicated" not in text


@pytest.mark.locust
@pytest.mark.slow
def test_script_flush_is_counted_and_the_run_carries_on(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
):
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=3, target_rate=TRICKLE), server.url)
    run.wait_for_window()
    admin.script_flush()
    assert_carried_on(admin, run)  # the producer loaded addJob again; the workers' scripts reload themselves
    by_kind = assert_completed_with(run, run.finish(), {"noscript"})
    assert by_kind["noscript"] >= 1
    assert admin.dbsize() == 0  # the run deleted its queue's keys, as after any run


@pytest.mark.locust
@pytest.mark.slow
def test_client_kill_drops_the_workers_connections_and_the_run_carries_on(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
):
    # The workers wait for jobs in BZPOPMIN, so the kill drops calls in flight, and each must be
    # counted, not re-sent.
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=3, target_rate=TRICKLE), server.url)
    run.wait_for_window()

    def a_worker_blocked() -> bool:
        return any(c["cmd"] == "bzpopmin" and "b" in c["flags"] for c in admin.client_list())

    # Twice: a worker's 50 ms wait may end between CLIENT LIST and CLIENT KILL (rarely, under load).
    for kill in range(2):
        wait_until(a_worker_blocked, 10, "a worker blocked in BZPOPMIN")
        killed = admin.client_kill_filter(_type="normal")  # every client but this one
        assert kill > 0 or killed >= 4  # 3 Locust users and the controller, at least
    assert_carried_on(admin, run)  # each client reconnects on its next call
    by_kind = assert_completed_with(run, run.finish(), {"connection"})
    assert by_kind["connection"] >= 1  # each counted once: the client has no retries
    assert admin.dbsize() == 0


@pytest.mark.locust
@pytest.mark.slow
def test_client_pause_holds_every_client_for_two_seconds_and_the_run_carries_on(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
):
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=3.5, target_rate=TRICKLE), server.url)
    run.wait_for_window()
    admin.client_pause(2000)
    assert_carried_on(admin, run)
    # Within the 30 s socket timeout a pause is only a slow reply: nothing fails.
    assert_completed_with(run, run.finish(), set())
    assert admin.dbsize() == 0


BUSY_LUA = "local t = redis.call('TIME'); local stop = t[1] * 1e6 + t[2] + ARGV[1] * 1e3 " + (
    "repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] >= stop; return 1"
)


@pytest.mark.locust
@pytest.mark.slow
def test_a_call_longer_than_the_socket_timeout_is_counted_once_and_never_resent(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
):
    # The load's clients wait 0.3 s for a reply; a script from another client holds Redis 1.2 s
    # (below Redis's 5 s busy threshold), so the calls in flight run late and time out.
    profile = tiny_profile(tmp_path, measure_s=3, socket_timeout_s=0.3, target_rate=TRICKLE)
    run = BenchRun(tmp_path, profile, server.url)
    run.wait_for_window()
    admin.eval(BUSY_LUA, 0, 1200)
    assert_carried_on(admin, run)
    # Only timeouts: a timed-out moveToFinished sent again would fail (the job is no longer
    # active) and count as a protocol error; a re-sent addJob batch would break the audit.
    by_kind = assert_completed_with(run, run.finish(), {"timeout"})
    assert by_kind["timeout"] >= 1
    assert run.summary()["settings"]["socket_timeout_s"] == 0.3


@pytest.mark.locust
@pytest.mark.slow
def test_ctrl_c_during_bench_run_keeps_what_was_measured_and_leaves_no_process(tmp_path: Path):
    # No REDIS_URL: the run starts its own redis-server, which must not outlive it either.
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=30), None)
    run.wait_for_window()
    names = {Path(f"/proc/{p}/comm").read_text().strip() for p in run.family if pid_alive(p)}
    assert "redis-server" in names, names
    os.killpg(run.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does to the foreground job
    code = run.finish()
    assert code == 130, run.stderr
    assert run.last_line() == f"echomq-bench: interrupted; partial results in {run.run_dir}"
    meta = run.meta()
    assert meta["complete"] is False and meta["reason"] == "interrupted (Ctrl-C)"
    (row,) = run.rows()  # the interrupted repetition's measurements, marked unaudited
    assert int(row["jobs"]) > 0 and row["audit_ok"] == "False", row
    assert run.summary()["aborted"] == "interrupted (SIGINT)"
    (note,) = meta["finish_fetch"]["audit_failures"].values()
    assert note.startswith("cut short (interrupted (Ctrl-C)); the queue itself: ok"), note


@pytest.mark.locust
def test_ctrl_c_during_a_headless_locust_run_writes_its_summary_and_stops_every_process(
    tmp_path: Path, server: EmbeddedRedis, admin: redis.Redis
):
    summary_path = tmp_path / "run_summary.json"
    command = [sys.executable, "-m", "locust", "-f", "bench/locustfile.py", "--headless"]
    command += ["--only-summary", "--processes", "2", "--workers", "2", "--warmup-s", "0.3"]
    command += ["--measure-s", "30", "--summary-json", str(summary_path), "--queue", "ctrl-c"]
    log_path = tmp_path / "locust.txt"
    env = {**os.environ, "REDIS_URL": server.url}
    with log_path.open("wb") as log:
        locust = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until(lambda: WINDOW_OPEN in log_path.read_text(), START_DEADLINE_S, "the window to open")
        done = QueueKeys("ctrl-c").completed
        measured_from = admin.zcard(done)
        wait_until(lambda: admin.zcard(done) > measured_from + 100, 15, "jobs done in the window")
        family = descendants(locust.pid)
        assert len(family) >= 2, "two Locust worker processes"
        os.killpg(locust.pid, signal.SIGINT)  # the terminal sends it to master and workers alike
        code = locust.wait(timeout=END_DEADLINE_S)
    finally:
        if locust.poll() is None:
            os.killpg(locust.pid, signal.SIGKILL)
            locust.wait()
    assert code == 130
    said = [line for line in log_path.read_text().splitlines() if "echomq: run stopped early" in line]
    assert len(said) == 1 and "interrupted (SIGINT)" in said[0], said
    summary = json.loads(summary_path.read_text())
    assert summary["complete"] is False and summary["aborted"] == "interrupted (SIGINT)"
    assert summary["derived"]["jobs"] > 0 and summary["missing_processes"] == []
    wait_until(lambda: not group_alive(locust.pid), 5, "Locust's processes to be gone")
    assert not any(pid_alive(p) for p in family)


@pytest.mark.locust
@pytest.mark.slow
def test_redis_killed_during_warm_up_still_ends_with_one_line(tmp_path: Path, server: EmbeddedRedis):
    # Before the window: nothing measured, so no row; still bounded, one line, meta incomplete.
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=30, warmup_s=30), server.url)

    def warming_up() -> bool:
        logs = list(run.results.glob("*/locust/*.log")) if run.results.exists() else []
        return any("then measuring" in log.read_text(errors="replace") for log in logs)

    wait_until(warming_up, START_DEADLINE_S, "Locust's warm-up to begin")
    run.family = descendants(run.process.pid) | {run.process.pid}
    server.kill()
    code = run.finish()
    assert code == 2, run.stderr
    line = run.last_line()
    assert line.startswith("echomq-bench: error: Locust run fused-w2-rtt0__r1 stopped before"), line
    assert "unreachable" in line
    assert run.meta()["complete"] is False and "unreachable" in run.meta()["reason"]
    summary = run.summary()  # the load side's own word for why, which the line above repeats
    assert summary["measured"] is False and summary["complete"] is False, summary
    assert f"Redis at 127.0.0.1:{server.port} unreachable" in summary["aborted"], summary
    assert summary["aborted"] in line


def sweep_run(folder: Path, redis_url: str | None) -> BenchRun:
    """The sweep stage alone, on sizes that keep pyperf busy for several seconds."""
    profile = folder / "sweep.conf"
    profile.write_text(
        "stages = sweep\nsweep-variants = atomic, app_side\nsweep-scenarios = healthy\n"
        "sweep-sizes = 1000, 10000\nsweep-reps = 2\n"
    )
    return BenchRun(folder, profile, redis_url)


def wait_for_sweep_processes(run: BenchRun) -> None:
    """Until pyperf, its worker and the worker's probe (all the pyperf program) run; then note them."""

    def sweeping() -> int:
        assert run.process.poll() is None, f"the run ended early:\n{run.stderr}"
        found = 0
        for pid in descendants(run.process.pid):
            try:
                found += b"bench.stages.sweep.pyperf_program" in Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
        return found

    wait_until(lambda: sweeping() >= 3, START_DEADLINE_S, "pyperf, a worker and a probe")
    run.family = descendants(run.process.pid) | {run.process.pid}


@pytest.mark.slow
def test_sigkill_of_redis_during_the_sweep_stage_ends_it_in_seconds(tmp_path: Path, server: EmbeddedRedis):
    # The sweep worker waits for a busy Redis after a failed sweep; a refused one is gone, not busy.
    run = sweep_run(tmp_path, server.url)
    wait_for_sweep_processes(run)
    server.kill()
    code = run.finish()
    assert code == 2, run.stderr
    line = run.last_line()
    assert line.startswith("echomq-bench: error: Redis failed during sweep: ConnectionError"), line
    assert f"partial results in {run.run_dir}" in line
    meta = run.meta()
    assert meta["complete"] is False and meta["reason"].startswith("Redis failed during sweep")


@pytest.mark.slow
def test_ctrl_c_during_the_sweep_stage_stops_pyperf_its_worker_and_the_probe(tmp_path: Path):
    run = sweep_run(tmp_path, None)
    wait_for_sweep_processes(run)
    os.killpg(run.process.pid, signal.SIGINT)
    code = run.finish()
    assert code == 130, run.stderr
    assert run.last_line() == f"echomq-bench: interrupted; partial results in {run.run_dir}"
    meta = run.meta()
    assert meta["complete"] is False and meta["reason"] == "interrupted (Ctrl-C)"
    assert meta["stages_done"] == []


SWEEPER_WITH_A_PROBE = """
import sys, time
from bench.protocol.connection import RedisSettings
from bench.stages.sweep.probe import Probe
probe = Probe(RedisSettings.from_url(sys.argv[1]), 100).start()
probe.begin()
print(probe._process.pid, flush=True)
time.sleep(60)
"""


def test_a_probe_leaves_when_its_sweeping_process_is_killed(server: EmbeddedRedis):
    # SIGKILL runs no clean-up in the sweeper: the probe must see the pipe close and exit by itself.
    sweeper = subprocess.Popen(
        [sys.executable, "-c", SWEEPER_WITH_A_PROBE, server.url], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert sweeper.stdout is not None
        probe_pid = int(sweeper.stdout.readline())
        assert pid_alive(probe_pid)
        sweeper.kill()
        sweeper.wait(timeout=10)
        wait_until(lambda: not pid_alive(probe_pid), 10, "the orphaned probe to exit")
    finally:
        if sweeper.poll() is None:
            sweeper.kill()
            sweeper.wait()
