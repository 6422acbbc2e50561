"""What a Locust run measures, and how the parts of many processes merge: no Locust import here.

Each process that runs users keeps a ``Recorder`` (HdrHistograms in µs and counters, only inside
the window) and hands it over as deltas tagged with the window's epoch. The process that runs the
test adds every delta of the current epoch into an ``Aggregate``, so the merged histogram holds
exactly the sum of the parts, however many processes sent them.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis
from hdrh.histogram import HdrHistogram

from bench.errors import ProtocolError
from bench.protocol.commandstats import CommandStats, read_per_master, redis_cpu_seconds
from bench.protocol.connection import Client, primaries
from bench.protocol.queue import Queue, _text
from bench.protocol.refusal import refusal
from bench.results import hdr

ERROR_PREFIX = "errors:"  # a counter a kind of failed call: errors:timeout, errors:connection, ...
FOLLOWED_PREFIX = "followed:"  # a counter a kind of cluster redirect followed: followed:moved, ...


def error_kind(exc: BaseException) -> str:
    """The kind a failed call is counted under in the summary's ``errors_by_kind``."""
    if (found := refusal(exc)) is not None:
        return found.kind  # oom, readonly, noperm, ...: the run stops on it (protocol/refusal.py)
    if isinstance(exc, redis.TimeoutError):
        return "timeout"  # the reply did not come within the socket timeout; the call is not re-sent
    if isinstance(exc, redis.exceptions.NoScriptError):
        return "noscript"  # SCRIPT FLUSH or a restart dropped the script
    if isinstance(exc, redis.BusyLoadingError):
        return "loading"
    if isinstance(exc, redis.ConnectionError):
        return "connection"  # dropped (CLIENT KILL) or refused (server gone)
    if isinstance(exc, redis.exceptions.TryAgainError):
        return "tryagain"  # a slot half moved, still after the retries
    if isinstance(exc, (redis.exceptions.AskError, redis.exceptions.MovedError)):
        return "redirect"  # not followed (the call went another way than the auto-pipeline)
    if isinstance(exc, redis.ResponseError):
        if "non local key" in str(exc):
            return "non_local_key"  # a script touched a key of a slot half moved, not declared in KEYS
        return "busy" if str(exc).startswith("BUSY") else "response"
    if isinstance(exc, ProtocolError):
        return "protocol"  # a script answered with a negative code (e.g. the job is gone)
    return type(exc).__name__


class Recorder:
    """One process's measurements, recorded only while a window is open."""

    def __init__(self) -> None:
        self.epoch = 0
        self.measuring = False
        self._histograms: dict[str, HdrHistogram] = {}
        self._counters: Counter[str] = Counter()
        self._mark_cpu = time.process_time()
        self._mark_wall = time.perf_counter()

    def reset(self, epoch: int) -> None:
        """Open the window ``epoch``: drop everything recorded before it."""
        self.epoch = epoch
        self._histograms.clear()
        self._counters.clear()
        self._mark_cpu = time.process_time()
        self._mark_wall = time.perf_counter()
        self.measuring = True

    def freeze(self) -> None:
        """Close the window: nothing recorded after this counts."""
        if self.measuring:
            self._accrue_time()
            self.measuring = False

    def record(self, metric: str, value_us: float, count: int = 1) -> None:
        if self.measuring:
            if (histogram := self._histograms.get(metric)) is None:
                histogram = self._histograms[metric] = hdr.new_histogram()
            hdr.record_us(histogram, value_us, count)

    def count(self, name: str, amount: int = 1) -> None:
        if self.measuring:
            self._counters[name] += amount

    def peek(self) -> tuple[dict[str, HdrHistogram], Counter[str]]:
        """What this window holds so far, left in place (the web UI's live tab reads it)."""
        return dict(self._histograms), Counter(self._counters)

    def take(self) -> dict[str, Any]:
        """Everything recorded since the last take, encoded; the recorder starts again from empty."""
        if self.measuring:
            self._accrue_time()
        delta = {
            "epoch": self.epoch,
            "histograms": {
                name: hdr.encode(h) for name, h in self._histograms.items() if h.get_total_count()
            },
            "counters": dict(self._counters),
        }
        self._histograms.clear()
        self._counters.clear()
        return delta

    def _accrue_time(self) -> None:
        # The process's own CPU and the window's wall time, as counters, so the
        # deltas of one process add up to its whole window.
        cpu, wall = time.process_time(), time.perf_counter()
        self._counters["cpu_us"] += int((cpu - self._mark_cpu) * 1e6)
        self._counters["window_us"] += int((wall - self._mark_wall) * 1e6)
        self._mark_cpu, self._mark_wall = cpu, wall


@dataclass
class ProcessTotals:
    """What one process sent in the current window: its counters and its histogram counts."""

    role: str
    counters: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    final: bool = False


class Aggregate:
    """The run's merged measurements: the deltas of the current epoch from every process."""

    def __init__(self) -> None:
        self.histograms: dict[str, HdrHistogram] = {}
        self.counters: Counter[str] = Counter()
        self.processes: dict[str, ProcessTotals] = {}
        self.reset(0)

    def reset(self, epoch: int) -> None:
        self.epoch = epoch
        self.histograms.clear()
        self.counters.clear()
        self.processes.clear()
        self.stale_reports = 0

    def absorb(self, process: str, role: str, delta: dict[str, Any], final: bool = False) -> bool:
        """Add one delta; a delta of an older epoch (sent before the reset reached it) is dropped."""
        if delta.get("epoch") != self.epoch:
            self.stale_reports += 1
            return False
        totals = self.processes.setdefault(process, ProcessTotals(role))
        for name, encoded in delta.get("histograms", {}).items():
            part = hdr.decode(encoded)
            totals.counts[name] += part.get_total_count()
            if (merged := self.histograms.get(name)) is None:
                merged = self.histograms[name] = hdr.new_histogram()
            merged.add(part)
        counters = Counter({k: int(v) for k, v in delta.get("counters", {}).items()})
        totals.counters.update(counters)
        self.counters.update(counters)
        totals.final = totals.final or final
        return True


def issued_job_ids(queue: Queue) -> list[str]:
    """Every id the server handed out on this queue, 1..the id counter: the jobs produced, so a
    producer stopped between sending a batch and reading its reply cannot make a job look unknown."""
    raw = queue.client.get(queue.keys.id_counter)
    last = int(_text(raw)) if raw is not None else 0
    return [str(i) for i in range(1, last + 1)]


def server_figures(client: Client) -> tuple[dict[str, CommandStats], float, int]:
    """Each master's commandstats, Redis's CPU seconds and used memory. commandstats is read last,
    next to the counters' reset or freeze that follows it: a call then falls between the two only
    when it was in flight, not whenever it was sent while another INFO waited on a busy machine."""
    cpu = redis_cpu_seconds(client.info("cpu"))
    # used_memory: on a cluster, its masters' sum (the run's queues spread)
    memory = sum(int(node.info("memory")["used_memory"]) for _, node in primaries(client))
    return read_per_master(client), cpu, memory
