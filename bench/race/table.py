"""The race audit's rows: a setting's counts summed over its repetitions, and the table printed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.protocol.sweep import has_gap
from bench.race.count import Anomalies
from bench.race.plan import RacePlan, RaceSetting


@dataclass
class RaceRow:
    setting: RaceSetting
    reps: int = 0
    counts: Anomalies = field(default_factory=Anomalies)

    def csv_row(self) -> dict[str, Any]:
        s, c = self.setting, self.counts
        return {
            "variant": s.variant,
            "sweepers": s.sweepers,
            "stalled_jobs": s.stalled_jobs,
            "delay_ms": s.delay_ms,
            "reps": self.reps,
            "double_recoveries": c.double_recoveries,
            "lost_attempt_updates": c.lost_attempt_updates,
            "requeued_after_finish": c.requeued_after_finish,
            "audit_violations": c.audit_violations,
        }

    @property
    def per_10k(self) -> float:
        """Anomalies per 10,000 stalled jobs reclaimed (stalled_jobs x reps)."""
        jobs = self.setting.stalled_jobs * self.reps
        return 10_000 * self.counts.total / jobs if jobs else 0.0


def format_table(rows: Sequence[RaceRow], plan: RacePlan) -> str:
    head = (
        f"{'variant':<20} {'sweepers':>8} {'jobs':>6} {'delay_ms':>9} {'reps':>4} "
        f"{'double':>7} {'lost':>7} {'requeued':>8} {'audit':>6} {'per_10k':>9}"
    )
    lines = [
        f"race audit: K sweepers at once over N stalled jobs, {plan.workers} workers finishing "
        "jobs meanwhile; counts summed over reps",
        head,
        "-" * len(head),
    ]
    for row in rows:
        s, c = row.setting, row.counts
        delay = f"{s.delay_ms:g}" if has_gap(s.variant) else "-"
        lines.append(
            f"{s.variant:<20} {s.sweepers:>8} {s.stalled_jobs:>6} {delay:>9} {row.reps:>4} "
            f"{c.double_recoveries:>7} {c.lost_attempt_updates:>7} {c.requeued_after_finish:>8} "
            f"{c.audit_violations:>6} {row.per_10k:>9.1f}"
        )
    lines += [
        "delay_ms is simulated: a sleep between a sweeper's check and its act. Atomic sweeps check",
        "  and act inside one script, so there is no gap to delay: their rows ('-') run at delay 0.",
        "double: reclaims beyond a job's first, the larger of the sweepers' returns and the final state.",
        "per_10k: all four anomalies per 10,000 stalled jobs reclaimed.",
    ]
    mismatched = [r for r in rows if r.counts.double_by_returns != r.counts.double_by_state]
    for row in mismatched:
        c = row.counts
        lines.append(
            f"  {row.setting.label()}: double by returns {c.double_by_returns}, "
            f"by final state {c.double_by_state} (workers finished some copies)"
        )
    unrecovered = sum(r.counts.unrecovered for r in rows)
    errors = sum(r.counts.errors for r in rows)
    if unrecovered or errors:
        lines.append(f"WARNING: {unrecovered} stalled jobs unreclaimed, {errors} thread errors (in audit)")
    return "\n".join(lines)
