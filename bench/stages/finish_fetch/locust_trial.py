"""One run of stage 1: a headless Locust child process on a fresh queue, then the audit.

Locust runs as a subprocess in a process group of its own, so gevent's monkey-patching stays out
of this process and no Locust process outlives a run. What it measured comes back in its summary
JSON, never from its log (read only for the last error of a run that crashed before writing one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import redis

from bench.errors import BenchError, first_line
from bench.harness.children import reap_group, spawn, stop_group
from bench.harness.machine import MachineSample, watch_run
from bench.harness.profile import FinishFetchOptions
from bench.paths import LOCUSTFILE, REPO
from bench.protocol.audit import AuditResult, audit_queues, master_run_ids
from bench.protocol.connection import RedisSettings
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Queue
from bench.protocol.refusal import ServerRefused
from bench.protocol.spread import homes, queue_names
from bench.results.files import FIDELITY_DIR, LOCUST_DIR, read_json
from bench.stages.finish_fetch.loadstats import issued_job_ids
from bench.stages.finish_fetch.plan import Point, point_id
from bench.stages.finish_fetch.summary import SUMMARY_KIND, SUMMARY_VERSION, TrialSummary, refused_verdict
from bench.stages.finish_fetch.trial_settings import TrialSettings

STAGE = "finish_fetch"
STARTUP_ALLOWANCE_S = 60.0  # Locust's start, the workers' connect and the final reports
# After Ctrl-C, Locust gets this long to collect the last reports and write its summary
# (its master waits up to 10 s for a worker's last delta), then its process group is killed.
INTERRUPT_GRACE_S = 15.0
INTERRUPTED = "interrupted (Ctrl-C)"


@dataclass
class TrialResult:
    strategy: str
    point: Point
    rep: int
    summary: TrialSummary
    audit: AuditResult
    files: Path  # the prefix of the run's Locust CSVs, summary and log
    protocol: str = "echomq"
    machine: MachineSample | None = None  # the machine during the measured window

    @property
    def stopped(self) -> str | None:
        """Why the run stopped before its end (Locust's own reason, or the audit's), if it did."""
        lost = self.audit.server_restarted or self.audit.server_unreachable or self.audit.lost_shards
        return self.summary.aborted or (self.audit.verdict if lost else None)

    @property
    def variant_id(self) -> str:
        """The name the run's histograms go under: strategy and point (hdr names have no point),
        led by the protocol unless it is echomq."""
        return point_id(self.protocol, self.strategy, self.point)


def locust_command(trial: TrialSettings, processes: int, prefix: Path) -> list[str]:
    """The headless Locust command line of one run; every value as a Locust option."""
    users = 1 if trial.probe else trial.producers + trial.workers
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE),
        "--headless", "--only-summary", "--loglevel", "INFO",
        "-u", str(users), "-r", str(max(users, 10) * 10),  # all spawned well inside the warm-up
        "--csv", str(prefix),
        "--summary-json", f"{prefix}_summary.json",
        "--keep-queue",  # this process audits the queue, then deletes it
        *trial.locust_flags(),
    ]  # fmt: skip
    if processes > 1:
        # A port of its own on loopback: runs (or other suites) on the default 5557 cannot collide.
        port = str(_free_port())
        command += ["--processes", str(processes), "--master-bind-host", "127.0.0.1"]
        command += ["--master-bind-port", port, "--master-host", "127.0.0.1", "--master-port", port]
    return command


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_locust(settings: RedisSettings, trial: TrialSettings, processes: int, prefix: Path) -> TrialSummary:
    """Run one headless Locust run to its end; returns its summary. A failed run is a BenchError.

    Ctrl-C here is passed on to Locust's process group as SIGINT: it writes what it measured
    (``aborted`` says why it stopped), and the summary comes back marked ``interrupted``; the
    group is killed when it does not end in time. No Locust process outlives this call.
    """
    prefix.parent.mkdir(parents=True, exist_ok=True)
    summary_path = Path(f"{prefix}_summary.json")
    log_path = Path(f"{prefix}.log")
    summary_path.unlink(missing_ok=True)
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "REDIS_URL": settings.url, "PYTHONPATH": pythonpath}
    timeout = trial.warmup_s + trial.measure_s + STARTUP_ALLOWANCE_S
    interrupted = False
    with log_path.open("w") as log:
        process = spawn(
            locust_command(trial, processes, prefix),
            cwd=REPO,
            env=env,  # the URL (and any password) goes by environment, not argv
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(process, signal.SIGKILL, 0)
            raise BenchError(
                f"Locust run {prefix.name} did not end within {timeout:.0f}s; see {log_path}"
            ) from None
        except KeyboardInterrupt:
            interrupted = True
            code = stop_group(process, signal.SIGINT, INTERRUPT_GRACE_S)
        finally:
            reap_group(process)  # forked Locust workers too, whatever happened
    if not summary_path.exists():  # it never reached the end of a test: it failed, or was killed
        if interrupted:
            raise KeyboardInterrupt
        raise BenchError(
            f"Locust run {prefix.name} failed (exit {code}): {_last_error(log_path)}; see {log_path}"
        )
    data = read_json(summary_path)
    if data.get("kind") != SUMMARY_KIND or data.get("version") != SUMMARY_VERSION:
        raise BenchError(f"{summary_path} is not a finish_fetch summary of version {SUMMARY_VERSION}")
    summary = TrialSummary.from_json(data)
    if not summary.measured:
        if interrupted:
            raise KeyboardInterrupt  # stopped before its window opened: nothing measured
        if summary.refused:
            raise ServerRefused(str(summary.aborted), summary.refused)
        raise BenchError(
            f"Locust run {prefix.name} stopped before measuring anything: {summary.aborted}; see {log_path}"
        )
    summary.exit_code = code
    if interrupted:
        summary.aborted = INTERRUPTED
        summary.complete = False
    return summary


def _last_error(log_path: Path) -> str:
    """A crashed run wrote no summary: the last line of its log that names an error."""
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "exception" in line.lower():
            return line[-300:]
    return lines[-1][-300:] if lines else "no output"


def run_trial(
    settings: RedisSettings,
    opts: FinishFetchOptions,
    strategy: str,
    point: Point,
    rep: int,
    folder: Path,
    protocol: str = "echomq",
    watch_pids: Sequence[int] = (),
) -> TrialResult:
    """One run on a fresh queue: Locust, then the audit, then the queue's keys deleted.

    A server that restarted or went away is an audit that says so, not an exception. The machine
    is watched while Locust runs, with this process's family and ``watch_pids`` as own, and judged
    over the measured window the summary names (over the whole Locust run when it names none).
    """
    name = fresh_queue_name(f"ff-{strategy}")
    prefix = folder / LOCUST_DIR / f"{point_id(protocol, strategy, point)}__r{rep}"
    client = settings.connect()
    try:
        names = queue_names(client, name, point.queues)  # the names the Locust users compute too
        queues = [Queue.open(client, n, protocol=protocol) for n in names]
        home, run_ids = homes(client, names), master_run_ids(client)
        try:
            with watch_run(watch_pids) as watch:
                trial = TrialSettings.at(opts, strategy, point, name, protocol)
                summary = run_locust(settings, trial, opts.loadgen_processes, prefix)
            machine = watch.within(summary.window_clock_s)
            if summary.refused:  # the server refused the run's calls: nothing to audit
                result = AuditResult(0, {}, refused=refused_verdict(summary.refused))
            else:  # Locust has exited: nothing moves the queues now, so the audit is exact.
                try:
                    result = audit_queues(queues, issued_job_ids, run_ids, home)
                except redis.RedisError as exc:
                    unreachable = f"Redis at {settings.where} unreachable ({first_line(exc)})"
                    result = AuditResult(0, {}, server_unreachable=unreachable)
        finally:
            for queue in queues:
                with contextlib.suppress(redis.RedisError):  # a server gone has nothing left to delete
                    queue.delete()
    finally:
        client.close()
    return TrialResult(strategy, point, rep, summary, result, prefix, protocol, machine)


# The probe run of the latency-fidelity check: short, one user, no load to warm up.
PROBE_WARMUP_S = 0.5
PROBE_MEASURE_S = 1.5


def run_probe(settings: RedisSettings, opts: FinishFetchOptions, folder: Path) -> TrialSummary:
    """The fidelity probe under Locust (locustfile's ProbeUser) on a fresh, empty queue; its summary."""
    name = fresh_queue_name("ffprobe")
    short = replace(opts, warmup_s=PROBE_WARMUP_S, measure_s=PROBE_MEASURE_S)
    trial = TrialSettings.at(short, "fused", Point(1, 0.0), name, probe=True)
    client = settings.connect()
    try:
        queue = Queue.open(client, name)
        try:
            return run_locust(settings, trial, 1, folder / FIDELITY_DIR / "probe")
        finally:
            with contextlib.suppress(redis.RedisError):
                queue.delete()
    finally:
        client.close()
