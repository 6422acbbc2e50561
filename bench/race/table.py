"""The race audit's outcomes: a setting's counts summed over its repetitions, its race.csv row, the table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.protocol.sweep import has_gap
from bench.race.count import Anomalies
from bench.race.plan import RacePlan, RaceSetting
from bench.results import RaceRow


@dataclass
class RaceOutcome:
    """A setting's counts, summed over the repetitions run so far."""

    setting: RaceSetting
    reps: int = 0
    counts: Anomalies = field(default_factory=Anomalies)

    def row(self) -> RaceRow:
        """Its race.csv row."""
        s, c = self.setting, self.counts
        return RaceRow(
            variant=s.variant,
            sweepers=s.sweepers,
            stalled_jobs=s.stalled_jobs,
            delay_ms=s.delay_ms,
            reps=self.reps,
            double_recoveries=c.double_recoveries,
            lost_attempt_updates=c.lost_attempt_updates,
            requeued_after_finish=c.requeued_after_finish,
            audit_violations=c.audit_violations,
            protocol=s.protocol,
        )

    @property
    def per_10k(self) -> float:
        """Anomalies per 10,000 stalled jobs reclaimed (stalled_jobs x reps)."""
        jobs = self.setting.stalled_jobs * self.reps
        return 10_000 * self.counts.total / jobs if jobs else 0.0


def format_table(outcomes: Sequence[RaceOutcome], plan: RacePlan) -> str:
    head = (
        f"{'protocol':<8} {'variant':<20} {'sweepers':>8} {'jobs':>6} {'delay_ms':>9} {'reps':>4} "
        f"{'double':>7} {'lost':>7} {'requeued':>8} {'audit':>6} {'per_10k':>9}"
    )
    lines = [
        f"race audit: K sweepers at once over N stalled jobs, {plan.workers} workers finishing "
        "jobs meanwhile; counts summed over reps",
        head,
        "-" * len(head),
    ]
    for outcome in outcomes:
        s, c = outcome.setting, outcome.counts
        delay = f"{s.delay_ms:g}" if has_gap(s.variant) else "-"
        lines.append(
            f"{s.protocol:<8} {s.variant:<20} {s.sweepers:>8} {s.stalled_jobs:>6} {delay:>9} "
            f"{outcome.reps:>4} "
            f"{c.double_recoveries:>7} {c.lost_attempt_updates:>7} {c.requeued_after_finish:>8} "
            f"{c.audit_violations:>6} {outcome.per_10k:>9.1f}"
        )
    lines += [
        "delay_ms is simulated: a sleep between a sweeper's check and its act. Atomic sweeps check",
        "  and act inside one script, so there is no gap to delay: their rows ('-') run at delay 0.",
        "double: reclaims beyond a job's first, the larger of the sweepers' returns and the final state.",
        "per_10k: all four anomalies per 10,000 stalled jobs reclaimed.",
    ]
    if any(o.setting.protocol == "bullmq" for o in outcomes):
        lines.append(
            "bullmq: BullMQ's own moveStalledJobsToWait (its throttle key cleared before each call); "
            "its stalls count in stc, finishes in atm."
        )
    mismatched = [o for o in outcomes if o.counts.double_by_returns != o.counts.double_by_state]
    for outcome in mismatched:
        c = outcome.counts
        lines.append(
            f"  {outcome.setting.label()}: double by returns {c.double_by_returns}, "
            f"by final state {c.double_by_state} (workers finished some copies)"
        )
    unrecovered = sum(o.counts.unrecovered for o in outcomes)
    errors = sum(o.counts.errors for o in outcomes)
    if unrecovered or errors:
        lines.append(f"WARNING: {unrecovered} stalled jobs unreclaimed, {errors} thread errors (in audit)")
    return "\n".join(lines)
