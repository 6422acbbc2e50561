"""The sweep goals, defined once: the figure each one reads from sweep_cost.csv, its
limit, and how a run's rows meet it.

A pure leaf (the standard library and the other leaves): the sweep stage's terminal table
and the report print the same goal lines, and neither may import the other.

Which column is "Redis time" (see bench/sweep_cost/timing.py):

- ``server_us``: Redis's own µs inside the sweep's EVALSHAs (INFO commandstats read
  around one timed sweep, the median over the timed sweeps). echomq-deadline's sweep
  is one EVALSHA, so this is the Redis time of that call. ``sweep_ms_median`` is the
  client's wall clock (round trip, reply parsing) and ``us_per_active_job`` is that
  divided by the size: neither is Redis time.
- ``redis_hold_ms_max``: the longest single EVALSHA of a sweep inside Redis (SLOWLOG), the
  max over every timed sweep of the point; when SLOWLOG logged none of them, its threshold
  (1 ms on the embedded server), an upper bound. A sliced sweep is many calls and
  commandstats only sums them, so its longest call is this figure.
- ``hold_ms_max``: the same call timed at the client; it includes a round trip and the
  client's own pauses, so it is an upper bound on how long Redis was held, and the
  figure when SLOWLOG cannot tell (a server whose threshold is looser, or refuses it).

A goal is judged on uncontended points only (a contended window is not evidence), and
only at the size it names: a run whose sizes stop short says so, never met.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.fits import finite_number
from bench.results import NOT_SKIPPED

GOAL_SIZE = 1_000_000  # the active-list size the goals name (the stress profile's largest)
MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"


@dataclass(frozen=True)
class SweepGoal:
    name: str
    protocol: str
    variant: str
    scenario: str | None  # None: every scenario the run measured
    column: str  # the sweep_cost.csv column the figure comes from
    scale: float  # the column's unit to the goal's
    limit: float
    unit: str
    measure: str  # what the figure is, said under the table
    per_stalled_id: bool = False  # the figure a stalled id (all_stalled: every active id)
    at_most: bool = False  # the limit itself meets the goal ("at most"), else strictly under
    every_size: bool = False  # judged at every size, else at GOAL_SIZE
    fallback: str | None = None  # the column read where ``column`` is empty (an older run too)

    def figure(self, row: Mapping[str, Any]) -> float | None:
        value = finite_number(row.get(self.column))
        if value is None and self.fallback:
            value = finite_number(row.get(self.fallback))
        size = finite_number(row.get("active_size"))
        if value is None or size is None or size <= 0:
            return None
        return value * self.scale / (size if self.per_stalled_id else 1.0)

    def meets(self, figure: float) -> bool:
        return figure <= self.limit if self.at_most else figure < self.limit


GOALS: tuple[SweepGoal, ...] = (
    SweepGoal(
        name=f"echomq-deadline healthy sweep at {GOAL_SIZE:,}: Redis time under 1 ms",
        protocol="echomq-deadline", variant="atomic", scenario="healthy",
        column="server_us", scale=1e-3, limit=1.0, unit="ms",
        measure="Redis ms of the one sweep call (commandstats µs of its EVALSHA, median of the timed sweeps)",
    ),
    SweepGoal(
        name=f"echomq-deadline all-stalled sweep at {GOAL_SIZE:,}: Redis time at most 3 µs a stalled id",
        protocol="echomq-deadline", variant="atomic", scenario="all_stalled",
        column="server_us", scale=1.0, limit=3.0, unit="µs/id", per_stalled_id=True, at_most=True,
        measure="Redis µs of the one sweep call (commandstats, median) over the stalled ids, all of active",
    ),
    SweepGoal(
        name=f"atomic_sliced longest call under 2 ms, every size to {GOAL_SIZE:,}",
        protocol="echomq", variant="atomic_sliced", scenario=None,
        column="redis_hold_ms_max", fallback="hold_ms_max", scale=1.0, limit=2.0, unit="ms", every_size=True,
        measure="the longest single EVALSHA of any timed sweep inside Redis (SLOWLOG; when it logged "
        "none, its threshold bounds it), worst over every size and scenario; where SLOWLOG cannot tell, "
        "timed at the client (round trip included: an upper bound)",
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
        figure = goal.figure(row)
        if figure is not None:
            # pandas may hold the flag as a bool, numpy's bool or its text
            found.append((int(float(row["active_size"])), figure, str(row.get("contended")) == "True", row))
    return found


def judge(goal: SweepGoal, rows: Sequence[Mapping[str, Any]]) -> GoalResult:
    """The goal against a run's sweep_cost rows (CSV rows, or SweepCostRow fields as a dict)."""
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
        failed = not goal.meets(figure)
        reached = largest >= GOAL_SIZE
        verdict = MISSED if failed else MET if reached else NOT_MEASURED
        how_often = _slow_calls(worst) if failed else ""
        return GoalResult(
            goal, verdict, figure, size, _note(how_often, "" if failed or reached else short, aside)
        )
    at_goal = [figure for size, figure, _ in clean if size == GOAL_SIZE]
    if at_goal:
        figure = max(at_goal)
        return GoalResult(goal, MET if goal.meets(figure) else MISSED, figure, GOAL_SIZE, aside)
    figure = max(f for size, f, _ in clean if size == largest)
    return GoalResult(goal, NOT_MEASURED, figure, largest, _note(short, aside))


def _slow_calls(row: Mapping[str, Any]) -> str:
    """How rare the long calls of a many-call sweep were, where SLOWLOG counted them."""
    slow, calls = finite_number(row.get("redis_slow_calls_max")), finite_number(row.get("round_trips"))
    if slow is None or calls is None or calls <= 1:
        return ""
    return f"{slow:,.0f} of {calls:,.0f} calls over the slowlog threshold"


def _note(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def judge_all(rows: Sequence[Mapping[str, Any]]) -> list[GoalResult]:
    """Every goal whose protocol the run measured (a goal of a protocol not run is left out)."""
    protocols = {row.get("protocol") or "echomq" for row in rows}
    return [judge(goal, rows) for goal in GOALS if goal.protocol in protocols]
