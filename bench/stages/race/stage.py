"""The race audit: K sweepers of one variant at once over N stalled jobs, counting what their gaps do.

Each setting runs ``reps`` times, alternating, each run on a fresh queue (trial.py). What is
counted, summed over repetitions (occurrences, not jobs; count.py):

- double_recoveries: reclaims of a job beyond its first, by the sweepers' returns and by the final
  state (copies in wait plus failed beyond one); the larger, so neither source can hide one.
- lost_attempt_updates: increments missing from a job's attempt counters: its reclaims plus its
  finishes, less ``atm`` (in BullMQ, whose sweep counts stalls in ``stc``: reclaims less ``stc``,
  plus finishes less ``atm``).
- requeued_after_finish: a completed job's copies still in wait at the end, plus fetches of a job
  that already carried ``finishedOn``.
- audit_violations: what bench.protocol.audit finds that the columns above do not explain (a job in
  no place, an unknown id, a job in two places neither double-recovered nor requeued), plus stalled
  jobs unreclaimed at the deadline and errors in a sweeper or worker thread.

The delay between a sweeper's check and its act is a sleep, for variants with such a gap
(bench.protocol.sweep.has_gap): an atomic sweep, checking and acting in one script, runs at delay 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from bench.harness.context import RunContext
from bench.harness.machine import clock, watch_run
from bench.harness.overrides import SectionFlags
from bench.harness.profile import Profile, RaceOptions
from bench.harness.terminal import fold
from bench.protocol.connection import RedisSettings
from bench.protocol.sweep import SWEEPERS, has_gap
from bench.results.files import Ledger
from bench.results.race import RaceMeta, RaceRow
from bench.results.rows import RunIds
from bench.stages.race.plan import ALL, SWEEPERS_MAX, SWEEPERS_MIN, RacePlan, extra_scripts, points_of
from bench.stages.race.rows import RaceOutcome, row_of
from bench.stages.race.table import table
from bench.stages.race.trial import run_trial


def run_plan(
    settings: RedisSettings,
    plan: RacePlan,
    progress: Callable[[str], None],
    watch_pids: Sequence[int] = (),
) -> list[RaceOutcome]:
    """Every setting, ``reps`` times, alternating (rep 1 of each, then rep 2, ...), under one machine
    watch; each run is judged over its own span of it, set-up and audit included."""
    outcomes = {point: RaceOutcome(point) for point in points_of(plan)}
    spans: list[tuple[RaceOutcome, tuple[float, float]]] = []
    with watch_run(watch_pids) as watch:
        for rep in range(1, plan.reps + 1):
            for point, outcome in outcomes.items():
                opened = clock()
                found = run_trial(settings, point)
                spans.append((outcome, (opened, clock())))
                outcome.reps += 1
                outcome.counts += found
                progress(
                    f"{point.label()} rep {rep}/{plan.reps}: double {found.double_recoveries}, "
                    f"lost {found.lost_attempt_updates}, requeued {found.requeued_after_finish}, "
                    f"audit {found.audit_violations} ({found.sweeps} sweeps, {found.finished} finished)"
                )
    for outcome, span in spans:
        outcome.machine.append(watch.within(span))
    return list(outcomes.values())


# A trial's seconds, from 20261206-071620-default (40 trials of 400 jobs in 20 s; 0.2-1 s each)
TRIAL_OVERHEAD_S = 0.25  # a trial's set-up: N jobs stalled, the threads started, the audit
GAP_S_PER_JOB = 0.001  # an app-side sweep's round trips a job, over K sweepers on a shared machine
ATOMIC_S_PER_JOB = 0.0005


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """The seconds each trial of the stage should take, in order: for the run's ETA. A sweeper with
    a gap also waits its delay once a job, so a pass takes N x delay more."""
    plan = RacePlan.from_options(profile.race, profile.protocols)  # every protocol's runs count
    per_trial = []
    for point in points_of(plan):
        per_job = GAP_S_PER_JOB + point.delay_ms / 1000 if has_gap(point.variant) else ATOMIC_S_PER_JOB
        per_trial.append(TRIAL_OVERHEAD_S + point.stalled_jobs * per_job)
    return tuple(per_trial) * plan.reps


def check_profile(profile: Profile) -> None:
    """Refuse bad race settings before any stage of a run starts."""
    RacePlan.from_options(profile.race, profile.protocols)


def run_stage(ctx: RunContext) -> None:
    plan = RacePlan.from_options(ctx.profile.race, ctx.profile.protocols)
    ledger = Ledger(ctx.run_dir, RaceMeta)  # what the stage writes: its rows and section
    ledger.meta(  # the plan (its tuples JSON's lists), and what race.csv's columns do not say
        **dataclasses.asdict(plan),
        live_jobs=plan.stalled_jobs if plan.workers else 0,
        delay="simulated: a sleep between check and act; none for atomic sweeps",
    )
    outcomes = run_plan(ctx.settings, plan, ctx.progress.step, ctx.watch_pids)
    ids = RunIds(ctx.run_dir.name, ctx.profile.name)
    ledger.put(RaceRow, [row_of(o, ids) for o in outcomes])
    ctx.progress.done()
    print(fold(table(outcomes, plan)))


FLAGS = SectionFlags(
    RaceOptions,
    prefix="race-",
    helps={
        "race_variants": f"from {ALL}, {', '.join(SWEEPERS)}",
        "race_sweepers": f"concurrent sweepers, {SWEEPERS_MIN}..{SWEEPERS_MAX}, e.g. 2,8",
        "race_jobs": "stalled jobs per run (N)",
        "race_delay_ms": "simulated delay between check and act, e.g. 0,2",
        "race_reps": "repetitions of each setting",
        "race_workers": "worker threads finishing jobs during the sweeps (0 = none)",
        "race_deadline_s": "a run that has not reclaimed everything by then is an error",
        "race_slice": "ids a sliced sweep visits a call (small: a pass spans calls)",
        "race_max_stalled": "reclaims before a job goes to failed; low values test the failed path",
    },
)
ABOUT = (
    "The race audit alone: K sweepers of one variant at once over N stalled jobs. "
    "Settings default to the profile's race keys."
)


def scripts_alone(profile: Profile) -> tuple[str, ...]:
    """The variants' own scripts, beyond the protocols': loaded when the stage runs alone."""
    return extra_scripts(RacePlan.from_options(profile.race, profile.protocols).variants)
