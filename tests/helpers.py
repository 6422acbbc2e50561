"""Small helpers the tests share."""

from __future__ import annotations

import csv
import dataclasses
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest

from bench.errors import BenchError
from bench.report.verdict import Sample
from bench.results.finish_fetch import FinishFetchRow


def ids(values: Iterable[Any]) -> list[str]:
    """Redis replies (bytes or str) as text."""
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def csv_rows(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows, each by its columns."""
    with path.open() as handle:
        return list(csv.DictReader(handle))


def steady(mean: float, spread: float = 0.01) -> Sample:
    """A figure measured three times, ``spread`` either side of ``mean``."""
    return Sample.of([mean, mean * (1 + spread), mean * (1 - spread)])


def tree_roots() -> list[int]:
    """The roots of the process table (init, kthreadd): as own, every process on the machine is."""
    return [p.pid for p in psutil.process_iter(["ppid"]) if not p.info["ppid"]]


def gone(pid: int) -> bool:
    """True when ``pid`` has ended (no process, or a zombie left for its parent to reap)."""
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


Made = TypeVar("Made")


def made_from(make: Callable[[Any], Made], source: str) -> Made:
    """``make(source)``, or the test skipped where this machine has no redis-server from ``source``."""
    try:
        return make(source)
    except BenchError:
        pytest.skip(f"no redis-server from {source} on this machine")


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail the test with ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


# The protocols the contract tests of lua/ run against (a module's params fixture
# ``protocol_name`` overrides conftest's, which opens echomq alone).
PROTOCOL_NAMES = ("echomq", "echomq-deadline")


def race_anomalies(found: Any) -> tuple[int, int, int, int]:
    """A race run's counts that an atomic sweep keeps at zero: double recoveries, lost attempt
    updates, finished jobs requeued, audit violations."""
    return (
        found.double_recoveries,
        found.lost_attempt_updates,
        found.requeued_after_finish,
        found.audit_violations,
    )


def has_deadlines(queue: Any) -> bool:
    """True when the queue's protocol keeps a deadline index (echomq-deadline)."""
    from bench.protocol.deadline import EchoMQDeadline

    return isinstance(queue.protocol, EchoMQDeadline)


def cpu_s(pid: int) -> float:
    """The CPU seconds process ``pid`` has used so far."""
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


# Starts a busy loop, says its pid and exits: the loop is left re-parented to init, outside
# the test process's family (a run watching its own pid must see it as foreign).
DETACHED_HOG = """
import subprocess, sys
hog = [sys.executable, "-c", "while True: pass"]
quiet = subprocess.DEVNULL  # no pipe of ours held open
print(subprocess.Popen(hog, start_new_session=True, stdin=quiet, stdout=quiet, stderr=quiet).pid)
"""


def all_but(process: psutil.Process) -> list[int]:
    """Every process on the machine but ``process`` and its ancestors: as a watch's roots, they make
    ``process`` the one foreign process that ran before the window, however busy the machine is
    (other busy processes are own, so none can push it out of a check's busiest)."""
    skip = {process.pid, *(p.pid for p in process.parents())}
    return [p.pid for p in psutil.process_iter() if p.pid not in skip]


@contextmanager
def cpu_hog() -> Iterator[psutil.Process]:
    """A busy loop outside the test's process family, running: one core's worth of foreign CPU."""
    out = subprocess.run([sys.executable, "-c", DETACHED_HOG], capture_output=True, text=True, check=True)
    process = psutil.Process(int(out.stdout))
    try:
        wait_until(lambda: cpu_s(process.pid) > 0.05, what="the hog to run")
        yield process
    finally:
        process.kill()
        # Dead once a zombie: init reaps it in its own time (psutil's wait for it takes a second).
        wait_until(lambda: not _running(process), timeout_s=10, what="the hog to die")


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def finish_fetch_row(**changes: Any) -> FinishFetchRow:
    """A finish_fetch row of round figures (echomq fused, rep 1, 2 workers, rtt 0), with ``changes``."""
    base = FinishFetchRow(
        run_id="r", protocol="echomq", profile="quick", strategy="fused", rep=1, workers=2, producers=1,
        rtt_ms=0.0, batch_size=20, payload_bytes=20, target_rate=0.0, warmup_s=0.3, measure_s=1.0,
        duration_s=1.0, jobs=100, jobs_per_s=100.0, round_trips_per_job=1.0, server_calls_per_job=1.0,
        server_us_per_job=10.0, cycle_p50_us=50, cycle_p90_us=60, cycle_p99_us=70, cycle_p999_us=80,
        cycle_max_us=90, e2e_p50_us=100, e2e_p99_us=200, loadgen_cpu_pct=50.0, saturated=False,
        audit_ok=True,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def run_copy(run: Path, into: Path) -> Path:
    """A copy of a published run under ``into``, by the same name: a test may mark its cells."""
    copy = into / run.name
    shutil.copytree(run, copy)
    return copy
