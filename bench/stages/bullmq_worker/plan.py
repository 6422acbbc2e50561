"""The bullmq_worker stage's grid: which drivers run at which concurrency, and how many jobs a run."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.harness.profile import BullmqWorkerOptions
from bench.stages.bullmq_worker.worker_process import WINDOW_FROM

# BullMQ's Node package (peers/bullmq-node/driver.mjs): its Worker, and its documented manual
# processing with fetch next on (one call a job) or off (finish, then getNextJob)
NODE_DRIVERS = ("node_worker", "node_manual_fused", "node_manual_two_call")
BULLMQ_DRIVERS = (*NODE_DRIVERS, "bullmq_worker")  # the last: its Python port's Worker
# a run sized for the window at the expected rate, with room for drift: a driver's rate grows
# with its queue (the runs of 20261206-070251 sized at 1.25x came out 0.75-0.96 s of 1 s)
WINDOW_MARGIN = 1.5
MAX_JOBS = 500_000  # the most jobs one run pre-fills, however fast the driver was
SIZING_ATTEMPTS = 3  # runs of one driver in one repetition before a short window is let stand


@dataclass(frozen=True)
class Point:
    """One driver at one concurrency."""

    driver: str
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.driver} c{self.concurrency}"

    @property
    def node(self) -> bool:
        return self.driver in NODE_DRIVERS


def points_of(options: BullmqWorkerOptions, node: bool) -> list[Point]:
    """At each concurrency the profile's BullMQ drivers (the Node ones when the peer can run);
    then the suite's two loops (concurrency 1)."""
    drivers = [d for d in options.bullmq_worker_drivers if node or d not in NODE_DRIVERS]
    runs = [Point(d, c) for c in dict.fromkeys(options.bullmq_worker_concurrency) for d in drivers]
    return [*runs, Point("fused", 1), Point("two_call", 1)]


def expected_rate(rates: dict[Point, float], point: Point) -> float | None:
    """The rate a run is sized from: its own last one; else the fastest at its concurrency so far;
    else its driver's fastest at another; else none (the profile's jobs)."""
    if point in rates:
        return rates[point]
    for same in (lambda p: p.concurrency == point.concurrency, lambda p: p.driver == point.driver):
        if known := [rate for p, rate in rates.items() if same(p)]:
            return max(known)
    return None


def jobs_for(options: BullmqWorkerOptions, rate: float | None) -> int:
    """Jobs to pre-fill: the profile's, or more when the driver's expected rate (jobs/s, from its
    last run) would end the window sooner than bullmq-worker-window-s."""
    floor = options.bullmq_worker_jobs
    if rate is None or options.bullmq_worker_window_s <= 0:
        return floor
    sized = WINDOW_FROM + math.ceil(rate * options.bullmq_worker_window_s * WINDOW_MARGIN)
    return min(MAX_JOBS, max(floor, sized))


def short_window(options: BullmqWorkerOptions, window_s: float) -> bool:
    return window_s < options.bullmq_worker_window_s
