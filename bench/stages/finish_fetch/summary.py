"""The run's summary file: built from the window's merged figures, logged, and written.

The summary is the load side's whole answer to whoever started the run (stage.py reads nothing
else). A run stopped before its window opened still writes one, with ``measured: false`` and the
reason. No Locust import here.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict

from bench.harness.machine import is_saturated
from bench.protocol.commandstats import CommandStats, added, client_side
from bench.results import hdr
from bench.results.files import write_json
from bench.stages.finish_fetch import pace
from bench.stages.finish_fetch.loadstats import ERROR_PREFIX, FOLLOWED_PREFIX, Aggregate
from bench.stages.finish_fetch.seats import for_queue
from bench.stages.finish_fetch.trial_settings import TrialSettings
from bench.stages.finish_fetch.wait_list import WaitSamples

log = logging.getLogger("echomq")

# producer_loop.py's counter: time a closed-loop producer waited for room in the wait list
PRODUCER_WAIT_US = "producer_wait_us"

SUMMARY_KIND = "echomq-finish-fetch"
SUMMARY_VERSION = 2  # 2: ``measured``, and a summary even when nothing was measured

# A run is marked saturated when the generator, not Redis, set the pace: a process that runs
# users saturated (harness.machine.is_saturated, the rule every load process is judged by), or an
# open-loop producer that added less than this share of the offered rate.
SATURATED_RATE_SHARE = 0.9
WARM_UP_ONLY = "the test stopped during warm-up"  # the reason when nothing else stopped it


def _per(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


@dataclass(frozen=True)
class Derived:
    """A run's headline figures (the summary's ``derived``), a job's figures per job finished."""

    jobs: int
    jobs_per_s: float
    added_per_s: float
    offered_per_s: float
    round_trips_per_job: float
    producer_round_trips_per_job: float
    # every client-sent command in the window (producers' addJob included), per job finished
    server_calls_per_job: float | None
    server_us_per_job: float | None
    # the same calls less the producers' addJob calls, which the producers counted themselves
    worker_server_calls_per_job: float | None
    # the workers' script calls a job's cycle sends, counted at the client (1 fused, 2 two-call) ...
    commands_per_job: float
    # ... and as the server counted them: EVALSHA calls less the producers' and the lone fetches
    server_commands_per_job: float | None
    # fetches outside a cycle (a slot's first, or after one found no job): an idle queue's cost
    fetches_alone_per_job: float
    worker_flushes: int
    # a worker's jobs in flight as each starts (1 .. concurrency): above 1, the slots overlap
    jobs_in_flight_mean: float
    calls_per_flush: float
    redis_ceiling_jobs_per_s: float | None
    pace_shares: dict[str, float]
    limit: str
    limit_share: float
    loadgen_cpu_pct: float
    loadgen_cpu_us_per_job: float
    busiest_process_cpu_pct: float
    redis_cpu_pct: float | None
    simulated_rtt_mean_ms: float
    errors: int
    errors_by_kind: dict[str, int]
    followed_by_kind: dict[str, int]  # a cluster slot moving: MOVED, ASK, TRYAGAIN
    saturated: bool
    saturated_because: list[str]
    # the server's used_memory growth over the window a 1,000 jobs (kept jobs cost memory)
    redis_mem_growth_bytes_per_1k_jobs: float | None = None
    # the wait list's length sampled through the window: how often, how often it was empty, the least
    wait_samples: int = 0
    wait_empty_samples: int = 0
    wait_min_jobs: int | None = None


@dataclass(frozen=True)
class SummaryAudit:
    """The queues' audit, when the summary's process could take it (one process, or the raw driver)."""

    ok: bool
    verdict: str
    counts: dict[str, int] | None = None  # jobs by state; none when the queues were not audited


@dataclass
class TrialSummary:
    """What a run of stage 1 measured, as its summary JSON holds it (``to_json``/``from_json``
    at that edge only); one that measured nothing holds only UNMEASURED_KEYS."""

    mode: str  # "local", "distributed" or "raw"
    settings: TrialSettings  # the run's settings, as its process ran them
    measured: bool
    complete: bool
    aborted: str | None
    # the kind of refusal (protocol/refusal.py) when a reply every later call would get ended it
    refused: str | None = None
    kind: str = SUMMARY_KIND
    version: int = SUMMARY_VERSION
    window_s: float = 0.0
    window_clock_s: list[float] | None = None  # the window's open and close on CLOCK_MONOTONIC
    missing_processes: list[str] = field(default_factory=list)
    stale_reports_dropped: int = 0
    server_error: str | None = None
    histograms: dict[str, str] = field(default_factory=dict)  # metric -> HdrHistogram, encoded
    percentiles_us: dict[str, dict[str, int]] = field(default_factory=dict)  # metric -> p50, p99, ... µs
    counters: dict[str, int] = field(default_factory=dict)
    server: dict[str, dict[str, int]] | None = None  # commandstats delta: calls, usec by command
    processes: list[dict[str, Any]] = field(default_factory=list)  # each process's own counts
    derived: Derived | None = None
    shards: Shards = field(default_factory=lambda: Shards())  # shard_figures: queues, masters
    audit: SummaryAudit | None = None
    exit_code: int | None = None  # the Locust child's, set by the stage that ran it

    @property
    def figures(self) -> Derived:
        """The headline figures of a measured run."""
        assert self.derived is not None, "a run that measured nothing has no figures"
        return self.derived

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["settings"] = self.settings.as_dict()
        if not self.measured:
            return {key: data[key] for key in UNMEASURED_KEYS}
        for key in ("audit", "exit_code"):
            if data[key] is None:
                del data[key]
        if self.audit is not None and self.audit.counts is None:
            del data["audit"]["counts"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialSummary:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        known = {f.name for f in fields(TrialSettings)}  # as_dict adds what the file says about them
        values["settings"] = TrialSettings(**{k: v for k, v in data["settings"].items() if k in known})
        if values.get("derived") is not None:
            values["derived"] = Derived(**values["derived"])
        if values.get("audit") is not None:
            values["audit"] = SummaryAudit(**values["audit"])
        return cls(**values)


# What the summary of a run that measured nothing holds.
UNMEASURED_KEYS = ("kind", "version", "mode", "settings", "measured", "complete", "aborted", "refused")


def derive(
    trial: TrialSettings, aggregate: Aggregate, window_s: float, figures: ServerFigures, wait: WaitSamples
) -> Derived:
    """The run's headline figures, and whether the generator was the limit."""
    c = aggregate.counters
    jobs = c["jobs"]
    server, redis_cpu_s, growth = figures.whole, figures.cpu_s, figures.memory_growth_bytes
    server_side = client_side(server) if server is not None else None
    if server_side is not None and wait.calls:  # the watch's LLENs are not the load's
        server_side = dataclasses.replace(
            server_side,
            calls={**server_side.calls, "llen": max(0, server_side.calls.get("llen", 0) - wait.calls)},
        )
    busiest = 0.0
    cpu_s_total = 0.0
    for totals in aggregate.processes.values():
        cpu_s_total += totals.counters["cpu_us"] / 1e6
        if totals.role != "master":  # the master runs no users
            busiest = max(busiest, 100.0 * _per(totals.counters["cpu_us"], totals.counters["window_us"]))
    added_per_s = _per(c["jobs_added"], window_s)
    jobs_per_s = _per(jobs, window_s)
    redis_cpu_pct = 100.0 * _per(redis_cpu_s, window_s) if redis_cpu_s is not None else None
    server_us_per_job = _per(server_side.total_usec, jobs) if server_side and jobs else None
    # what each exchange's simulated wait really took (a busy event loop wakes late)
    slept_rtt_ms = _per(c["rtt_slept_us"], c["rtt_sleeps"]) / 1000
    used = pace.shares(
        pace.PaceInputs(
            jobs_per_s=jobs_per_s,
            workers=trial.workers,
            concurrency=trial.concurrency,
            job_ms=trial.job_ms,
            rtt_ms=slept_rtt_ms if c["rtt_sleeps"] else trial.rtt_ms,
            round_trips_per_job=_per(c["worker_round_trips"], jobs),
            busiest_cpu_pct=busiest,
            redis_cpu_pct=redis_cpu_pct,
            redis_us_per_job=server_us_per_job,
            producer_share=(
                pace.producer_share(c[PRODUCER_WAIT_US], trial.producers, window_s * 1e6)
                if trial.target_rate <= 0
                else None
            ),
        )
    )
    limit, limit_share = pace.closed_limit(used, _per(c["fetches_alone"], jobs))
    reasons = []
    if is_saturated(busiest):
        reasons.append(f"a load process used {busiest:.0f}% of a core")
    if trial.target_rate > 0 and added_per_s < SATURATED_RATE_SHARE * trial.target_rate:
        reasons.append(f"added {added_per_s:.0f} jobs/s of {trial.target_rate:g} offered")
    return Derived(
        jobs=jobs,
        jobs_per_s=jobs_per_s,
        added_per_s=added_per_s,
        offered_per_s=trial.target_rate,
        round_trips_per_job=_per(c["worker_round_trips"], jobs),
        producer_round_trips_per_job=_per(c["producer_round_trips"], jobs),
        server_calls_per_job=_per(server_side.total_calls, jobs) if server_side else None,
        server_us_per_job=_per(server_side.total_usec, jobs) if server_side else None,
        worker_server_calls_per_job=(
            _per(server_side.total_calls - c["producer_calls"], jobs) if server_side else None
        ),
        commands_per_job=_per(c["worker_script_calls"] - c["fetches_alone"], jobs),
        server_commands_per_job=(
            _per(server.calls.get("evalsha", 0) - c["producer_script_calls"] - c["fetches_alone"], jobs)
            if server
            else None
        ),
        fetches_alone_per_job=_per(c["fetches_alone"], jobs),
        worker_flushes=c["worker_round_trips"],
        jobs_in_flight_mean=_per(c["in_flight_sum"], c["in_flight_samples"]),
        calls_per_flush=_per(c["worker_commands"], c["worker_round_trips"]),
        redis_ceiling_jobs_per_s=pace.redis_ceiling(server_us_per_job),
        pace_shares=used,
        limit=limit,
        limit_share=limit_share,
        loadgen_cpu_pct=100.0 * _per(cpu_s_total, window_s),
        loadgen_cpu_us_per_job=_per(cpu_s_total * 1e6, jobs),
        busiest_process_cpu_pct=busiest,
        redis_cpu_pct=redis_cpu_pct,
        simulated_rtt_mean_ms=slept_rtt_ms,
        errors=c["errors"],
        errors_by_kind=by_kind(c, ERROR_PREFIX),
        followed_by_kind=by_kind(c, FOLLOWED_PREFIX),
        saturated=bool(reasons),
        saturated_because=reasons,
        redis_mem_growth_bytes_per_1k_jobs=growth * 1000 / jobs if growth is not None and jobs else None,
        wait_samples=wait.samples,
        wait_empty_samples=wait.empty,
        wait_min_jobs=wait.least,
    )


def by_kind(counters: Counter[str], prefix: str) -> dict[str, int]:
    """The <prefix><kind> counters as {kind: count}."""
    found = sorted((k, v) for k, v in counters.items() if k.startswith(prefix))
    return {k.removeprefix(prefix): v for k, v in found}


@dataclass(frozen=True)
class ServerFigures:
    """What the server said about a trial's window, or why it said nothing (``error``)."""

    by_master: Mapping[str, CommandStats] | None = None  # each master's commandstats delta
    cpu_s: float | None = None  # the server's CPU over the window
    memory_growth_bytes: int | None = None  # its used_memory growth over the window (kept jobs)
    home: Mapping[str, str] | None = None  # each queue's master
    error: str | None = None  # why the figures are missing

    @property
    def whole(self) -> CommandStats | None:
        """The server's delta: its masters' sum, exactly."""
        return added(self.by_master.values()) if self.by_master is not None else None


@dataclass(frozen=True)
class WindowEnd:
    """How a trial's window ended: early (``aborted``: why; ``refused``: the kind of refusal, in
    protocol/refusal.py, every later call would get too), or with processes that never reported."""

    missing_processes: list[str] = field(default_factory=list)
    aborted: str | None = None
    refused: str | None = None


# Each queue's and each master's part of a run, so a hot shard shows: the masters' parts add up to
# the run's whole (commandstats read once a master).
def _per_or_none(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


class QueueFigures(TypedDict):
    master: str  # host:port of the master that holds the queue's slot
    jobs: int
    jobs_per_s: float | None


class MasterFigures(TypedDict):
    queues: list[str]  # the queues whose slot it holds
    jobs: int
    jobs_per_s: float | None
    server_calls: float | None  # client-sent calls (commandstats)
    server_usec: float | None
    server_us_per_job: float | None


class Shards(TypedDict, total=False):
    """The summary's ``shards``: each queue's part and each master's, by name (JSON as written)."""

    queues: dict[str, QueueFigures]
    masters: dict[str, MasterFigures]


def shard_figures(
    counters: Mapping[str, int],
    home: Mapping[str, str],
    by_master: Mapping[str, CommandStats] | None,
    window_s: float,
) -> Shards:
    """The summary's ``shards``: ``queues`` {name: master, jobs, jobs/s} and ``masters``
    {host:port: its queues, jobs, jobs/s, client-sent calls and µs (commandstats), µs a job}."""
    queues: dict[str, QueueFigures] = {
        name: QueueFigures(
            master=master,
            jobs=int(counters.get(for_queue(name), 0)),
            jobs_per_s=_per_or_none(counters.get(for_queue(name), 0), window_s),
        )
        for name, master in sorted(home.items())
    }
    masters: dict[str, MasterFigures] = {}
    for master in sorted({*home.values(), *(by_master or {})}):
        mine = [name for name, q in queues.items() if q["master"] == master]
        jobs = sum(queues[name]["jobs"] for name in mine)
        side = client_side(by_master[master]) if by_master and master in by_master else None
        masters[master] = MasterFigures(
            queues=mine,
            jobs=jobs,
            jobs_per_s=_per_or_none(jobs, window_s),
            server_calls=side.total_calls if side else None,
            server_usec=side.total_usec if side else None,
            server_us_per_job=_per_or_none(side.total_usec, jobs) if side else None,
        )
    return Shards(queues=queues, masters=masters)


def build_summary(
    trial: TrialSettings,
    aggregate: Aggregate,
    window_s: float,
    mode: str,
    server: ServerFigures,
    end: WindowEnd | None = None,
    audit: SummaryAudit | None = None,
    window_clock: tuple[float, float] | None = None,
    wait: WaitSamples | None = None,
) -> TrialSummary:
    """The trial's summary: settings, merged histograms, per-process parts, headline figures.
    ``window_clock``: the window's open and close on CLOCK_MONOTONIC, so the stage's machine watch,
    in another process, judges this window and not Locust's start."""
    end = end or WindowEnd()
    whole = server.whole
    derived = derive(trial, aggregate, window_s, server, wait or WaitSamples())
    return TrialSummary(
        mode=mode,
        settings=trial,
        measured=True,
        complete=not end.missing_processes and end.aborted is None,
        aborted=end.aborted,
        refused=end.refused,
        window_s=window_s,
        window_clock_s=list(window_clock) if window_clock else None,
        missing_processes=end.missing_processes,
        stale_reports_dropped=aggregate.stale_reports,
        server_error=server.error,
        histograms={name: hdr.encode(h) for name, h in sorted(aggregate.histograms.items())},
        percentiles_us={name: hdr.summary(h) for name, h in sorted(aggregate.histograms.items())},
        counters=dict(sorted(aggregate.counters.items())),
        server={"calls": dict(whole.calls), "usec": dict(whole.usec)} if whole is not None else None,
        processes=[
            {
                "id": pid,
                "role": t.role,
                "final": t.final,
                "counters": dict(sorted(t.counters.items())),
                "counts": dict(sorted(t.counts.items())),
            }
            for pid, t in sorted(aggregate.processes.items())
        ],
        derived=derived,
        shards=shard_figures(aggregate.counters, server.home or {}, server.by_master, window_s),
        audit=audit,
    )


def refused_verdict(kind: str) -> str:
    """The audit's verdict on a run a refusal ended: its queues hold what the server let in, not
    the run's jobs, so counting them would judge the server's refusals."""
    return f"not audited: the server refused the run's calls ({kind}), so its queues are not the run's"


def unmeasured_summary(
    trial: TrialSettings, mode: str, aborted: str | None, refused: str | None = None
) -> TrialSummary:
    """The summary of a run that stopped before its window opened: no figures, only why."""
    return TrialSummary(
        mode, trial, measured=False, complete=False, aborted=aborted or WARM_UP_ONLY, refused=refused
    )


def write_summary(summary: TrialSummary, path: Path | None) -> None:
    """Log the run's headline (or why nothing was measured) and write the summary to ``path``."""
    if summary.measured:
        _log_headline(summary)
    else:
        log.warning("echomq: nothing was measured: %s", summary.aborted)
    if path is not None:
        write_json(path, summary.to_json())
    if summary.measured and summary.aborted:
        log.error("echomq: run stopped early: %s; what it measured is in %s", summary.aborted, path)


def _log_headline(summary: TrialSummary) -> None:
    d = summary.figures
    log.info(
        "echomq: %s: %d jobs in %.1fs = %.0f jobs/s, %.2f round trips/job, %.2f commands/job, "
        "cycle p50 %s µs%s",
        summary.settings.strategy,
        d.jobs,
        summary.window_s,
        d.jobs_per_s,
        d.round_trips_per_job,
        d.commands_per_job,
        summary.percentiles_us.get("cycle", {}).get("p50", "-"),
        ", SATURATED: " + "; ".join(d.saturated_because) if d.saturated else "",
    )
    if d.errors:
        kinds = ", ".join(f"{n} {kind}" for kind, n in d.errors_by_kind.items())
        log.warning("echomq: %d calls failed in the window (%s)", d.errors, kinds)
