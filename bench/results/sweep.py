"""The sweep stage's contract: its rows (sweep_cost.csv, sweep_control.csv, sweep_hazard.csv), its
meta.json section and its goals, which the stage's table and the report print alike.

Which column is "Redis time" (bench/stages/sweep/timing.py): ``server_us`` is Redis's own µs inside
the sweep's EVALSHAs (INFO commandstats around one timed sweep, the median over the timed sweeps);
``sweep_ms_median`` and ``us_per_active_job`` are the client's wall clock, not Redis time.
``redis_hold_ms_max`` is a sweep's longest single EVALSHA inside Redis (SLOWLOG), the max over the
timed sweeps, or SLOWLOG's threshold (an upper bound) when it logged none: a sliced sweep is many
calls, which commandstats only sums. ``hold_ms_max`` is that call timed at the client, round trip
included: an upper bound, the figure where SLOWLOG cannot tell.

A goal is judged on uncontended points only, at the size it names (a run whose sizes stop short
says so, never met); an ``at_largest`` goal (echomq-deadline's sliced pass) at the run's largest
size, its note naming it. Some goals hold a figure against the run's control (sweep_control.csv: a
Lua loop of plain arithmetic timed call by call inside Redis, bench/stages/sweep/stage.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bench.results import rows
from bench.results.fits import finite_number

# Nor is a change of a sweep's time under 2 ms claimed: an A/A pair of smoke runs on a quiet 2-core
# VM (20261203-082252-smoke, -082349-smoke) moved sweeps of 0.2-4 ms by up to 1.8 ms (x0.5-x2),
# and the same run's control loop stalls a call of plain Lua by 5-6 ms. A slower sweep shows
# at the sizes whose sweeps take tens of milliseconds.
SWEEP_TIME_LEAST_MS = 2.0

# A measured point's ``skipped`` cell: never empty, so pandas reads the column as text in every run.
NOT_SKIPPED = "no"


@dataclass(frozen=True)
class SweepCostRow(rows.RunRow):
    FILE: ClassVar[str] = "sweep_cost.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "variant", "scenario", "active_size")
    # round_trips is measured: atomic_sliced's calls end with its time budget, not a fixed count.
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (
        rows.Metric("sweep_ms_median", least=SWEEP_TIME_LEAST_MS),
        *map(rows.Metric, ("round_trips", "server_us", "probe_p99_us", "probe_busy")),
        rows.Metric("hold_ms_max", maximum=True),
        rows.Metric("probe_max_us", maximum=True),
    )

    variant: str
    scenario: str
    active_size: int
    slice_size: int  # ids a sliced sweep visits a call (the other variants ignore it)
    probe_rate_hz: float
    reps: int = 0  # sweeps measured (0: none)
    sweep_ms_median: float | None = None
    sweep_ms_stdev: float | None = None
    us_per_active_job: float | None = None
    round_trips: float | None = None  # medians over the sweeps
    server_us: float | None = None
    hold_ms_max: float | None = None  # the longest call at the client (round trip included)
    # ... inside Redis (SLOWLOG), or the slowlog threshold when no call was slower
    redis_hold_ms_max: float | None = None
    # µs after which a sliced call takes no further chunk of ids (the other variants ignore it)
    slice_budget_us: int | None = None
    # the most calls of one timed sweep over the server's slowlog threshold (SLOWLOG)
    redis_slow_calls_max: int | None = None
    probe_p99_us: float | None = None
    probe_max_us: float | None = None
    probe_busy: float | None = None
    # "" in memory when measured (written as NOT_SKIPPED), else why not
    skipped: str = field(default="", metadata={"empty_as": NOT_SKIPPED})
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class SweepControlRow(rows.RunRow):
    """The sweep stage's control (protocol "none"): calls of a Lua loop of plain arithmetic, each timed
    inside Redis."""

    FILE: ClassVar[str] = "sweep_control.csv"

    calls: int
    iterations: int  # additions a call
    redis_us_median: int | None = None
    redis_us_p999: int | None = None
    redis_us_max: int | None = None
    calls_over_1ms: int | None = None
    # calls another client's script call overlapped, so their µs could not be told apart (left out)
    calls_mixed: int = 0
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class SweepHazardRow(rows.Row):
    """One all-stalled sweep sent once by a client, with that client's retry settings."""

    FILE: ClassVar[str] = "sweep_hazard.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "client", "stalled_jobs")
    METRICS: ClassVar[tuple[rows.Metric, ...]] = tuple(
        map(rows.Metric, ("server_executions", "server_rejected", "probe_busy", "probe_max_us"))
    )
    protocol: str
    client: str  # "bullmq" (BullMQ's own connection settings) or "suite" (no re-sends)
    stalled_jobs: int
    socket_timeout_s: float
    elapsed_s: float  # from the call to its return or its error
    server_executions: int  # the sweep script's executions on the server (commandstats calls)
    server_rejected: int  # its sends the server refused (commandstats rejected_calls: BUSY)
    probe_busy: int  # BUSY replies another client got meanwhile
    probe_max_us: int | None
    reply_ids: int | None  # ids the call returned (None: it raised)
    moved_ids: int  # stalled jobs found out of active and in wait afterwards
    reply_matches: bool  # the reply named exactly the jobs that moved
    error: str  # what the call raised, or ""
    # over the call and every copy of it the server ran (a run from before: not recorded)
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class SweepMeta:
    errors: int | None = None
    """Sweep points that failed (their rows say why)."""
    pyperf: dict[str, list[str]] = field(default_factory=dict)
    """pyperf's options, by active-list size."""
    script_shas: dict[str, str] = field(default_factory=dict)
    """Each sweep variant's script SHA1, by [protocol.]variant."""
    slopes: dict[str, dict[str, float]] = field(default_factory=dict)
    """The log-log slope of sweep time over size, by variant/scenario."""
    hazard: rows.JsonObject | None = None
    """How the hazard rows were made: the sweep interval, the clients, their socket timeout."""


GOAL_SIZE = 1_000_000  # the active-list size the goals name (the stress profile's largest)
MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
DEADLINE, SLICED = "echomq-deadline", "atomic_sliced"


@dataclass(frozen=True)
class Control:
    """The control's figures (its sweep_control.csv row), ms inside Redis."""

    calls: int
    median_ms: float
    p999_ms: float
    max_ms: float
    contended: bool

    def text(self) -> str:
        busy = ", contended" if self.contended else ""
        return (
            f"control: max {self.max_ms:,.3f} ms, 99.9th {self.p999_ms:,.3f} ms, "
            f"median {self.median_ms:,.3f} ms over {self.calls:,} calls{busy}"
        )


def control_of(rows: Sequence[Mapping[str, Any]]) -> Control | None:
    """The control from sweep_control.csv's rows (the last one timed); None when not run."""
    for row in reversed(rows):
        figures = [finite_number(row.get(c)) for c in ("redis_us_median", "redis_us_p999", "redis_us_max")]
        calls = finite_number(row.get("calls"))
        if calls is None or any(f is None for f in figures):
            continue
        median, p999, worst = (f / 1e3 for f in figures if f is not None)
        return Control(int(calls), median, p999, worst, str(row.get("contended")) == "True")
    return None


@dataclass(frozen=True)
class SweepGoal:
    name: str
    protocol: str
    variant: str
    scenario: str | None  # None: every scenario the run measured
    column: str  # the sweep_cost.csv column the figure comes from
    limit: float
    unit: str
    measure: str  # what the figure is, said under the table
    scale: float = 1.0  # the column's unit to the goal's
    per_stalled_id: bool = False  # the figure a stalled id (all_stalled: every active id)
    at_most: bool = False  # the limit itself meets the goal ("at most"), else strictly under
    every_size: bool = False  # judged at every size, else at GOAL_SIZE
    fallback: str | None = None  # the column read where ``column`` is empty (an older run too)
    share_of_calls: bool = False  # the figure in % of the sweep's calls (round_trips)
    limit_is_control: bool = False  # the limit is the control's worst call (ms), not ``limit``
    at_largest: bool = False  # without a point at GOAL_SIZE, judged at the run's largest size

    def figure(self, row: Mapping[str, Any]) -> float | None:
        value = finite_number(row.get(self.column))
        if value is None and self.fallback:
            value = finite_number(row.get(self.fallback))
        size = finite_number(row.get("active_size"))
        if value is None or size is None or size <= 0:
            return None
        if self.share_of_calls:
            calls = finite_number(row.get("round_trips"))
            return None if not calls else value * 100.0 / calls
        return value * self.scale / (size if self.per_stalled_id else 1.0)

    def meets(self, figure: float, limit: float) -> bool:
        return figure <= limit if self.at_most else figure < limit


def _sliced_pass(scenario: str, what: str, **fields: Any) -> SweepGoal:
    """A goal of echomq-deadline's sliced pass: judged at the run's largest size short of GOAL_SIZE."""
    name = f"echomq-deadline sliced {scenario.replace('_', '-')} pass at {GOAL_SIZE:,}: {what}"
    return SweepGoal(
        name=name, protocol=DEADLINE, variant=SLICED, scenario=scenario, at_largest=True, **fields
    )


GOALS: tuple[SweepGoal, ...] = (
    SweepGoal(
        name=f"echomq-deadline healthy sweep at {GOAL_SIZE:,}: Redis time under 1 ms",
        protocol="echomq-deadline", variant="atomic", scenario="healthy",
        column="server_us", scale=1e-3, limit=1.0, unit="ms",
        measure="Redis ms of the one sweep call (commandstats µs of its EVALSHA, median of the timed sweeps)",
    ),
    SweepGoal(
        name=f"echomq-deadline all-stalled sweep at {GOAL_SIZE:,}: Redis time at most 3 µs per stalled id",
        protocol="echomq-deadline", variant="atomic", scenario="all_stalled",
        column="server_us", limit=3.0, unit="µs/id", per_stalled_id=True, at_most=True,
        measure="Redis µs of the one sweep call (commandstats, median) over the stalled ids, all of active",
    ),
    SweepGoal(
        name=f"atomic_sliced longest call under 2 ms, every size to {GOAL_SIZE:,}",
        protocol="echomq", variant="atomic_sliced", scenario=None,
        column="redis_hold_ms_max", fallback="hold_ms_max", limit=2.0, unit="ms", every_size=True,
        measure="the longest single EVALSHA of any timed sweep inside Redis, worst over every size and "
        "scenario. SLOWLOG times it; when it logged none, its threshold bounds it. Where SLOWLOG cannot "
        "tell, it is timed at the client (round trip included: an upper bound)",
    ),
    _sliced_pass(
        "all_stalled", "99.9% of calls under 1 ms",
        column="redis_slow_calls_max", limit=0.1, unit="% over", share_of_calls=True, at_most=True,
        measure="the share of the pass's calls SLOWLOG logged over its threshold (1 ms on the embedded "
        "server), in the timed pass that logged most, of the median calls per pass",
    ),
    _sliced_pass(
        "all_stalled", "no call over the control's worst",
        column="redis_hold_ms_max", limit=0.0, unit="ms", limit_is_control=True, at_most=True,
        measure="the longest call of any timed pass inside Redis (SLOWLOG; when it logged none, its "
        "threshold bounds it). It is held against the worst call of the run's control. "
        "The control is a Lua loop of plain arithmetic, timed call by call inside Redis (sweep_control.csv)",
    ),
    _sliced_pass(
        "all_stalled", "at most 15 µs per stalled id",
        column="server_us", limit=15.0, unit="µs/id", per_stalled_id=True, at_most=True,
        measure="Redis µs of every call of the pass (commandstats, median of the timed passes) over "
        "the stalled ids, all of active",
    ),
    _sliced_pass(
        "healthy", "Redis time under 0.2 ms",
        column="server_us", scale=1e-3, limit=0.2, unit="ms",
        measure="Redis ms of the healthy pass (commandstats µs of its calls, median of the timed passes)",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class GoalResult:
    goal: SweepGoal
    verdict: str  # MET, MISSED or NOT_MEASURED
    figure: float | None  # at ``size``
    size: int | None
    note: str

    def cells(self) -> list[str]:
        """goal, measured, at size, verdict, note: as both tables print them."""
        figure = "-" if self.figure is None else f"{self.figure:,.3f} {self.goal.unit}"
        size = "-" if self.size is None else f"{self.size:,}"
        return [self.goal.name, figure, size, self.verdict, self.note]


GOAL_HEADER = ("goal", "measured", "at size", "verdict", "note")


def _measured(
    rows: Iterable[Mapping[str, Any]], goal: SweepGoal
) -> list[tuple[int, float, bool, Mapping[str, Any]]]:
    """(size, figure, contended, row) of every measured point the goal reads."""
    found = []
    for row in rows:
        if (row.get("protocol") or "echomq") != goal.protocol or row.get("variant") != goal.variant:
            continue
        if goal.scenario is not None and row.get("scenario") != goal.scenario:
            continue
        if str(row.get("skipped") or "") not in ("", NOT_SKIPPED):
            continue  # skipped, or an error: no figure to hold against the goal
        if (figure := goal.figure(row)) is not None:
            # pandas may hold the flag as a bool, numpy's bool or its text
            found.append((int(float(row["active_size"])), figure, str(row.get("contended")) == "True", row))
    return found


def judge(goal: SweepGoal, rows: Sequence[Mapping[str, Any]], control: Control | None = None) -> GoalResult:
    """The goal against a run's sweep_cost rows (CSV rows, or SweepCostRow fields as a dict), and
    the run's control where the goal reads it."""
    points = _measured(rows, goal)
    clean = [(size, figure, row) for size, figure, contended, row in points if not contended]
    busy = sorted({size for size, _, contended, _ in points if contended})
    aside = f"contended at {', '.join(f'{s:,}' for s in busy)}: not evidence" if busy else ""
    if not clean:
        why = "no uncontended point" if points else "not in this run"
        return GoalResult(goal, NOT_MEASURED, None, None, _note(why, aside))
    largest = max(size for size, _, _ in clean)
    # Why a point short of the goal's size is no verdict, said beside its figure.
    short = f"largest size here: {largest:,}" if largest < GOAL_SIZE else f"no point at {GOAL_SIZE:,}"
    if goal.every_size:
        size, figure, worst = max(clean, key=lambda point: (point[1], point[0]))  # a tie: the largest
        failed = not goal.meets(figure, goal.limit)
        reached = largest >= GOAL_SIZE
        verdict = MISSED if failed else MET if reached else NOT_MEASURED
        how_often = _slow_calls(worst) if failed else ""
        return GoalResult(
            goal, verdict, figure, size, _note(how_often, "" if failed or reached else short, aside)
        )
    size = GOAL_SIZE if any(s == GOAL_SIZE for s, _, _ in clean) else largest
    figure, row = max(((f, r) for s, f, r in clean if s == size), key=lambda p: p[0])
    if size != GOAL_SIZE and not goal.at_largest:
        return GoalResult(goal, NOT_MEASURED, figure, size, _note(short, aside))
    where = "" if size == GOAL_SIZE else f"judged at {largest:,}, the largest size here"
    return _verdict(goal, figure, size, row, control, _note(where, aside))


def _verdict(
    goal: SweepGoal, figure: float, size: int, row: Mapping[str, Any], control: Control | None, aside: str
) -> GoalResult:
    """Met or missed (by how much, and what the control showed) at one point."""
    shown = "no control in this run" if control is None else control.text()
    if goal.limit_is_control and (control is None or control.contended):
        why = shown if control is None else shown + ": not evidence"
        return GoalResult(goal, NOT_MEASURED, figure, size, _note(why, aside))
    limit = control.max_ms if goal.limit_is_control and control else goal.limit
    logged_none = finite_number(row.get("redis_slow_calls_max")) == 0
    if goal.limit_is_control and logged_none and figure > limit:
        # SLOWLOG logged no call: the figure is its threshold, a bound above the control's worst
        note = f"no call logged: SLOWLOG bounds the longest at {figure:,.3f} ms only"
        return GoalResult(goal, NOT_MEASURED, figure, size, _note(note, shown, aside))
    if goal.meets(figure, limit):
        return GoalResult(goal, MET, figure, size, _note(shown if goal.limit_is_control else "", aside))
    by = f"missed by {figure - limit:,.3f} {goal.unit}" + (f" ({figure / limit:,.1f}x)" if limit > 0 else "")
    return GoalResult(goal, MISSED, figure, size, _note(by, _slow_calls(row), shown, aside))


def _slow_calls(row: Mapping[str, Any]) -> str:
    """How rare the long calls of a many-call sweep were, where SLOWLOG counted them."""
    slow, calls = finite_number(row.get("redis_slow_calls_max")), finite_number(row.get("round_trips"))
    many = slow is not None and calls is not None and calls > 1
    return f"{slow:,.0f} of {calls:,.0f} calls over the slowlog threshold" if many else ""


def _note(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def judge_all(
    rows: Sequence[Mapping[str, Any]], control_rows: Sequence[Mapping[str, Any]] = ()
) -> list[GoalResult]:
    """Every goal whose protocol the run measured (a goal of a protocol not run is left out),
    with the run's control (sweep_control.csv's rows) where a goal reads it."""
    protocols = {row.get("protocol") or "echomq" for row in rows}
    control = control_of(control_rows)
    return [judge(goal, rows, control) for goal in GOALS if goal.protocol in protocols]


@dataclass(frozen=True)
class BullmqRatio:
    """BullMQ's all-stalled sweep beside echomq-deadline's sliced pass at one size: Redis µs a
    stalled id (commandstats, median of the timed sweeps)."""

    size: int
    bullmq_us: float
    ours_us: float
    contended: bool

    def cells(self) -> list[str]:
        ratio = self.bullmq_us / self.ours_us if self.ours_us > 0 else float("inf")
        return [
            f"{self.size:,}", f"{self.bullmq_us:,.2f}", f"{self.ours_us:,.2f}", f"{ratio:,.1f}x",
            "contended: not evidence" if self.contended else "",
        ]  # fmt: skip


RATIO_HEADER = ("active size", "bullmq µs/id", "deadline sliced µs/id", "ratio", "note")


def bullmq_ratios(rows: Sequence[Mapping[str, Any]]) -> list[BullmqRatio]:
    """At each size where both were measured: BullMQ's all-stalled sweep (bullmq.atomic) against
    echomq-deadline's sliced pass (atomic_sliced), µs of Redis a stalled id."""

    def by_size(protocol: str, variant: str) -> dict[int, tuple[float, bool]]:
        goal = SweepGoal(
            "", protocol, variant, "all_stalled", "server_us", 0, "µs/id", "", per_stalled_id=True
        )
        return {size: (figure, contended) for size, figure, contended, _ in _measured(rows, goal)}

    theirs, ours = by_size("bullmq", "atomic"), by_size(DEADLINE, SLICED)
    return [
        BullmqRatio(size, theirs[size][0], ours[size][0], theirs[size][1] or ours[size][1])
        for size in sorted(theirs.keys() & ours.keys())
    ]


# The sliced passes point by point: what a pass of many calls did, with the probe's tail beside it.
PASS_HEADER = (
    "scenario", "active size", "calls", "longest ms", "over", "redis ms", "µs/stalled id",
    "probe p99 µs", "probe max µs",
)  # fmt: skip
STALLED_SHARE = {"all_stalled": 1.0, "mixed": 0.1}  # of active (bench/stages/sweep/scenario.py)


def _cell(value: Any, digits: int = 0) -> str:
    number = finite_number(value)
    return "-" if number is None else f"{number:,.{digits}f}"


def sliced_passes(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each measured point of a sliced sweep (either protocol's), by label then size, as (the variant's
    label, PASS_HEADER's cells)."""
    found = []
    for row in rows:
        if row.get("variant") != SLICED or str(row.get("skipped") or "") not in ("", NOT_SKIPPED):
            continue
        protocol = row.get("protocol") or "echomq"
        label = SLICED if protocol == "echomq" else f"{protocol}.{SLICED}"
        size = int(float(row["active_size"]))
        server_us = finite_number(row.get("server_us"))
        share = STALLED_SHARE.get(str(row.get("scenario")))
        per_id = "-" if server_us is None or not share else f"{server_us / (size * share):,.2f}"
        longest = _cell(row.get("redis_hold_ms_max"), 3)
        if finite_number(row.get("redis_slow_calls_max")) == 0 and longest != "-":
            longest = f"≤ {longest}"  # none logged: the threshold bounds it
        found.append((size, label, [
            str(row.get("scenario")), f"{size:,}", _cell(row.get("round_trips")),
            longest, _cell(row.get("redis_slow_calls_max")),
            "-" if server_us is None else f"{server_us / 1e3:,.3f}", per_id,
            _cell(row.get("probe_p99_us")), _cell(row.get("probe_max_us")),
        ]))  # fmt: skip
    return [(label, cells) for _, label, cells in sorted(found, key=lambda item: (item[1], item[0]))]
