"""Stage 1's grid: the load points a profile makes, in the order they run, and their names."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bench.harness.profile import FinishFetchOptions
from bench.results.finish_fetch_goals import BOUND_STRATEGIES


@dataclass(frozen=True)
class Point:
    """One load point: worker users, the simulated round-trip time, jobs in flight per worker,
    and how long each job is held."""

    workers: int
    rtt_ms: float
    concurrency: int = 1
    job_ms: float = 0.0
    queues: int = 1

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
        return "-".join([*parts, f"rtt{self.rtt_ms:g}"])


def point_id(protocol: str, strategy: str, point: Point) -> str:
    """``fused-w4-rtt0``, led by the protocol unless it is echomq (``bullmq.fused-w4-rtt0``): the
    name a run's histograms, Locust files and raw summary go under."""
    led = strategy if protocol == "echomq" else f"{protocol}.{strategy}"
    return f"{led}-{point.label}"


def points_of(opts: FinishFetchOptions) -> list[Point]:
    """The grid: every workers x queues x concurrency x job_ms x rtt_ms, in that order; then the
    Redis-bound point (bound_concurrency at rtt 0, job-ms 0), unless the grid holds it."""
    grid = [
        Point(w, rtt, c, j, q)
        for w in opts.workers
        for q in opts.queues
        for c in opts.concurrency
        for j in opts.job_ms
        for rtt in opts.rtt_ms
    ]
    bound = _bound_point(opts)
    return [*grid, bound] if bound is not None and bound not in grid else grid


def _bound_point(opts: FinishFetchOptions) -> Point | None:
    return Point(opts.workers[0], 0.0, opts.bound_concurrency, 0.0, 1) if opts.bound_concurrency else None


def strategies_at(opts: FinishFetchOptions, point: Point) -> list[str]:
    """The strategies run at ``point``: the profile's; at the Redis-bound point outside the grid only
    those its goal names (fused and two_call), to keep the profile's time."""
    if point != _bound_point(opts) or point in points_of(dataclasses.replace(opts, bound_concurrency=0)):
        return list(opts.strategies)
    return [s for s in opts.strategies if s in BOUND_STRATEGIES] or list(opts.strategies)
