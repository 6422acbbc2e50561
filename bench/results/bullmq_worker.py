"""The bullmq_worker stage's contract: its rows (bullmq_worker.csv) and its meta.json section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from bench.results import rows
from bench.results.rows import JsonObject


@dataclass(frozen=True)
class BullmqWorkerRow(rows.Row):
    """One run of a worker driver over a pre-filled queue, timed from its 1,000th completion."""

    FILE: ClassVar[str] = "bullmq_worker.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "driver", "concurrency", "job_ms")
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (
        rows.Metric("jobs_per_s", higher_is_better=True),
        *map(rows.Metric, ("client_cpu_us_per_job", "redis_calls_per_job", "redis_us_per_job")),
    )
    protocol: str
    # "node_worker", "node_manual_fused", "node_manual_two_call" (BullMQ's Node package),
    # "bullmq_worker" (its Python port's asyncio Worker), or the suite's "fused" / "two_call" loop
    driver: str
    concurrency: int
    job_ms: float
    rep: int
    jobs: int  # completions in the window
    duration_s: float  # the window: from the 1,000th completion to the last
    jobs_per_s: float
    client_cpu_us_per_job: float
    redis_calls_per_job: float  # client-sent commands (EVALSHA, BZPOPMIN...) a job
    redis_us_per_job: float
    audit_ok: bool  # every pre-filled job completed exactly once
    prefilled_jobs: int | None = None  # in the queue at the start, sized for the window
    # the driver's own CPU was a saturated load process's (harness.machine): it, not Redis, set the pace
    saturated: bool = False
    redis_cpu_pct: float | None = None  # Redis's CPU over the window (INFO cpu), % of one core
    foreign_cpu_pct: float | None = None  # over the driver's whole run (its warm-up included)
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class BullmqWorkerMeta:
    window_from: int | None = None
    """The completion a window starts at."""
    jobs: int | None = None
    """Jobs pre-filled a trial, at least."""
    window_s: float | None = None
    """The window a trial is sized for."""
    options: str | None = None
    """BullMQ's worker options, in words."""
    python_bullmq: str | None = None
    """The Python bullmq package's version."""
    scripts_called: dict[str, str] = field(default_factory=dict)
    """The Python package's scripts the trials called: file -> SHA1."""
    node: JsonObject = field(default_factory=dict)
    """BullMQ's Node package: its versions and scripts called, or why it is absent."""
