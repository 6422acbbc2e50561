"""Stage 1 of `python -m bench run`: finish-then-fetch, fused against two_call, under Locust.

For each (workers, rtt_ms) point the strategies run alternately, A B A B, for
the profile's repetitions. Each run is a headless Locust subprocess
(bench/locustfile.py; a subprocess keeps gevent's monkey-patching out of this
process) on a fresh queue, audited and deleted after. Results: one row a run
in finish_fetch.csv, the merged histograms under hdr/, Locust's own CSVs and
the run's summary JSON and log beside them, and a short table on stdout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import redis

from bench import hdr
from bench.errors import BenchError
from bench.finish_fetch.loadstats import issued_job_ids
from bench.finish_fetch.summary import SUMMARY_KIND, SUMMARY_VERSION
from bench.harness.children import reap_group, spawn, stop_group
from bench.harness.context import RunContext
from bench.harness.profile import FinishFetchOptions, Profile
from bench.paths import LOCUSTFILE, REPO
from bench.protocol.audit import AuditResult, audit, server_run_id
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Queue
from bench.results import FINISH_FETCH_COLUMNS, HDR_DIR, hdr_name, update_meta, write_csv
from bench.results import read_json as read_summary

STAGE = "finish_fetch"
STARTUP_ALLOWANCE_S = 60.0  # Locust's start, the workers' connect and the final reports
# After Ctrl-C, Locust gets this long to collect the last reports and write its summary
# (its master waits up to 10 s for a worker's last delta), then its process group is killed.
INTERRUPT_GRACE_S = 15.0
INTERRUPTED = "interrupted (Ctrl-C)"
RTT_LABEL = "simulated: the client waits rtt_ms (gevent.sleep) before each round trip; loopback otherwise"


@dataclass(frozen=True)
class Point:
    """One load point: how many worker users, and the simulated round-trip time."""

    workers: int
    rtt_ms: float

    @property
    def label(self) -> str:
        return f"w{self.workers}-rtt{self.rtt_ms:g}"


@dataclass
class RunResult:
    strategy: str
    point: Point
    rep: int
    summary: dict[str, Any]
    audit: AuditResult
    files: Path  # the prefix of the run's Locust CSVs, summary and log

    @property
    def stopped(self) -> str | None:
        """Why the run stopped before its end (Locust's own reason, or the audit's), if it did."""
        reason = self.summary.get("aborted")
        if reason:
            return str(reason)
        if self.audit.server_restarted or self.audit.server_unreachable:
            return self.audit.verdict
        return None

    @property
    def variant_id(self) -> str:
        """The name the run's histograms go under: strategy and point (hdr names have no point)."""
        return f"{self.strategy}-{self.point.label}"


def locust_command(
    opts: FinishFetchOptions, strategy: str, point: Point, queue: str, prefix: Path
) -> list[str]:
    """The headless Locust command line of one run; every value as a Locust option."""
    users = opts.producers + point.workers
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE),
        "--headless", "--only-summary", "--loglevel", "INFO",
        "-u", str(users), "-r", str(max(users, 10) * 10),  # all spawned well inside the warm-up
        "--csv", str(prefix),
        "--summary-json", f"{prefix}_summary.json",
        "--queue", queue,
        "--strategy", strategy,
        "--workers", str(point.workers),
        "--rtt-ms", f"{point.rtt_ms:g}",
        "--producers", str(opts.producers),
        "--batch-size", str(opts.batch_size),
        "--payload-bytes", str(opts.payload_bytes),
        "--target-rate", f"{opts.target_rate:g}",
        "--warmup-s", f"{opts.warmup_s:g}",
        "--measure-s", f"{opts.measure_s:g}",
        "--socket-timeout-s", f"{opts.socket_timeout_s:g}",
    ]  # fmt: skip
    if opts.loadgen_processes > 1:
        # A port of its own on loopback: runs (or other suites) on the default 5557 cannot collide.
        port = str(_free_port())
        command += ["--processes", str(opts.loadgen_processes), "--master-bind-host", "127.0.0.1"]
        command += ["--master-bind-port", port, "--master-host", "127.0.0.1", "--master-port", port]
    return command


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_locust(
    settings: RedisSettings, opts: FinishFetchOptions, strategy: str, point: Point, queue: str, prefix: Path
) -> dict[str, Any]:
    """Run one headless Locust run to its end; returns its summary. A failed run is a BenchError.

    Locust runs in a process group of its own: Ctrl-C here is passed on to it
    as SIGINT, it writes what it measured (``aborted`` says why it stopped),
    and the summary comes back marked ``interrupted``; its group is killed
    when it does not end in time. No Locust process outlives this call.
    """
    prefix.parent.mkdir(parents=True, exist_ok=True)
    summary_path = Path(f"{prefix}_summary.json")
    log_path = Path(f"{prefix}.log")
    summary_path.unlink(missing_ok=True)
    env = {**os.environ, "REDIS_URL": settings.url, "PYTHONPATH": _pythonpath()}
    timeout = opts.warmup_s + opts.measure_s + STARTUP_ALLOWANCE_S
    interrupted = False
    with log_path.open("w") as log:
        process = spawn(
            locust_command(opts, strategy, point, queue, prefix),
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
    summary = read_summary(summary_path)
    if summary.get("kind") != SUMMARY_KIND or summary.get("version") != SUMMARY_VERSION:
        raise BenchError(f"{summary_path} is not a finish_fetch summary of version {SUMMARY_VERSION}")
    if not summary["measured"]:
        if interrupted:
            raise KeyboardInterrupt  # stopped before its window opened: nothing measured
        raise BenchError(
            f"Locust run {prefix.name} stopped before measuring anything: {summary['aborted']}; "
            f"see {log_path}"
        )
    summary["exit_code"] = code
    if interrupted:
        summary["aborted"] = INTERRUPTED
        summary["complete"] = False
    return summary


def _pythonpath() -> str:
    existing = os.environ.get("PYTHONPATH", "")
    return f"{REPO}{os.pathsep}{existing}" if existing else str(REPO)


def _last_error(log_path: Path) -> str:
    """A crashed run wrote no summary: the last line of its log that names an error."""
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "exception" in line.lower():
            return line[-300:]
    return lines[-1][-300:] if lines else "no output"


def run_once(
    settings: RedisSettings, opts: FinishFetchOptions, strategy: str, point: Point, rep: int, folder: Path
) -> RunResult:
    """One run on a fresh queue: Locust, then the audit, then the queue's keys deleted.

    A server that restarted or went away is an audit that says so, not an exception:
    the run's summary still holds what was measured before.
    """
    name = f"ff-{strategy}-{uuid.uuid4().hex[:10]}"
    prefix = folder / f"{STAGE}__{strategy}-{point.label}__r{rep}"
    client = settings.connect()
    try:
        queue = Queue.open(client, name)
        run_id = server_run_id(queue)
        try:
            summary = run_locust(settings, opts, strategy, point, name, prefix)
            # Locust has exited: nothing moves the queue now, so the audit is exact.
            result = _audit_after(queue, run_id, settings.where)
        finally:
            with contextlib.suppress(redis.RedisError):  # a server gone has nothing left to delete
                queue.delete()
    finally:
        client.close()
    return RunResult(strategy, point, rep, summary, result, prefix)


def _audit_after(queue: Queue, run_id: str, where: str) -> AuditResult:
    try:
        return audit(queue, issued_job_ids(queue), run_id)
    except redis.RedisError as exc:
        reason = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
        return AuditResult(0, {}, server_unreachable=f"Redis at {where} unreachable ({reason})")


def _round(value: Any, digits: int) -> Any:
    return round(float(value), digits) if value is not None else None


def csv_row(run: RunResult, opts: FinishFetchOptions) -> dict[str, Any]:
    """The run's row of finish_fetch.csv (FINISH_FETCH_COLUMNS)."""
    s = run.summary
    d = s["derived"]
    cycle = s["percentiles_us"].get("cycle", {})
    e2e = s["percentiles_us"].get("e2e", {})
    row = {
        "variant": run.strategy,
        "rep": run.rep,
        "workers": run.point.workers,
        "producers": opts.producers,
        "rtt_ms": run.point.rtt_ms,
        "duration_s": _round(s["window_s"], 3),
        "jobs": d["jobs"],
        "jobs_per_s": _round(d["jobs_per_s"], 1),
        "round_trips_per_job": _round(d["round_trips_per_job"], 4),
        "server_calls_per_job": _round(d["server_calls_per_job"], 4),
        "server_us_per_job": _round(d["server_us_per_job"], 2),
        "cycle_p50_us": cycle.get("p50"),
        "cycle_p90_us": cycle.get("p90"),
        "cycle_p99_us": cycle.get("p99"),
        "cycle_p999_us": cycle.get("p999"),
        "cycle_max_us": cycle.get("max"),
        "e2e_p50_us": e2e.get("p50"),
        "e2e_p99_us": e2e.get("p99"),
        "loadgen_cpu_pct": _round(d["loadgen_cpu_pct"], 1),
        "saturated": bool(d["saturated"]),
        "audit_ok": run.audit.ok and bool(s.get("complete", False)),
    }
    assert tuple(row) == FINISH_FETCH_COLUMNS
    return row


def _metric_file_name(metric: str) -> str:
    # "call:moveToFinished+fetch" -> "call-moveToFinished-fetch": safe in a file name, no "__"
    return "".join(ch if ch.isalnum() else "-" for ch in metric).strip("-")


def write_histograms(run_dir: Path, run: RunResult) -> None:
    for metric, encoded in run.summary["histograms"].items():
        name = hdr_name(STAGE, run.variant_id, run.rep, _metric_file_name(metric))
        hdr.write_hdr(run_dir / HDR_DIR / name, hdr.decode(encoded))


# --- the table -----------------------------------------------------------------------------

TABLE_METRICS = (
    ("jobs/s", "jobs_per_s", "{:.0f}"),
    ("rt/job", "round_trips_per_job", "{:.2f}"),
    ("cycle p50 µs", "cycle_p50_us", "{:.0f}"),
    ("cycle p99 µs", "cycle_p99_us", "{:.0f}"),
    ("redis µs/job", "server_us_per_job", "{:.1f}"),
    ("loadgen cpu µs/job", "loadgen_cpu_us_per_job", "{:.0f}"),  # the harness's own cost
)


def _median_spread(values: Sequence[float], form: str, spread: bool = True) -> str:
    if not values:
        return "-"
    middle = form.format(statistics.median(values))
    if len(values) == 1 or not spread:
        return middle
    return f"{middle} [{form.format(min(values))}-{form.format(max(values))}]"


def table(rows: Sequence[dict[str, Any]], strategies: Sequence[str]) -> str:
    """Medians over repetitions; a ratio row pairs the runs of each A B round, [min-max] of the pairs."""
    names = [name for name, _, _ in TABLE_METRICS]
    header = ["workers", "rtt ms*", "slept ms", "strategy", *names, "saturated", "audit"]
    lines = [header]
    points = sorted({(r["workers"], r["rtt_ms"]) for r in rows})
    for workers, rtt in points:
        here = [r for r in rows if r["workers"] == workers and r["rtt_ms"] == rtt]
        by_strategy = {
            s: sorted((r for r in here if r["variant"] == s), key=lambda r: r["rep"]) for s in strategies
        }
        for strategy, runs in by_strategy.items():
            # the spread of jobs/s here; of every metric in the ratio row
            cells = [
                _median_spread([float(r[key]) for r in runs if r[key] is not None], form, spread=i == 0)
                for i, (_, key, form) in enumerate(TABLE_METRICS)
            ]
            saturated = sum(1 for r in runs if r["saturated"])
            audited = sum(1 for r in runs if r["audit_ok"])
            slept = [float(r["rtt_slept_ms"]) for r in runs if r.get("rtt_slept_ms")]
            lines.append(
                [
                    str(workers),
                    f"{rtt:g}",
                    _median_spread(slept, "{:.2f}", spread=False) if slept else "-",
                    strategy,
                    *cells,
                    f"{saturated}/{len(runs)}",
                    f"ok {audited}/{len(runs)}",
                ]
            )
        if len(strategies) == 2:
            a, b = (by_strategy[s] for s in strategies)
            cells = []
            for _, key, _ in TABLE_METRICS:
                ratios = [
                    float(x[key]) / float(y[key])
                    for x, y in zip(a, b, strict=False)
                    if x[key] is not None and y[key] not in (None, 0)
                ]
                cells.append(_median_spread(ratios, "{:.2f}"))
            lines.append(["", "", "", f"{strategies[0]}/{strategies[1]}", *cells, "", ""])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join(
        [
            "finish-then-fetch: medians of the repetitions; ratios pair the runs of each A B round [min-max]",
            *text,
            "* rtt is simulated: the client sleeps rtt ms before each round trip (slept: the mean it took); "
            "redis µs/job counts every client-sent command in the window, producers' addJob included",
        ]
    )


def check_profile(profile: Profile) -> None:
    """Before any stage starts: Locust is there (found, not imported: no gevent patching here)."""
    if find_spec("locust") is None:
        raise BenchError("Locust is not installed; run `make venv` (or pip install -e .)")
    strategies = profile.finish_fetch.strategies
    if len(set(strategies)) != len(strategies):
        raise BenchError(f"profile key strategies names one twice ({', '.join(strategies)}); list each once")


def run_stage(ctx: RunContext) -> None:
    opts = ctx.profile.finish_fetch
    strategies = list(opts.strategies)
    points = [Point(w, rtt) for w in opts.workers for rtt in opts.rtt_ms]
    update_meta(
        ctx.run_dir, finish_fetch={"rtt_ms": RTT_LABEL, "hdr_variant": "<strategy>-w<workers>-rtt<rtt_ms>"}
    )
    rows: list[dict[str, Any]] = []  # finish_fetch.csv
    shown: list[dict[str, Any]] = []  # the same, and what only the table shows
    errors: Counter[str] = Counter()  # failed calls by kind, over every run: meta.json
    audits: dict[str, str] = {}  # the verdict of each run whose audit did not pass: meta.json
    total = len(points) * opts.repetitions * len(strategies)
    for point in points:
        for rep in range(1, opts.repetitions + 1):
            for strategy in strategies:  # A B A B: drift on a shared machine hits both alike
                ctx.progress(f"run {len(rows) + 1}/{total}: {strategy} {point.label} rep {rep}")
                run = run_once(ctx.settings, opts, strategy, point, rep, ctx.run_dir)
                row = csv_row(run, opts)
                rows.append(row)
                derived = run.summary["derived"]
                shown.append(
                    {
                        **row,
                        "rtt_slept_ms": derived["simulated_rtt_mean_ms"],
                        "loadgen_cpu_us_per_job": derived["loadgen_cpu_us_per_job"],
                    }
                )
                write_histograms(ctx.run_dir, run)
                write_csv(ctx.run_dir / "finish_fetch.csv", FINISH_FETCH_COLUMNS, rows)
                errors.update(derived.get("errors_by_kind", {}))
                if not row["audit_ok"]:
                    audits[f"{run.variant_id} r{run.rep}"] = _audit_note(run)
                update_meta(
                    ctx.run_dir,
                    finish_fetch_errors=dict(sorted(errors.items())),
                    finish_fetch_audit_failures=audits,
                )
                ctx.progress(_progress_line(run, row))
                _stop_if_stopped(run, ctx.run_dir)
    ctx.progress.done()
    print(table(shown, strategies))
    if errors:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items()))
        total = sum(errors.values())
        print(f"finish_fetch: {total} calls failed ({kinds}); see the runs' logs", file=sys.stderr)


def _audit_note(run: RunResult) -> str:
    """Why the run's audit_ok is false, in the audit's own words."""
    if not run.audit.ok:
        return run.audit.verdict
    missing = ", ".join(run.summary.get("missing_processes") or [])
    cut = run.stopped or (f"no final report from {missing}" if missing else "the summary is incomplete")
    return f"cut short ({cut}); the queue itself: {run.audit.verdict}"


def _stop_if_stopped(run: RunResult, run_dir: Path) -> None:
    """End the stage when a run stopped early: its row is written already, marked audit_ok false."""
    reason = run.stopped
    if reason is None:
        return
    if reason == INTERRUPTED:
        raise KeyboardInterrupt
    which = f"{run.strategy} {run.point.label} rep {run.rep}"
    raise BenchError(f"finish_fetch run {which} stopped: {reason}; what it measured is in {run_dir}")


def _progress_line(run: RunResult, row: dict[str, Any]) -> str:
    notes = []
    if row["saturated"]:
        notes.append("saturated: " + "; ".join(run.summary["derived"]["saturated_because"]))
    if run.stopped:
        notes.append(f"STOPPED EARLY: {run.stopped}")
    if not row["audit_ok"]:
        notes.append(f"AUDIT FAILED: {run.audit.verdict}")
    errors = run.summary["derived"].get("errors", 0)
    if errors:
        kinds = ", ".join(f"{n} {k}" for k, n in run.summary["derived"].get("errors_by_kind", {}).items())
        notes.append(f"{errors} failed calls: {kinds or 'kinds not recorded'} (see {run.files}.log)")
    tail = f" ({'; '.join(notes)})" if notes else ""
    return (
        f"{run.strategy} {run.point.label} rep {run.rep}: {row['jobs_per_s']:.0f} jobs/s, "
        f"{row['round_trips_per_job']:.2f} rt/job, cycle p50 {row['cycle_p50_us']} µs{tail}"
    )
