"""The race audit's table on stdout: each setting's counts over its repetitions."""

from __future__ import annotations

from collections.abc import Sequence

from bench.harness.terminal import contended_note, render_table, wrap_note
from bench.protocol.sweep import has_gap
from bench.stages.race.plan import RacePlan
from bench.stages.race.rows import RaceOutcome


def table(outcomes: Sequence[RaceOutcome], plan: RacePlan, width: int | None = None) -> str:
    header = ["protocol", "variant", "K", "N", "delay", "reps"]
    header += ["double", "lost", "requeue", "audit", "per_10k", "busy"]
    rows = []
    for outcome in outcomes:
        s, c = outcome.setting, outcome.counts
        delay = f"{s.delay_ms:g}" if has_gap(s.variant) else "-"
        rows.append([
            s.protocol, s.variant, str(s.sweepers), str(s.stalled_jobs), delay, str(outcome.reps),
            str(c.double_recoveries), str(c.lost_attempt_updates), str(c.requeued_after_finish),
            str(c.audit_violations),
            f"{outcome.per_10k:.1f}" if outcome.per_10k < 1000 else f"{outcome.per_10k:,.0f}",
            f"{sum(m.contended for m in outcome.machine)}/{outcome.reps}",
        ])  # fmt: skip
    lines = [
        wrap_note(
            f"race audit: K sweepers at once over N stalled jobs, {plan.workers} "
            f"worker{'' if plan.workers == 1 else 's'} finishing jobs meanwhile; counts summed over reps",
            width,
        ),
        # numbers never fold mid-figure: at 80 columns the names fold instead
        render_table(
            header, rows, right=range(2, len(header)), keep_whole=range(2, len(header)), width=width, gap=1
        ),
    ]
    notes = [
        "K: sweepers at once; N: stalled jobs. delay (ms) is simulated: a sleep between a sweeper's "
        "check and its act. Atomic sweeps check and act inside one script, so there is no gap to "
        "delay: their rows ('-') run at delay 0.",
        "double: reclaims beyond a job's first, the larger of the sweepers' returns and the final state.",
        "per_10k: all four anomalies per 10,000 stalled jobs reclaimed.",
        "busy: the runs marked contended (other work used the machine during them).",
    ]
    if any(o.setting.protocol == "bullmq" for o in outcomes):
        notes.append(
            "bullmq: BullMQ's own moveStalledJobsToWait (its throttle key cleared before each call); "
            "its stalls count in stc, finishes in atm."
        )
    lines += [wrap_note(note, width) for note in notes]
    for outcome in outcomes:
        c = outcome.counts
        if c.double_by_returns != c.double_by_state:
            note = (
                f"  {outcome.setting.label()}: double by returns {c.double_by_returns}, "
                f"by final state {c.double_by_state} (workers finished some copies)"
            )
            lines.append(wrap_note(note, width, "    "))
    if samples := [m for o in outcomes for m in o.machine if m.contended]:
        foreign, steal = [m.foreign_cpu_pct for m in samples], [m.steal_pct for m in samples]
        why = "their interleavings are not the quiet machine's"
        total = sum(o.reps for o in outcomes)
        lines.append(contended_note(len(samples), total, "runs", foreign, steal, why, width))
    unrecovered = sum(o.counts.unrecovered for o in outcomes)
    errors = sum(o.counts.errors for o in outcomes)
    if unrecovered or errors:
        lines.append(f"WARNING: {unrecovered} stalled jobs unreclaimed, {errors} thread errors (in audit)")
    return "\n".join(lines)
