"""Latency fidelity: the p50 of one trivial EVALSHA (``return 1``) at one client, measured four ways.

1. ``redis-benchmark`` (Debian's redis-tools, beside redis-server): the server and
   a C client, the floor;
2. a bare redis-py call in a plain loop: what the client library adds;
3. the raw driver's timed path (TimedSender over an AutoPipeline) in a plain loop:
   what the suite's connection and timing add;
4. the same path under Locust (a probe run, locust_trial.py): what Locust adds.

No Locust or gevent import here (the fourth is measured in a Locust child).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.protocol.autopipe import AutoPipeline
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Command, Queue
from bench.results import hdr
from bench.results.finish_fetch import Fidelity
from bench.stages.finish_fetch.fidelity_probe import PROBE_LABEL, PROBE_METRIC, PROBE_SCRIPT
from bench.stages.finish_fetch.loadstats import Recorder
from bench.stages.finish_fetch.timed import TimedSender

BENCHMARK_TIMEOUT_S = 120.0


def find_redis_benchmark(server_binary: str | None) -> str | None:
    """redis-benchmark beside the redis-server that serves the run, else on PATH."""
    if server_binary:
        beside = Path(server_binary).with_name("redis-benchmark")
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which("redis-benchmark")


def benchmark_command(binary: str, settings: RedisSettings, sha: str, calls: int) -> list[str] | str:
    """redis-benchmark's command line for ``calls`` EVALSHA at one client; or why it cannot run."""
    parts = urlsplit(settings.url)
    if parts.scheme == "rediss":
        return "skipped: REDIS_URL is TLS (rediss://); redis-benchmark would need its certificates"
    if parts.password is not None:
        return "skipped: REDIS_URL has a password, which redis-benchmark would show on its command line"
    where = ["-s", parts.path] if parts.scheme == "unix" else ["-h", parts.hostname or "127.0.0.1"]
    if parts.scheme != "unix":
        where += ["-p", str(parts.port or 6379)]
    return [binary, *where, "-c", "1", "-n", str(calls), "--csv", "--precision", "3", "EVALSHA", sha, "0"]


def redis_benchmark_p50(
    settings: RedisSettings, sha: str, calls: int, server_binary: str | None
) -> tuple[float | None, str]:
    """(p50 µs, note): None and why when redis-benchmark is absent or cannot run."""
    if (binary := find_redis_benchmark(server_binary)) is None:
        return None, "skipped: redis-benchmark not found (Debian: apt-get install redis-tools)"
    command = benchmark_command(binary, settings, sha, calls)
    if isinstance(command, str):
        return None, command
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=BENCHMARK_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"skipped: redis-benchmark failed ({type(exc).__name__})"
    rows = list(csv.DictReader(line for line in done.stdout.splitlines() if line.strip()))
    if done.returncode != 0 or not rows or "p50_latency_ms" not in rows[-1]:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return None, f"skipped: redis-benchmark exited {done.returncode}: {reason}"
    return float(rows[-1]["p50_latency_ms"]) * 1000.0, binary


def bare_redis_py_p50(settings: RedisSettings, sha: str, calls: int) -> float:
    """``client.evalsha`` in a plain loop, each call timed with perf_counter."""
    client = settings.connect()
    try:
        histogram = hdr.new_histogram()
        for _ in range(calls):
            started = time.perf_counter()
            client.evalsha(sha, 0)
            hdr.record_us(histogram, (time.perf_counter() - started) * 1e6)
        return float(histogram.get_value_at_percentile(50))
    finally:
        client.close()


def raw_path_p50(settings: RedisSettings, queue_name: str, sha: str, calls: int) -> float:
    """The raw driver's timed path (TimedSender over an AutoPipeline) in a plain loop."""
    client = settings.connect()
    try:
        recorder = Recorder()
        recorder.reset(1)
        timer = TimedSender(AutoPipeline(Queue.open(client, queue_name)), recorder)
        call = [Command(("EVALSHA", sha, 0))]
        for _ in range(calls):
            timer.send(call, PROBE_LABEL)
        recorder.freeze()
        encoded = recorder.take()["histograms"][PROBE_METRIC]
        return float(hdr.decode(encoded).get_value_at_percentile(50))
    finally:
        client.close()


def measure_plain(
    settings: RedisSettings, queue_name: str, calls: int, server_binary: str | None
) -> Fidelity:
    """The three ways that need no Locust (the fourth comes from a probe run)."""
    client = settings.connect()
    try:
        sha = str(client.script_load(PROBE_SCRIPT))
    finally:
        client.close()
    bench_p50, note = redis_benchmark_p50(settings, sha, calls, server_binary)
    return Fidelity(
        calls=calls,
        redis_benchmark_p50_us=bench_p50,
        redis_benchmark_note=note,
        redis_py_p50_us=bare_redis_py_p50(settings, sha, calls),
        raw_path_p50_us=raw_path_p50(settings, queue_name, sha, calls),
    )
