"""The finish_fetch stage's contract: its rows (finish_fetch.csv, finish_fetch_shards.csv,
finish_fetch_queues.csv, finish_fetch_servers.csv), its meta.json section, its words (Regime, clean)
and the driver goals (Locust's against the raw loops'): how far the harness is from the least
client work the builders allow, and whether Redis, not the client, sets the pace where it should.
The stage's table and the report print the same goal lines from these rows, and neither may import
the other. Only uncontended rows are evidence: a goal with no such row says ``not measured``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from bench.results import rows
from bench.results.fits import finite_number


class Regime(StrEnum):
    """How a point's load is set (design.md "Name the regime"; docs/method.md#glossary)."""

    BACKLOG = "backlog"  # the wait list never runs dry: throughput is a drain rate
    STEADY = "steady"  # producers and workers at one pace (every row from before the column)
    OPEN = "open"  # producers at target_rate: queue latency


def regime_of(target_rate: float, given: str) -> str:
    """The regime a trial (or a grid) runs in: open whenever a rate is offered, else ``given``."""
    return Regime.OPEN if target_rate > 0 else given


NOT_STOPPED = "no"  # a remeasure_stopped cell when the budget stopped nothing
HARNESS_ADDS_GOAL_US = 20.0  # the latency-fidelity goal: the harness under Locust adds at most this


@dataclass(frozen=True)
class FinishFetchRow(rows.RunRow):
    FILE: ClassVar[str] = "finish_fetch.csv"
    KEYS: ClassVar[tuple[str, ...]] = (
        *("protocol", "strategy", "regime", "load"),
        *("workers", "queues", "concurrency", "job_ms", "rtt_ms"),
    )
    # what an older finish_fetch.csv's missing columns were (an empty load: no open point's)
    IMPLIED: ClassVar[Mapping[str, object]] = {
        "concurrency": 1, "job_ms": 0.0, "queues": 1, "regime": Regime.STEADY, "tries": 1, "load": 0.0,
        "loadgen_processes": 1, **rows.Row.IMPLIED,
    }  # fmt: skip
    RENAMED: ClassVar[Mapping[str, str]] = {"variant": "strategy"}
    # The raw driver's own columns are left out: it runs once a point, every repetition carries its
    # one value. A window's slowest cycle is one event (a pause, steal), not a spread, so shown: an A/A
    # pair of smoke runs (20261205-131625-smoke, -140855-smoke) moved one by x1.54, another by x3.35.
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (
        rows.Metric("jobs_per_s", higher_is_better=True),
        *map(rows.Metric, (
            "round_trips_per_job", "server_calls_per_job", "server_us_per_job", "cycle_p50_us",
            "cycle_p90_us", "cycle_p99_us", "cycle_p999_us", "e2e_p50_us", "e2e_p99_us",
            "server_commands_per_job", "loadgen_cpu_us_per_job",
        )),
        rows.Metric("cycle_max_us", maximum=True),
        rows.Metric("locust_raw_jobs_ratio", higher_is_better=True),
        rows.Metric("commands_per_job", exact=True),  # the strategy fixes it: 1 fused, 2 two-call
    )  # fmt: skip

    strategy: str
    rep: int
    workers: int
    producers: int
    rtt_ms: float
    batch_size: int
    payload_bytes: int
    target_rate: float
    warmup_s: float
    measure_s: float
    duration_s: float | None
    jobs: int
    jobs_per_s: float | None
    round_trips_per_job: float | None
    server_calls_per_job: float | None
    server_us_per_job: float | None
    cycle_p50_us: float | None
    cycle_p90_us: float | None
    cycle_p99_us: float | None
    cycle_p999_us: float | None
    cycle_max_us: float | None
    e2e_p50_us: float | None
    e2e_p99_us: float | None
    loadgen_cpu_pct: float | None
    saturated: bool
    audit_ok: bool
    # Jobs in flight per worker connection and the time each job is held.
    concurrency: int = 1
    job_ms: float = 0.0
    # Script calls a job's cycle sends (1 fused, 2 two-call): counted at the client, and by INFO
    # commandstats (EVALSHA calls less the producers' addJob and the fetches outside a cycle).
    commands_per_job: float | None = None
    server_commands_per_job: float | None = None
    # fetches outside a job's cycle (a slot's first, or after one found the queue empty), a job
    fetches_alone_per_job: float | None = None
    loadgen_cpu_us_per_job: float | None = None
    redis_cpu_pct: float | None = None
    # 1e6 / server_us_per_job: the jobs/s Redis could do were its own time the only cost
    redis_ceiling_jobs_per_s: float | None = None
    # which side set the pace (client, network, job time, redis) and its used share of capacity
    limit: str = ""
    limit_share: float | None = None
    # the server's used_memory growth over the window, per 1,000 jobs finished in it: kept jobs cost
    # memory, so a long window on the protocols' defaults fills a server (negative: memory freed)
    redis_mem_growth_bytes_per_1k_jobs: float | None = None
    # The raw driver at the same point and strategy (no Locust), the harness's calibration.
    raw_jobs_per_s: float | None = None
    raw_cpu_us_per_job: float | None = None
    raw_round_trips_per_job: float | None = None
    raw_commands_per_job: float | None = None
    locust_raw_jobs_ratio: float | None = None
    # The reference at the same point and strategy (reference.py: one process in lockstep, the
    # least client work the builders allow), and the raw driver's client CPU a job over its.
    reference_jobs_per_s: float | None = None
    reference_cpu_us_per_job: float | None = None
    reference_round_trips_per_job: float | None = None
    raw_reference_cpu_ratio: float | None = None
    # the mean wait a simulated round trip paid (rtt_ms nominal; a busy client wakes late)
    rtt_slept_ms: float | None = None
    # queues the producers and workers were spread over (finish_fetch_shards.csv: each master's part)
    queues: int = 1
    # a Regime; load: an open trial's rate over the point's backlog capacity
    regime: str = Regime.STEADY
    load: float | None = None
    e2e_p999_us: float | None = None
    # the wait list's length sampled through the window: samples, and those that found it empty
    wait_samples: int | None = None
    wait_empty_samples: int | None = None
    # windows this trial took: more than 1 when a contended or saturated one was measured again;
    # why the re-measuring stopped while the window was still so (the budget), else "no"
    tries: int = 1
    remeasure_stopped: str = field(default="", metadata={"empty_as": NOT_STOPPED})
    # Locust processes the window ran on: loadgen-processes, or one more for a saturated window's retry
    loadgen_processes: int = 1
    # the last window's rtt paid missed (rtt_missed), another load process not helping or left: the
    # report quotes no fused/two_call ratio at its point (an older run's: judged from rtt_slept_ms)
    rtt_missed: bool = False
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False

    @property
    def clean(self) -> bool:
        """Neither contended nor saturated: the window measured the protocol (docs/method.md#glossary)."""
        return not self.contended and not self.saturated


@dataclass(frozen=True)
class FinishFetchServerRow(rows.RunRow):
    """finish_fetch's Redis-bound point on each server a profile names (servers), a row a trial: a
    file of its own, so no figure of the main grid pools another server's rows."""

    FILE: ClassVar[str] = "finish_fetch_servers.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "server", "strategy", "workers", "concurrency", "rtt_ms")
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (
        rows.Metric("jobs_per_s", higher_is_better=True),
        *map(rows.Metric, ("round_trips_per_job", "server_us_per_job")),
    )
    server: str  # from the server's own INFO: "valkey 8.0.1"
    strategy: str
    rep: int
    workers: int
    concurrency: int
    rtt_ms: float
    regime: str
    jobs: int
    jobs_per_s: float | None
    round_trips_per_job: float | None
    server_us_per_job: float | None
    redis_cpu_pct: float | None  # of one core, over the window: near 100 where Redis set the pace
    limit: str  # which side set the pace (client, network, job time, redis)
    loadgen_processes: int
    rtt_slept_ms: float | None
    saturated: bool
    audit_ok: bool
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class FinishFetchPart(rows.RunRow):
    """The columns a part of a finish_fetch run starts with: which run, and its point."""

    strategy: str
    workers: int
    concurrency: int
    job_ms: float
    rtt_ms: float
    queues: int  # the run's queues, on every master
    rep: int


@dataclass(frozen=True)
class FinishFetchShardRow(FinishFetchPart):
    """One master's part of a finish_fetch run (each cluster master; one server: its one row).
    Over a run's rows, jobs and server_usec add up to its finish_fetch.csv row's."""

    FILE: ClassVar[str] = "finish_fetch_shards.csv"
    master: str  # host:port
    master_queues: int  # the run's queues on this master
    jobs: int  # finished in the window on this master's queues
    jobs_per_s: float | None
    server_calls: float | None  # client-sent commands this master ran in the window (commandstats)
    server_usec: float | None
    server_us_per_job: float | None
    foreign_cpu_pct: float | None = None  # the run's window, as its finish_fetch.csv row
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class FinishFetchQueueRow(FinishFetchPart):
    """One queue's part of a finish_fetch run, and the master that holds it."""

    FILE: ClassVar[str] = "finish_fetch_queues.csv"
    queue: str
    slot: int
    master: str
    jobs: int
    jobs_per_s: float | None
    foreign_cpu_pct: float | None = None  # the run's window, as its finish_fetch.csv row
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class Fidelity:
    """The latency-fidelity check: the p50 (µs) of one trivial EVALSHA at one client, four ways;
    None where a way was not measured, and why in its note."""

    calls: int
    """EVALSHA calls each way."""
    redis_benchmark_p50_us: float | None
    """redis-benchmark's p50 (the server and a C client: the floor)."""
    redis_benchmark_note: str
    """redis-benchmark's path, or why it was skipped."""
    redis_py_p50_us: float | None
    """A bare redis-py call in a plain loop."""
    raw_path_p50_us: float | None
    """The raw loops' timed path in a plain loop."""
    locust_path_p50_us: float | None = None
    """The same path under Locust (a probe trial)."""
    locust_note: str = ""
    """The probe trial's calls, or why it has no figure."""

    @property
    def harness_adds_us(self) -> float | None:
        """What the harness under Locust adds to the bare redis-py p50 (goal: HARNESS_ADDS_GOAL_US)."""
        locust, bare = self.locust_path_p50_us, self.redis_py_p50_us
        return None if locust is None or bare is None else locust - bare

    @property
    def locust_adds_us(self) -> float | None:
        """What Locust adds to the same timed path outside it."""
        locust, raw = self.locust_path_p50_us, self.raw_path_p50_us
        return None if locust is None or raw is None else locust - raw


@dataclass(frozen=True)
class FinishFetchMeta:
    rtt_ms: str | None = None
    """How the rtt_ms column's round trip is made (simulated, once an exchange)."""
    hdr_variant: str | None = None
    """How an hdr/ file names its variant."""
    audit_failures: dict[str, str] = field(default_factory=dict)
    """The audit's verdict of each trial whose audit did not pass, by trial."""
    errors: dict[str, int] = field(default_factory=dict)
    """Failed calls by kind, over every trial."""
    fidelity: Fidelity | None = None
    """The latency-fidelity check (absent when fidelity-calls is 0)."""
    clean: dict[str, str] = field(default_factory=dict)
    """Each point's clean windows ("clean k of n"), by point id: the windows its figures rest on."""
    remeasure: dict[str, float] = field(default_factory=dict)
    """The budget for measuring contended windows again (windows_a_point, budget_s) and what it
    spent (extra_windows, extra_s)."""
    left_out: dict[str, dict[str, str]] = field(default_factory=dict)
    """The protocols a server refused at the Redis-bound point: server -> protocol -> its reason."""


MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
RAW_REFERENCE_CPU_MAX = 1.25
LOCUST_RAW_JOBS_MIN = 0.8
# What a simulated round trip may pay over its nominal rtt (rtt_missed): a share of it, or a floor
# in ms where the share is below a wake-up's own lateness, whichever is larger.
RTT_TOLERANCE = 0.10
RTT_TOLERANCE_MS = 0.2
CPU_GOAL_CONCURRENCY = (8, 32)
BOUND_CONCURRENCY = 32  # the default profile's Redis-bound point (bound-concurrency)
BOUND_STRATEGIES = ("fused", "two_call")
BOUND_PROTOCOLS = ("echomq", "bullmq")
BACKLOG_FETCHES_ALONE_MAX = 0.02
OPEN_LOADS_MIN = 2
PROTOCOL_CPU_MAX = 1.25
# The client CPU a job each driver measured: Locust's load process, the raw driver's threads.
CPU_BY_DRIVER = (("Locust", "loadgen_cpu_us_per_job"), ("raw", "raw_cpu_us_per_job"))

Row = Mapping[str, Any]


def rtt_missed(rtt_ms: float, paid_ms: float | None, than_ms: float | None = None) -> bool:
    """Whether a paid rtt misses: over ``than_ms`` (the nominal ``rtt_ms`` unless given, e.g. the
    other strategy's paid rtt at the point) by more than RTT_TOLERANCE of ``rtt_ms`` or
    RTT_TOLERANCE_MS, whichever is larger. An rtt-0 point slept nothing and never misses; a paid
    rtt not recorded is not judged."""
    if rtt_ms <= 0 or paid_ms is None or not math.isfinite(paid_ms):
        return False
    base = rtt_ms if than_ms is None else than_ms
    # to the ns: a paid rtt written to the µs that sits on the bound is within it, not a float's hair over
    return round(paid_ms - base, 6) > round(max(RTT_TOLERANCE * rtt_ms, RTT_TOLERANCE_MS), 6)


@dataclass(frozen=True)
class DriverGoal:
    """One goal's verdict over a run's rows, and its worst point."""

    name: str
    verdict: str
    worst: str = ""  # the point furthest from the goal, with its figure ("" when not measured)
    unmeasured: str = ""  # what the goal names that the run did not measure (a profile's choice)

    def detail(self) -> str:
        said = "; ".join(
            f"{k}: {v}" for k, v in (("worst", self.worst), ("not measured", self.unmeasured)) if v
        )
        return f" ({said})" if said else ""


def _true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1")


def _rtt(row: Row) -> float:
    return finite_number(row.get("rtt_ms")) or 0.0


def _concurrency(row: Row) -> int:
    return int(finite_number(row.get("concurrency")) or 1)


def _processes(row: Row) -> int:
    """The load processes a row's window ran on (1 for a row from before the column)."""
    return int(finite_number(row.get("loadgen_processes")) or 1)


def _median(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def regime(row: Row) -> str:
    """The row's regime; steady for a row from before the column."""
    return str(row.get("regime") or Regime.STEADY)


def _point(row: Row) -> str:
    lead = "" if row.get("protocol") == "echomq" else f"{row.get('protocol')} "
    tail = "" if regime(row) == Regime.BACKLOG else f" {regime(row)}"
    load = finite_number(row.get("load"))
    tail += f" {load:.0%}" if regime(row) == Regime.OPEN and load else ""
    held = finite_number(row.get("job_ms")) or 0
    job = f" j{held:g}" if held else ""  # a job-ms-at point is a point of its own
    point = f"{row.get('strategy')} w{row.get('workers')} c{row.get('concurrency')}{job}"
    return f"{lead}{point} rtt{_rtt(row):g}{tail}"


def _by_point(rows: Iterable[Row], keep: Callable[[Row], bool]) -> dict[str, list[Row]]:
    points: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if not _true(row.get("contended")) and keep(row):
            points[_point(row)].append(row)
    return points


def _worst(
    name: str, figures: dict[str, float], limit: float, at_most: bool, form: str, unmeasured: str = ""
) -> DriverGoal:
    """Met when every point's figure is within ``limit``; the worst point named with its figure."""
    if not figures:
        return DriverGoal(name, NOT_MEASURED)
    worst = (max if at_most else min)(figures, key=lambda p: figures[p])
    met = all(v <= limit if at_most else v >= limit for v in figures.values())
    return DriverGoal(name, MET if met else MISSED, f"{worst} {form.format(figures[worst])}", unmeasured)


def _median_goal(
    name: str,
    points: dict[str, list[Row]],
    column: str,
    limit: float,
    at_most: bool,
    asked: Iterable[int] = (),
) -> DriverGoal:
    """A point's median of ``column`` against ``limit``; ``asked``: the concurrencies the goal names."""
    medians = {p: _median(finite_number(r.get(column)) for r in group) for p, group in points.items()}
    figures = {p: m for p, m in medians.items() if m is not None}
    measured = {_concurrency(r) for p in figures for r in points[p]}
    unmeasured = ", ".join(f"c{c}" for c in asked if c not in measured)
    return _worst(name, figures, limit, at_most, "{:.2f}", unmeasured)


def judge(rows: Iterable[Row]) -> list[DriverGoal]:
    """Every driver goal over a run's finish_fetch rows (only uncontended rows are evidence)."""
    rows = list(rows)
    cpu_points = _by_point(
        rows, lambda r: _concurrency(r) in CPU_GOAL_CONCURRENCY and r.get("strategy") in BOUND_STRATEGIES
    )
    return [
        _median_goal(
            f"raw CPU per job <= {RAW_REFERENCE_CPU_MAX:g}x the reference's (c8, c32)",
            cpu_points, "raw_reference_cpu_ratio", RAW_REFERENCE_CPU_MAX, at_most=True,
            asked=CPU_GOAL_CONCURRENCY,
        ),
        _median_goal(
            f"Locust jobs/s >= {LOCUST_RAW_JOBS_MIN:g}x the raw driver's (every point it ran at)",
            _by_point(rows, lambda r: True), "locust_raw_jobs_ratio", LOCUST_RAW_JOBS_MIN, at_most=False,
        ),
        _bound_goal(rows),
        _rtt_goal(rows),
        _median_goal(  # the wait list never ran dry, so a fused fetch-next found a job
            f"fused fetches alone <= {BACKLOG_FETCHES_ALONE_MAX:g} a job (every backlog point)",
            _by_point(rows, lambda r: regime(r) == Regime.BACKLOG and r.get("strategy") == "fused"),
            "fetches_alone_per_job", BACKLOG_FETCHES_ALONE_MAX, at_most=True,
        ),
        _grid_goal(rows),
        _open_goal(rows),
        _protocol_cpu_goal(rows),
    ]  # fmt: skip


def _bound_rows(rows: list[Row]) -> Callable[[Row], bool]:
    """The rows of the Redis-bound point: the backlog regime's when the run has any (a run from
    before the regimes: its own)."""
    regimes = {regime(r) for r in rows}
    regimes = {Regime.BACKLOG} if Regime.BACKLOG in regimes else regimes
    return lambda r: (
        regime(r) in regimes
        and _concurrency(r) == BOUND_CONCURRENCY
        and _rtt(r) == 0
        and (finite_number(r.get("job_ms")) or 0) == 0
        and r.get("strategy") in BOUND_STRATEGIES
        and r.get("protocol") in BOUND_PROTOCOLS
    )


def _protocol_cpu_goal(rows: list[Row]) -> DriverGoal:
    """bullmq's client CPU a job over echomq's at the Redis-bound point, each strategy and driver,
    on clean windows (neither contended nor saturated): the bullmq rows measure its scripts, not a
    costlier client."""
    name = (
        f"bullmq client CPU a job <= {PROTOCOL_CPU_MAX:g}x echomq's at c{BOUND_CONCURRENCY} rtt0"
        " (fused, two_call; Locust, raw)"
    )
    bound = _bound_rows(rows)
    clean = [r for r in rows if bound(r) and not _true(r.get("contended")) and not _true(r.get("saturated"))]
    # one load process's CPU a job is not two's (each has its own overhead, a master is added):
    # the windows on the fewest processes only (a row from before the column ran on one)
    fewest = min((_processes(r) for r in clean), default=1)
    clean = [r for r in clean if _processes(r) == fewest]
    ratios: dict[str, float] = {}
    for strategy in BOUND_STRATEGIES:
        for driver, column in CPU_BY_DRIVER:
            echomq, bullmq = (
                _median(
                    v
                    for r in clean
                    if r.get("protocol") == protocol and r.get("strategy") == strategy
                    for v in (finite_number(r.get(column)),)
                    if v is not None and v > 0
                )
                for protocol in BOUND_PROTOCOLS
            )
            if echomq is not None and bullmq is not None:
                ratios[f"{strategy} {driver}"] = bullmq / echomq
    asked = [f"{strategy} {driver}" for strategy in BOUND_STRATEGIES for driver, _ in CPU_BY_DRIVER]
    unmeasured = ", ".join(k for k in asked if k not in ratios)
    return _worst(name, ratios, PROTOCOL_CPU_MAX, True, "{:.2f}x", unmeasured)


def _grid_goal(rows: list[Row]) -> DriverGoal:
    """Every (concurrency, rtt) pair of the backlog grid, each protocol's, measured by fused and by
    two_call in a window no other work shared (uncontended; a saturated window counts: the load
    generator set that point's pace, which measuring again does not change)."""
    name = "every (concurrency, rtt) pair of the backlog grid uncontended, fused and two_call"
    if not (grid := [r for r in rows if regime(r) == Regime.BACKLOG]):
        return DriverGoal(name, NOT_MEASURED)
    pairs = sorted({(_concurrency(r), _rtt(r)) for r in grid})
    clean = {
        (str(r.get("protocol")), str(r.get("strategy")), _concurrency(r), _rtt(r))
        for r in grid
        if not _true(r.get("contended"))
    }
    missing = [
        f"{protocol} {strategy} c{c} rtt{rtt:g}"
        for protocol in sorted({str(r.get("protocol")) for r in grid})
        for strategy in BOUND_STRATEGIES
        for c, rtt in pairs
        if (protocol, strategy, c, rtt) not in clean
    ]
    worst = f"{len(missing)} missing, e.g. {missing[0]}" if missing else ""
    return DriverGoal(name, MISSED if missing else MET, worst)


def _open_goal(rows: list[Row]) -> DriverGoal:
    """Queue latency of the open regime, fused and two_call, each at OPEN_LOADS_MIN loads or more."""
    name = f"open-loop queue latency, fused and two_call, at {OPEN_LOADS_MIN} loads"
    loads: dict[str, set[float]] = {strategy: set() for strategy in BOUND_STRATEGIES}
    for row in rows:
        strategy, load = str(row.get("strategy")), finite_number(row.get("load"))
        if (
            regime(row) == Regime.OPEN
            and strategy in loads
            and load
            and not _true(row.get("contended"))
            and finite_number(row.get("e2e_p99_us")) is not None
        ):
            loads[strategy].add(load)
    if not any(loads.values()):
        return DriverGoal(name, NOT_MEASURED)
    fewest = min(loads, key=lambda s: len(loads[s]))
    met = all(len(found) >= OPEN_LOADS_MIN for found in loads.values())
    return DriverGoal(
        name, MET if met else MISSED, "" if met else f"{fewest} at {len(loads[fewest])} load(s)"
    )


def _point_limit(group: list[Row]) -> str:
    """The limit most of a point's windows named; a tie names every side it split between
    ("client/redis"), so the order the windows ran in does not decide it."""
    counts = Counter(str(r.get("limit")) for r in group if r.get("limit"))
    most = max(counts.values(), default=0)
    return "/".join(sorted(limit for limit, n in counts.items() if n == most)) or "-"


def _bound_goal(rows: list[Row]) -> DriverGoal:
    """At the Redis-bound point, the limit most repetitions named is Redis."""
    name = f"limit redis at c{BOUND_CONCURRENCY} rtt0 (fused, two_call; echomq, bullmq)"
    if not (points := _by_point(rows, _bound_rows(rows))):
        return DriverGoal(name, NOT_MEASURED)
    named = {point: _point_limit(group) for point, group in points.items()}
    missed = [p for p, limit in named.items() if limit != "redis"]
    worst = f"{missed[0]} limit {named[missed[0]]}" if missed else ""
    return DriverGoal(name, MISSED if missed else MET, worst)


def _rtt_goal(rows: list[Row]) -> DriverGoal:
    """The median rtt paid misses (rtt_missed) at no point not marked saturated."""
    points = _by_point(
        rows,
        lambda r: (
            _rtt(r) > 0 and finite_number(r.get("rtt_slept_ms")) is not None and not _true(r.get("saturated"))
        ),
    )
    paid = {  # the median wait paid, and the nominal one (a point's rows share it)
        point: (statistics.median([finite_number(r.get("rtt_slept_ms")) or 0 for r in group]), _rtt(group[0]))
        for point, group in points.items()
    }
    name = (
        f"rtt paid at most {RTT_TOLERANCE:.0%} or {RTT_TOLERANCE_MS:g} ms over nominal, the larger"
        " (unsaturated points)"
    )
    if not paid:
        return DriverGoal(name, NOT_MEASURED)
    worst = max(paid, key=lambda p: paid[p][0] / paid[p][1])
    verdict = MISSED if any(rtt_missed(nominal, median) for median, nominal in paid.values()) else MET
    return DriverGoal(name, verdict, f"{worst} paid {paid[worst][0] / paid[worst][1]:.2f}x")


def goal_lines(rows: Iterable[Row]) -> list[str]:
    """The goals as the stage's table and the report print them, one line each."""
    return [f"goal {goal.name}: {goal.verdict}{goal.detail()}" for goal in judge(rows)]
