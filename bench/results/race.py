"""The race stage's contract: its rows (race.csv) and its meta.json section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from bench.results import rows


@dataclass(frozen=True)
class RaceRow(rows.RunRow):
    FILE: ClassVar[str] = "race.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "variant", "sweepers", "stalled_jobs", "delay_ms")
    METRICS: ClassVar[tuple[rows.Metric, ...]] = tuple(
        map(
            rows.Metric,
            ("double_recoveries", "lost_attempt_updates", "requeued_after_finish", "audit_violations"),
        )
    )

    variant: str
    sweepers: int
    stalled_jobs: int
    delay_ms: float
    workers: int  # worker threads finishing jobs during the sweeps
    slice_size: int  # ids a sliced sweep visits a call
    max_stalled: int
    reps: int
    double_recoveries: int
    lost_attempt_updates: int
    requeued_after_finish: int
    audit_violations: int
    foreign_cpu_pct: float | None = None  # the worst of the setting's repetitions
    steal_pct: float | None = None
    contended: bool = False  # any repetition


@dataclass(frozen=True)
class RaceMeta:
    """The race stage's section: its plan, and what race.csv's columns do not say."""

    variants: list[str] = field(default_factory=list)
    """The sweep variants raced."""
    sweepers: list[int] = field(default_factory=list)
    """Sweepers at once, each setting."""
    stalled_jobs: int | None = None
    """Stalled jobs a trial."""
    delays_ms: list[float] = field(default_factory=list)
    """The simulated gaps between check and act."""
    reps: int | None = None
    """Trials a setting."""
    workers: int | None = None
    """Worker threads beside the sweepers."""
    max_stalled: int | None = None
    """The sweeps' max stalled count."""
    deadline_s: float | None = None
    """A trial's deadline."""
    slice_size: int | None = None
    """A sliced sweep's slice."""
    protocols: list[str] = field(default_factory=list)
    """The protocols raced."""
    live_jobs: int | None = None
    """Live jobs the workers take a trial."""
    delay: str | None = None
    """How the gap is made."""
