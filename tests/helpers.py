"""Small helpers the tests share."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
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


# A busy loop that takes only what the machine leaves. nice alone does not do it: with autogroup
# scheduling (Linux's default on a desktop) a niced process competes inside its session's group, and
# that group weighs as much as any other whenever the test beside it waits. So the loop takes a
# session of its own and nices that session's group too (where the kernel has none, nice stands).
IDLE_HOG = """
import os
os.nice(19)
try:
    with open("/proc/self/autogroup", "w") as group:
        group.write("19")
except OSError:
    pass
while True:
    pass
"""


@contextmanager
def idle_hog() -> Iterator[None]:
    """A process that wants a whole core and takes only what the machine leaves: a core of a quiet
    one, little from the suite's other tests."""
    hog = subprocess.Popen([sys.executable, "-c", IDLE_HOG], start_new_session=True)
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


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


# The process ForkedCommands starts: it loads the modules named after the first (what every
# `python -m <module>` run of it would load), then for each request (a JSON line on stdin) forks a
# child that runs the module as `python -m` does, in the request's folder and environment, with
# stdin from /dev/null and stdout and stderr to the request's files; it replies with the child's
# pid, then the exit code the interpreter would have given it.
FORK_SERVER = """
import importlib, importlib.util, json, os, runpy, sys, traceback
module, preload = sys.argv[1], sys.argv[2:]
for name in preload:
    importlib.import_module(name)
program = importlib.util.find_spec(module + ".__main__").origin  # sys.argv[0] under -m
replies = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    ask = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.chdir(ask["cwd"])
        os.environ.clear()
        os.environ.update(ask["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, ask["out"]), (2, ask["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv = [program, *ask["args"]]
        code = 0
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    replies.write(f"{pid}\\n")
    replies.flush()
    replies.write(f"{os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}\\n")
    replies.flush()
"""


# What `python -m locust -f bench/locustfile.py` loads before it reads its options: Locust (with
# gevent) and the locustfile's own imports (the locustfile itself loads in each fork, as Locust
# loads it, and installs its hooks there).
LOCUST_LOADS = (
    "locust.main",
    "bench.stages.finish_fetch.in_locust.hooks",
    "bench.stages.finish_fetch.in_locust.user",
)
# What `python -m bench <command>` loads for the commands the tests run to a refusal.
BENCH_LOADS = ("bench.run", "bench.harness.run_keys", "bench.harness.run_folder")


class ForkedCommands:
    """`python -m <module> <args>`, each run as a fork of one process that loaded ``preload`` once:
    a command that ends at once (a bad option, a refused input) costs a fork, not Python's and the
    module's imports again. Each gives what subprocess.run(..., capture_output=True, text=True)
    would. Close it (or use it as a context manager) to end the process.

    A fork's environment may differ from the one the process started in only in variables read when
    a command runs (READ_WHEN_RUN): a preloaded module that read one at import (bench/results/files.py
    reads EMQ_RESULTS_DIR) would keep the process's value, and a fork would not run as `python -m`."""

    READ_WHEN_RUN = frozenset({"REDIS_URL", "PYTEST_CURRENT_TEST"})  # and pytest's: read by none

    def __init__(self, module: str, preload: Iterable[str], folder: Path, cwd: Path) -> None:
        self.module, self.folder, self.cwd, self.count = module, folder, cwd, 0
        self.env = dict(os.environ)  # the process's, as its modules load
        self.process = subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER, module, *preload],
            cwd=cwd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def run(
        self, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        env = dict(os.environ) if env is None else env
        changed = {k for k in env.keys() | self.env.keys() if env.get(k) != self.env.get(k)}
        assert changed <= self.READ_WHEN_RUN, f"a fork cannot change {sorted(changed - self.READ_WHEN_RUN)}"
        ask = {"args": args, "env": env, "cwd": str(cwd or self.cwd), "out": str(out), "err": str(err)}
        self.process.stdin.write(json.dumps(ask) + "\n")
        self.process.stdin.flush()
        pid = int(self.process.stdout.readline())
        command = [sys.executable, "-m", self.module, *args]
        killed = threading.Event()

        def kill() -> None:  # as subprocess.run's timeout does
            killed.set()
            os.kill(pid, signal.SIGKILL)

        late = threading.Timer(timeout, kill)
        late.start()
        try:
            code = int(self.process.stdout.readline())
        finally:
            late.cancel()
        if killed.is_set():
            raise subprocess.TimeoutExpired(command, timeout)
        return subprocess.CompletedProcess(command, code, out.read_text(), err.read_text())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> ForkedCommands:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
