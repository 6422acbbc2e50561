"""The race audit: K sweepers of one variant at once over N stalled jobs, counting what their gaps do.

One run (one repetition of one setting), on a fresh queue:

1. N jobs are fetched under a 1 ms lock and left there: stalled (in active, lock expired).
2. With workers, N more "live" jobs wait; W Worker threads, each on its own
   connection, fetch and finish them (real locks) while the sweeps run. They
   take exactly N jobs, from the right of wait, where the live jobs are: an
   app-side sweep LPUSHes what it reclaims to the left, so a job it requeues
   stays visible in wait at the end (an atomic sweep RPUSHes to the right, and
   the workers also take and finish the jobs it reclaimed).
3. K sweeper threads, each on its own connection, start together at a barrier
   and sweep repeatedly until every stalled job has been reclaimed and the
   workers are done (the atomic sweeps thus honour their two passes: one sweep
   marks, a later one moves; a sliced sweep gets a slice below N, so its passes
   span calls that other sweepers' calls interleave with). Past the deadline a
   run stops and counts an error.

What is counted, summed over repetitions (occurrences, not jobs):

- double_recoveries: reclaims of a job beyond its first. Counted from the
  sweepers' own returns and from the final state (copies in wait plus failed
  beyond one); the larger of the two, so neither source can hide one.
- lost_attempt_updates: increments missing from a job's ``atm``: the times it
  was reclaimed plus the times a worker finished it, less ``atm``.
- requeued_after_finish: copies of a finished job put back to work: a
  completed job's copies still in wait at the end, plus fetches of a job that
  already carried ``finishedOn``.
- audit_violations: what bench.protocol.audit finds that the columns above do not
  explain (a job in no place, an unknown id, a job in two places that was
  neither double-recovered nor requeued), plus stalled jobs still unreclaimed
  at the deadline and errors in a sweeper or worker thread.

The delay between a sweeper's check and its act is simulated (a sleep) and
applies only to variants with such a gap (their constructor takes
``act_delay``). An atomic sweep checks and acts inside one script: it has no
gap, so it runs at delay 0 only.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.harness.context import Progress, RunContext
from bench.harness.meta import collect_meta
from bench.harness.profile import Profile, RaceOptions, load_profile
from bench.harness.server import redis_for_run
from bench.protocol.audit import audit, server_run_id
from bench.protocol.connection import CountingRedis, RedisSettings
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions
from bench.protocol.scripts import SCRIPT_FILES
from bench.protocol.sweep import SWEEPERS, Sweeper, SweepResult
from bench.race.count import Anomalies, count_anomalies, read_state
from bench.results import RACE_COLUMNS, RESULTS_DIR, make_run_dir, update_meta, write_csv

# High enough that every reclaimed job goes to wait (the failed path is counted too, if asked for).
MAX_STALLED = 1000
SWEEPERS_MIN, SWEEPERS_MAX = 2, 16
STALL_LOCK_MS = 1  # the crashed worker's lock: gone almost at once
WORKER_LOCK_MS = 60_000  # a live worker's lock never expires during a run
JOIN_GRACE_S = 35.0  # beyond the deadline: one socket timeout (30 s) and a margin
ALL = "all"


# --- variants ---------------------------------------------------------------------------


def variant_names(requested: Iterable[str]) -> tuple[str, ...]:
    """The requested variants, checked against the sweep registry; ``all`` is every one in it."""
    names: list[str] = []
    for name in requested:
        if name == ALL:
            names.extend(v for v in SWEEPERS if v not in names)
        elif name not in SWEEPERS:
            raise BenchError(f"unknown race variant {name!r}; choose from {ALL}, {', '.join(SWEEPERS)}")
        elif name not in names:
            names.append(name)
    if not names:
        raise BenchError(f"no race variant given; choose from {ALL}, {', '.join(SWEEPERS)}")
    return tuple(names)


def has_gap(variant: str) -> bool:
    """True when the sweep checks and acts in separate round trips (it takes an ``act_delay``)."""
    return "act_delay" in inspect.signature(SWEEPERS[variant]).parameters


def extra_scripts(variants: Iterable[str]) -> tuple[str, ...]:
    """Script files the variants need beyond the protocol's own."""
    protocol = set(SCRIPT_FILES.values())
    files: list[str] = []
    for variant in variants:
        script = getattr(SWEEPERS[variant], "script_file", None)
        if isinstance(script, str) and script not in protocol and script not in files:
            files.append(script)
    return tuple(files)


def make_sweeper(variant: str, queue: Queue, max_stalled: int, delay_ms: float, slice_size: int) -> Sweeper:
    """A sweeper of ``variant``: with the simulated delay where it has a gap, and the
    given slice where it sweeps in slices (so a pass spans calls that interleave)."""
    factory: Any = SWEEPERS[variant]
    takes = inspect.signature(factory).parameters
    options: dict[str, Any] = {"max_stalled": max_stalled}
    if "act_delay" in takes and delay_ms > 0:
        pause_s = delay_ms / 1000.0
        options["act_delay"] = lambda: time.sleep(pause_s)
    if "slice_size" in takes:
        options["slice_size"] = slice_size
    sweeper: Sweeper = factory(queue, **options)
    return sweeper


# --- the plan ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RaceSetting:
    """One cell of the plan: run ``reps`` times, its counts summed into one race.csv row."""

    variant: str
    sweepers: int
    stalled_jobs: int
    delay_ms: float
    workers: int
    max_stalled: int = MAX_STALLED
    deadline_s: float = 60.0
    slice_size: int = 50

    def label(self) -> str:
        delay = f"{self.delay_ms:g} ms" if has_gap(self.variant) else "none (atomic)"
        sliced = "slice_size" in inspect.signature(SWEEPERS[self.variant]).parameters
        return (
            f"{self.variant} sweepers={self.sweepers} jobs={self.stalled_jobs} "
            f"delay={delay} workers={self.workers}" + (f" slice={self.slice_size}" if sliced else "")
        )


@dataclass(frozen=True)
class RacePlan:
    variants: tuple[str, ...]
    sweepers: tuple[int, ...]
    stalled_jobs: int
    delays_ms: tuple[float, ...]
    reps: int
    workers: int
    max_stalled: int = MAX_STALLED
    deadline_s: float = 60.0
    slice_size: int = 50

    @classmethod
    def from_options(cls, options: RaceOptions, **overrides: Any) -> RacePlan:
        plan = cls(
            variants=variant_names(options.race_variants),
            sweepers=options.race_sweepers,
            stalled_jobs=options.race_jobs,
            delays_ms=options.race_delay_ms,
            reps=options.race_reps,
            workers=options.race_workers,
            deadline_s=options.race_deadline_s,
            slice_size=options.race_slice,
        )
        plan = dataclasses.replace(plan, **overrides)
        plan.check()
        return plan

    def check(self) -> None:
        for k in self.sweepers:
            if not SWEEPERS_MIN <= k <= SWEEPERS_MAX:
                raise BenchError(
                    f"race sweepers = {k} is outside {SWEEPERS_MIN}..{SWEEPERS_MAX}; "
                    "a race needs two or more sweepers at once"
                )
        for delay in self.delays_ms:
            if delay < 0:
                raise BenchError(f"race delay {delay:g} ms is negative; use 0 or more")
        for name, value, low in (
            ("jobs", self.stalled_jobs, 1),
            ("reps", self.reps, 1),
            ("workers", self.workers, 0),
            ("max stalled", self.max_stalled, 0),
            ("slice", self.slice_size, 1),
        ):
            if value < low:
                raise BenchError(f"race {name} = {value} is below {low}; use {low} or more")
        if self.deadline_s <= 0:
            raise BenchError(f"race deadline {self.deadline_s:g} s must be above 0")

    def settings(self) -> list[RaceSetting]:
        """Every setting; an atomic variant has no gap to delay, so it runs once, at delay 0."""
        cells: list[RaceSetting] = []
        for k in self.sweepers:
            for variant in self.variants:
                delays = self.delays_ms if has_gap(variant) else (0.0,)
                for delay in dict.fromkeys(delays):
                    cells.append(
                        RaceSetting(
                            variant,
                            k,
                            self.stalled_jobs,
                            delay,
                            self.workers,
                            self.max_stalled,
                            self.deadline_s,
                            self.slice_size,
                        )
                    )
        return cells


# --- one run ----------------------------------------------------------------------------


class RaceLog:
    """What the sweeper and worker threads saw, shared under one lock."""

    def __init__(self, stalled_ids: Iterable[str], fetch_budget: int, deadline: float) -> None:
        self._lock = threading.Lock()
        self.remaining = set(stalled_ids)
        self.reclaims: Counter[str] = Counter()
        self.finishes: Counter[str] = Counter()
        self.fetched_finished = 0
        self.refused_finishes = 0
        self.sweeps = 0
        self.errors: list[str] = []
        self.deadline = deadline
        self._budget = fetch_budget
        self._unfinished = fetch_budget
        self.stop = threading.Event()  # an error or the deadline: every thread stops
        self.all_reclaimed = threading.Event()
        self.workers_done = threading.Event()
        if not self.remaining:
            self.all_reclaimed.set()
        if fetch_budget == 0:
            self.workers_done.set()

    def record_sweep(self, result: SweepResult) -> None:
        with self._lock:
            self.sweeps += 1
            for job_id in (*result.moved, *result.failed):
                self.reclaims[job_id] += 1
                self.remaining.discard(job_id)
            if not self.remaining:
                self.all_reclaimed.set()

    def take_fetch(self) -> bool:
        with self._lock:
            if self._budget == 0:
                return False
            self._budget -= 1
            return True

    def give_back_fetch(self) -> None:
        with self._lock:
            self._budget += 1

    def record_finish(self, job_id: str, was_finished: bool, code: int) -> None:
        with self._lock:
            self.fetched_finished += was_finished
            if code >= 0:
                self.finishes[job_id] += 1
            else:
                self.refused_finishes += 1
            self._unfinished -= 1
            if self._unfinished == 0:
                self.workers_done.set()

    def fail(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
        self.stop.set()

    def past_deadline(self) -> bool:
        """True past the deadline; the first thread to see it counts one error and stops the run."""
        if time.monotonic() <= self.deadline:
            return False
        with self._lock:
            if not self.stop.is_set():
                self.errors.append(f"deadline passed with {len(self.remaining)} stalled jobs unreclaimed")
                self.stop.set()
        return True

    @property
    def finished(self) -> bool:
        return self.all_reclaimed.is_set() and self.workers_done.is_set()


def _guarded(log: RaceLog, what: str, start: threading.Barrier, loop: Callable[[], None]) -> None:
    """Run a thread's loop after the barrier; any error is counted and stops the run."""
    try:
        start.wait()
        loop()
    except threading.BrokenBarrierError:
        log.fail(f"{what}: the start barrier broke")
    except Exception as exc:  # counted, not raised: the run ends and says so
        log.fail(f"{what}: {type(exc).__name__}: {exc}")
        start.abort()


def _sweep_loop(sweeper: Sweeper, log: RaceLog) -> None:
    while not log.stop.is_set():
        log.record_sweep(sweeper.sweep())
        if log.finished or log.past_deadline():
            return


def _work_loop(worker: Worker, log: RaceLog) -> None:
    while not log.stop.is_set() and log.take_fetch():
        job = worker.fetch()
        if job is None:  # wait is momentarily empty
            log.give_back_fetch()
            if log.past_deadline():
                return
            log.stop.wait(0.001)
            continue
        outcome = worker.finish(job, fetch_next=False)
        log.record_finish(job.id, "finishedOn" in job.fields, outcome.code)


def stall_jobs(queue: Queue, count: int) -> list[str]:
    """``count`` jobs fetched under a 1 ms lock and left: in active, their locks expired."""
    ids: list[str] = []
    producer = Producer(queue)
    for start in range(0, count, 1000):
        ids.extend(producer.add_batch(min(1000, count - start)))
    crashed = Worker(queue, "two_call", WorkerOptions(lock_ms=STALL_LOCK_MS))
    fetched = [crashed.fetch() for _ in ids]
    if {j.id for j in fetched if j is not None} != set(ids):
        raise BenchError(f"queue {queue.keys.name} was not empty: could not stall exactly {count} jobs")
    deadline = time.monotonic() + 5.0
    while any(
        queue.client.exists(*(queue.keys.lock(j) for j in ids[s : s + 1000])) for s in range(0, count, 1000)
    ):
        if time.monotonic() > deadline:
            raise BenchError("the 1 ms locks of the stalled jobs did not expire within 5 s")
        time.sleep(0.005)
    return ids


@dataclass
class _Actors:
    clients: list[CountingRedis] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)


def run_once(settings: RedisSettings, setting: RaceSetting) -> Anomalies:
    """One repetition of ``setting`` on a fresh queue, deleted afterwards."""
    extra = extra_scripts([setting.variant])
    client = settings.connect()
    queue = Queue.open(client, f"race-{uuid.uuid4().hex[:10]}", extra)
    actors = _Actors([client])
    try:
        run_id = server_run_id(queue)
        stalled = stall_jobs(queue, setting.stalled_jobs)
        live = []
        if setting.workers:
            live = Producer(queue).add_batch(setting.stalled_jobs)
        log = RaceLog(stalled, len(live), time.monotonic() + setting.deadline_s)
        start = threading.Barrier(setting.sweepers + setting.workers)

        def on_own_connection() -> Queue:
            own = settings.connect()
            actors.clients.append(own)
            return queue.with_client(own)

        sweepers = [
            make_sweeper(
                setting.variant,
                on_own_connection(),
                setting.max_stalled,
                setting.delay_ms,
                setting.slice_size,
            )
            for _ in range(setting.sweepers)
        ]
        workers = [
            Worker(on_own_connection(), "two_call", WorkerOptions(lock_ms=WORKER_LOCK_MS))
            for _ in range(setting.workers)
        ]
        sweeper_threads = [
            threading.Thread(
                target=_guarded,
                args=(log, f"sweeper {i}", start, lambda s=s: _sweep_loop(s, log)),
                daemon=True,
            )
            for i, s in enumerate(sweepers)
        ]
        worker_threads = [
            threading.Thread(
                target=_guarded, args=(log, f"worker {i}", start, lambda w=w: _work_loop(w, log)), daemon=True
            )
            for i, w in enumerate(workers)
        ]
        actors.threads = [*sweeper_threads, *worker_threads]
        for thread in actors.threads:
            thread.start()
        for thread in sweeper_threads:
            thread.join(max(0.0, log.deadline - time.monotonic()) + JOIN_GRACE_S)
        log.stop.set()
        for thread in worker_threads:
            thread.join(JOIN_GRACE_S)
        if any(t.is_alive() for t in actors.threads):
            log.fail("a sweeper or worker did not return: it is left running, its counts are not final")
        audited = audit(queue, [*stalled, *live], run_id)
        if audited.server_restarted:
            raise BenchError("Redis restarted during the race audit, so its counts are gone; run again")
        found = count_anomalies(
            read_state(queue, [*stalled, *live]), audited, log.reclaims, log.finishes, log.fetched_finished
        )
        found.unrecovered = len(log.remaining)
        found.errors = len(log.errors)
        found.audit_violations += found.unrecovered + found.errors
        found.reclaimed = len(stalled) - found.unrecovered
        found.sweeps = log.sweeps
        for message in log.errors:
            print(f"echomq-bench: race {setting.label()}: {message}", file=sys.stderr)
        return found
    finally:
        queue.delete()
        for own in actors.clients:
            own.close()


# --- the stage --------------------------------------------------------------------------


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


def run_plan(settings: RedisSettings, plan: RacePlan, progress: Callable[[str], None]) -> list[RaceRow]:
    """Every setting, ``reps`` times, alternating: rep 1 of each setting, then rep 2, ..."""
    rows = {cell: RaceRow(cell) for cell in plan.settings()}
    for rep in range(1, plan.reps + 1):
        for cell, row in rows.items():
            found = run_once(settings, cell)
            row.reps += 1
            row.counts = row.counts + found
            progress(
                f"{cell.label()} rep {rep}/{plan.reps}: double {found.double_recoveries}, "
                f"lost {found.lost_attempt_updates}, requeued {found.requeued_after_finish}, "
                f"audit {found.audit_violations} ({found.sweeps} sweeps, {found.finished} finished)"
            )
    return list(rows.values())


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


def plan_record(plan: RacePlan) -> dict[str, Any]:
    """The plan as meta.json keeps it: what the columns of race.csv do not say."""
    return {
        **dataclasses.asdict(plan),
        "live_jobs": plan.stalled_jobs if plan.workers else 0,
        "delay": "simulated: a sleep between check and act; none for atomic sweeps",
    }


def check_profile(profile: Profile) -> None:
    """Refuse bad race settings before any stage of a run starts."""
    RacePlan.from_options(profile.race)


def run_stage(ctx: RunContext) -> None:
    plan = RacePlan.from_options(ctx.profile.race)
    update_meta(ctx.run_dir, race=plan_record(plan))
    rows = run_plan(ctx.settings, plan, ctx.progress)
    write_csv(ctx.run_dir / "race.csv", RACE_COLUMNS, [r.csv_row() for r in rows])
    ctx.progress.done()
    print(format_table(rows, plan))


# --- python -m bench race ---------------------------------------------------------------


def _numbers(flag: str, text: str, kind: type[int] | type[float]) -> tuple[Any, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = tuple(kind(p) for p in parts)
    except ValueError:
        what = "whole numbers" if kind is int else "numbers"
        raise BenchError(f"{flag} {text!r}: give {what}, comma-separated (e.g. 2,8)") from None
    if not values:
        raise BenchError(f"{flag} is empty; give at least one value")
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench race",
        description="The race audit alone: K sweepers of one variant at once over N stalled jobs. "
        "Settings default to the profile's race keys.",
    )
    parser.add_argument("--profile", default="default", help="profiles/<name>.conf, or a path")
    parser.add_argument("--variants", help=f"comma-separated, from {ALL}, {', '.join(SWEEPERS)}")
    parser.add_argument("--sweepers", help=f"concurrent sweepers, {SWEEPERS_MIN}..{SWEEPERS_MAX}, e.g. 2,8")
    parser.add_argument("--jobs", help="stalled jobs per run (N)")
    parser.add_argument("--delay-ms", help="simulated delay between check and act, e.g. 0,2")
    parser.add_argument("--reps", help="repetitions of each setting")
    parser.add_argument("--workers", help="worker threads finishing jobs during the sweeps (0 = none)")
    parser.add_argument("--max-stalled", default=str(MAX_STALLED), help="low values test the failed path")
    parser.add_argument("--slice", help="ids a sliced sweep visits a call (small: a pass spans calls)")
    parser.add_argument("--deadline-s", help="a run that has not reclaimed everything by then is an error")
    parser.add_argument("--results", default=str(RESULTS_DIR), help="where the run folder goes")
    return parser.parse_args(argv)


def plan_from_args(args: argparse.Namespace) -> tuple[str, RacePlan]:
    profile = load_profile(args.profile)
    overrides: dict[str, Any] = {"max_stalled": _numbers("--max-stalled", args.max_stalled, int)[0]}
    if args.variants:
        overrides["variants"] = variant_names(p.strip() for p in args.variants.split(",") if p.strip())
    if args.sweepers:
        overrides["sweepers"] = _numbers("--sweepers", args.sweepers, int)
    if args.jobs:
        overrides["stalled_jobs"] = _numbers("--jobs", args.jobs, int)[0]
    if args.delay_ms:
        overrides["delays_ms"] = _numbers("--delay-ms", args.delay_ms, float)
    if args.reps:
        overrides["reps"] = _numbers("--reps", args.reps, int)[0]
    if args.workers:
        overrides["workers"] = _numbers("--workers", args.workers, int)[0]
    if args.slice:
        overrides["slice_size"] = _numbers("--slice", args.slice, int)[0]
    if args.deadline_s:
        overrides["deadline_s"] = _numbers("--deadline-s", args.deadline_s, float)[0]
    return profile.name, RacePlan.from_options(profile.race, **overrides)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    profile_name, plan = plan_from_args(args)  # every input checked before a server starts
    progress = Progress(stage="race")
    with redis_for_run() as (settings, server):
        run_dir = make_run_dir(profile_name, Path(args.results))
        client = settings.connect()
        try:
            shas = Queue.open(
                client, f"meta-{uuid.uuid4().hex[:8]}", extra_scripts(plan.variants)
            ).scripts.shas()
        finally:
            client.close()
        update_meta(
            run_dir,
            run_id=run_dir.name,
            complete=False,
            stages_done=[],
            race=plan_record(plan),
            **collect_meta(profile_name, server, shas),
        )
        rows = run_plan(settings, plan, progress)
        progress.done()
        write_csv(run_dir / "race.csv", RACE_COLUMNS, [r.csv_row() for r in rows])
        update_meta(run_dir, complete=True, stages_done=["race"])
    print(format_table(rows, plan))
    print(f"results: {run_dir}")
    return 0
