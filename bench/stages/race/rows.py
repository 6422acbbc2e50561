"""The race audit's outcomes: a setting's counts summed over its repetitions, and its race.csv row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench.harness.machine import MachineSample, worst_of
from bench.results.race import RaceRow
from bench.results.rows import RunIds
from bench.stages.race.count import Anomalies
from bench.stages.race.plan import Point


@dataclass
class RaceOutcome:
    """A setting's counts, summed over the repetitions run so far."""

    setting: Point
    reps: int = 0
    counts: Anomalies = field(default_factory=Anomalies)
    machine: list[MachineSample] = field(default_factory=list)  # each repetition's window

    @property
    def per_10k(self) -> float:
        """Anomalies per 10,000 stalled jobs reclaimed (stalled_jobs x reps)."""
        jobs = self.setting.stalled_jobs * self.reps
        return 10_000 * self.counts.total / jobs if jobs else 0.0


def row_of(outcome: RaceOutcome, ids: RunIds) -> RaceRow:
    """Its race.csv row; the machine columns are its worst repetition's."""
    s, c = outcome.setting, outcome.counts
    row = RaceRow(
        run_id=ids.run_id,
        protocol=s.protocol,  # the setting's own: a run alternates protocols
        profile=ids.profile,
        variant=s.variant,
        sweepers=s.sweepers,
        stalled_jobs=s.stalled_jobs,
        delay_ms=s.delay_ms,
        workers=s.workers,
        slice_size=s.slice_size,
        max_stalled=s.max_stalled,
        reps=outcome.reps,
        double_recoveries=c.double_recoveries,
        lost_attempt_updates=c.lost_attempt_updates,
        requeued_after_finish=c.requeued_after_finish,
        audit_violations=c.audit_violations,
    )
    worst = worst_of(outcome.machine)
    return dataclasses.replace(row, **worst.row_fields()) if worst else row
