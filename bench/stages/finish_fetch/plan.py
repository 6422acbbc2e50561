"""Stage 1's grid: the load points a profile makes, in the order they run, and their names."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from bench.harness.profile import FinishFetchOptions, parse_point
from bench.results.finish_fetch import BOUND_STRATEGIES, FinishFetchRow, Regime, regime_of


@dataclass(frozen=True)
class Point:
    """One load point: worker users, the simulated round-trip time, jobs in flight per worker,
    how long each job is held, and the regime it runs in (open: at ``load`` of the point's
    measured backlog capacity, ``rate`` jobs/s once the stage has measured it)."""

    workers: int
    rtt_ms: float
    concurrency: int = 1
    job_ms: float = 0.0
    queues: int = 1
    regime: str = Regime.BACKLOG
    load: float = 0.0
    rate: float = 0.0
    protocol: str = ""  # steady-at or open-at named one protocol: only it runs here ("" every one)

    @property
    def label(self) -> str:
        """w4-rtt1, w4-q3-c8-j5-rtt1: queues, concurrency and job time named when not 1, 1 and 0,
        so the names of runs without them stay as they were."""
        parts = [f"w{self.workers}"]
        if self.queues != 1:
            parts.append(f"q{self.queues}")
        if self.concurrency != 1:
            parts.append(f"c{self.concurrency}")
        if self.job_ms:
            parts.append(f"j{self.job_ms:g}")
        name = "-".join([*parts, f"rtt{self.rtt_ms:g}"])
        if self.regime == Regime.OPEN and self.load:
            return f"{name}-open{self.load * 100:g}"
        # a grid's own regime goes unnamed: backlog, or open at the profile's target-rate
        return f"{name}-{self.regime}" if self.regime == Regime.STEADY else name

    def at_rate(self, rate: float) -> Point:
        """The point offered ``rate`` jobs/s (open); at 0, the point as the plan names it."""
        return dataclasses.replace(self, rate=rate)

    @property
    def position(self) -> tuple[int, int, float, float, int]:
        """The grid position, whatever the regime: workers, concurrency, job-ms, rtt, queues."""
        return (self.workers, self.concurrency, self.job_ms, self.rtt_ms, self.queues)


def point_id(protocol: str, strategy: str, point: Point) -> str:
    """``fused-w4-rtt0``, led by the protocol unless it is echomq (``bullmq.fused-w4-rtt0``): the
    name a run's histograms, Locust files and raw summary go under."""
    led = strategy if protocol == "echomq" else f"{protocol}.{strategy}"
    return f"{led}-{point.label}"


def points_of(opts: FinishFetchOptions) -> list[Point]:
    """The grid: every workers x queues x concurrency x job_ms x rtt_ms, in that order; then the
    Redis-bound point (bound_concurrency at rtt 0, job-ms 0), unless the grid holds it; then the
    grid's points named in job-ms-at, at each job-ms-extra; then those named in steady-at, steady;
    last those named in open-at, open at each open-load (after the backlog points whose capacity
    sets their rate)."""
    regime = regime_of(opts.target_rate, opts.regime)
    grid = [
        Point(w, rtt, c, j, q, regime)
        for w in opts.workers
        for q in opts.queues
        for c in opts.concurrency
        for j in opts.job_ms
        for rtt in opts.rtt_ms
    ]
    bound = bound_point(opts)
    grid = [*grid, bound] if bound is not None and bound not in grid else grid
    longer = [
        dataclasses.replace(p, job_ms=job_ms)
        for p in _named([p for p in grid if p.job_ms == opts.job_ms[0]], opts.job_ms_at)
        for job_ms in opts.job_ms_extra
        if job_ms not in opts.job_ms
    ]
    if regime != Regime.BACKLOG:
        return [*grid, *longer]
    steady = [dataclasses.replace(p, regime=Regime.STEADY) for p in _named(grid, opts.steady_at)]
    open_ = [
        dataclasses.replace(p, regime=Regime.OPEN, load=load)
        for p in _named(grid, opts.open_at)
        for load in opts.open_loads
    ]
    return [*grid, *longer, *steady, *open_]


def _named(grid: list[Point], names: Iterable[str]) -> list[Point]:
    """The grid's points steady-at or open-at names (every workers, job-ms, queues),
    each for the protocol the name gives ("" for every one)."""
    named = [found for found in map(parse_point, names) if found is not None]
    return [
        dataclasses.replace(p, protocol=protocol)
        for protocol, concurrency, rtt in named
        for p in grid
        if (p.concurrency, p.rtt_ms) == (concurrency, rtt)
    ]


def protocols_at(point: Point, protocols: Iterable[str]) -> list[str]:
    """The stage's protocols that run at ``point``: the one it names, or every one."""
    return [p for p in protocols if not point.protocol or p == point.protocol]


def raw_at(opts: FinishFetchOptions, point: Point, protocol: str) -> bool:
    """Whether the raw driver and the reference run at ``point`` for ``protocol``: a grid point,
    named in raw-driver-at (or any, when that is empty)."""
    if not opts.raw_driver or point.regime != regime_of(opts.target_rate, opts.regime):
        return False
    if point.job_ms not in opts.job_ms:  # a job-ms-at point: the raw driver measures the grid's
        return False
    named = _named([point], opts.raw_driver_at)
    return not opts.raw_driver_at or any(p.protocol in ("", protocol) for p in named)


def bound_point(opts: FinishFetchOptions) -> Point | None:
    """The Redis-bound point outside the grid (bound-concurrency at rtt 0, job-ms 0), if any."""
    if not opts.bound_concurrency:
        return None
    regime = regime_of(opts.target_rate, opts.regime)
    return Point(opts.workers[0], 0.0, opts.bound_concurrency, 0.0, 1, regime)


def regime_options(opts: FinishFetchOptions, point: Point) -> FinishFetchOptions:
    """The profile as one trial at ``point`` runs it: a backlog's producers and batches, an open
    point's rate; a steady point as the profile says."""
    if point.regime == Regime.BACKLOG:  # never fewer producers, nor smaller batches, than the profile's
        producers = max(opts.backlog_producers, opts.producers)
        batch = max(opts.backlog_batch_size, opts.batch_size)
        return dataclasses.replace(opts, producers=producers, batch_size=batch, regime=Regime.BACKLOG)
    if point.regime == Regime.OPEN:
        return dataclasses.replace(opts, target_rate=point.rate or opts.target_rate)
    return dataclasses.replace(opts, regime=Regime.STEADY)


def capacity(rows: Iterable[FinishFetchRow], protocol: str, point: Point) -> float | None:
    """The point's measured backlog capacity for ``protocol``: the lower of fused's and two_call's
    median jobs/s at its position, each over its own clean backlog trials (over all of its trials when
    none was clean: one strategy's clean window must not hide the other's), so both strategies
    run open at one rate; None before any was measured."""
    here = [
        r
        for r in rows
        if r.protocol == protocol
        and r.regime == Regime.BACKLOG
        and r.jobs_per_s
        and (r.workers, r.concurrency, r.job_ms, r.rtt_ms, r.queues) == point.position
    ]
    medians: list[float] = []
    for strategy in BOUND_STRATEGIES:
        trials = [r for r in here if r.strategy == strategy]
        clean = [r for r in trials if not r.contended] or trials
        if values := [r.jobs_per_s for r in clean if r.jobs_per_s]:
            medians.append(statistics.median(values))
    return min(medians) if medians else None


def strategies_at(opts: FinishFetchOptions, point: Point) -> list[str]:
    """The strategies run at ``point``: the profile's; at the Redis-bound point outside the grid, and
    at the steady and open points beside the grid, only fused and two_call (the goals' pair), to
    keep the profile's time."""
    grid = point.regime == regime_of(opts.target_rate, opts.regime) and (
        point != bound_point(opts) or point in points_of(dataclasses.replace(opts, bound_concurrency=0))
    )
    return [s for s in opts.strategies if grid or s in BOUND_STRATEGIES] or list(opts.strategies)
