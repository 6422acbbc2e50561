"""The driver goals (bench/results/finish_fetch.py) judged over finish_fetch rows, and the Redis-bound
point they judge: verdicts and points only."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.harness.profile import FinishFetchOptions
from bench.results.finish_fetch import MET, MISSED, NOT_MEASURED, goal_lines, judge
from bench.stages.finish_fetch.locust_trial import Point
from bench.stages.finish_fetch.stage import points_of, strategies_at


def _row(**values: Any) -> dict[str, Any]:
    row = {
        "protocol": "echomq", "strategy": "fused", "workers": 4, "concurrency": 8, "rtt_ms": 1.0,
        "job_ms": 0.0, "contended": False, "saturated": False, "limit": "client", "rtt_slept_ms": 1.05,
        "raw_reference_cpu_ratio": 1.2, "locust_raw_jobs_ratio": 0.9,
    }  # fmt: skip
    return {**row, **values}


def _verdicts(rows: list[dict[str, Any]]) -> list[str]:
    return [goal.verdict for goal in judge(rows)][:4]  # the driver's four; the regimes' below


def _regime_verdicts(rows: list[dict[str, Any]]) -> list[str]:
    return [goal.verdict for goal in judge(rows)][4:7]


def _cpu_verdict(rows: list[dict[str, Any]]) -> tuple[str, str]:
    goal = judge(rows)[7]
    return goal.verdict, goal.worst


def _backlog(**values: Any) -> list[dict[str, Any]]:
    """A clean backlog grid: concurrency 1, 8 x rtt 0, 1, fused and two_call."""
    row = {"regime": "backlog", "fetches_alone_per_job": 0.001, **values}
    return [
        _row(**{**row, "strategy": s, "concurrency": c, "rtt_ms": r})
        for s in ("fused", "two_call")
        for c in (1, 8)
        for r in (0.0, 1.0)
    ]


def _open(strategy: str, load: float, **values: Any) -> dict[str, Any]:
    return _row(strategy=strategy, regime="open", load=load, e2e_p99_us=900, **values)


def test_the_regime_goals_judge_backlog_fetches_the_crossed_grid_and_open_latency():
    opened = [_open(s, load) for s in ("fused", "two_call") for load in (0.5, 0.8)]
    assert _regime_verdicts([*_backlog(), *opened]) == [MET, MET, MET]
    # one fused backlog point whose wait list ran dry
    dry = _backlog()
    dry[0] = {**dry[0], "fetches_alone_per_job": 0.3}
    assert _regime_verdicts([*dry, *opened])[0] == MISSED
    # a two_call cell missing, or measured only in a contended window
    assert _regime_verdicts([*_backlog()[:-1], *opened])[1] == MISSED
    busy = _backlog()
    busy[-1] = {**busy[-1], "contended": True}
    assert _regime_verdicts([*busy, *opened])[1] == MISSED
    # open at one load only, or only contended at the second
    assert _regime_verdicts([*_backlog(), *opened[:1], *opened[2:3]])[2] == MISSED
    assert _regime_verdicts([*_backlog(), *opened[:3], {**opened[3], "contended": True}])[2] == MISSED
    # a run from before the regimes (no regime column: steady) measured none of them
    assert _regime_verdicts([_row(), _row(strategy="two_call")]) == [NOT_MEASURED] * 3


def test_each_goal_is_met_missed_or_not_measured_by_its_rows():
    bound = [
        _row(protocol=p, strategy=s, concurrency=32, rtt_ms=0.0, rtt_slept_ms=0.0, limit="redis")
        for p in ("echomq", "bullmq")
        for s in ("fused", "two_call")
    ]
    assert _verdicts([_row(), *bound]) == [MET, MET, MET, MET]
    assert _verdicts([_row(raw_reference_cpu_ratio=1.3), *bound])[0] == MISSED
    assert _verdicts([_row(locust_raw_jobs_ratio=0.79), *bound])[1] == MISSED
    assert _verdicts([_row(), *bound[:3], {**bound[3], "limit": "latency"}])[2] == MISSED
    # two windows split between client and redis: missed, and the line names the split, in either order
    split = {**bound[3], "limit": "client"}
    for order in ([bound[3], split], [split, bound[3]]):
        (goal,) = [g for g in judge([_row(), *bound[:3], *order]) if g.name.startswith("limit redis")]
        assert (goal.verdict, goal.worst) == (MISSED, "bullmq two_call w4 c32 rtt0 steady limit client/redis")
    # a third window that names redis settles it
    assert _verdicts([_row(), *bound, split, bound[3]])[2] == MET
    # rtt paid at most 0.2 ms over 1 ms (the larger of 10% and 0.2 ms): bench.results.finish_fetch.rtt_missed
    assert _verdicts([_row(rtt_slept_ms=1.2), *bound])[3] == MET
    assert _verdicts([_row(rtt_slept_ms=1.201), *bound])[3] == MISSED
    # a saturated point is not judged on its rtt; a contended row is no evidence at all
    assert _verdicts([_row(rtt_slept_ms=1.5, saturated=True), *bound])[3] == NOT_MEASURED
    assert _verdicts([_row(contended=True)]) == [NOT_MEASURED] * 4
    # the median over repetitions, not one bad repetition
    reps = [_row(locust_raw_jobs_ratio=r) for r in (0.7, 0.9, 0.95)]
    assert _verdicts([*reps, *bound])[1] == MET


def test_the_redis_bound_point_follows_the_grid_with_the_strategies_its_goal_names():
    opts = FinishFetchOptions(workers=(4,), concurrency=(1, 8), rtt_ms=(1.0,), bound_concurrency=32)
    points = points_of(opts)
    assert points == [Point(4, 1.0, 1), Point(4, 1.0, 8), Point(4, 0.0, 32)]
    assert strategies_at(opts, points[-1]) == ["fused", "two_call"]
    assert strategies_at(opts, points[0]) == list(opts.strategies)
    # a grid that holds the point already runs it once, with every strategy
    in_grid = dataclasses.replace(opts, concurrency=(32,), rtt_ms=(0.0,))
    assert points_of(in_grid) == [Point(4, 0.0, 32)]
    assert strategies_at(in_grid, Point(4, 0.0, 32)) == list(opts.strategies)


def _bound(protocol: str, strategy: str, locust: float, raw: float, **values: Any) -> dict[str, Any]:
    return _row(
        protocol=protocol, strategy=strategy, concurrency=32, rtt_ms=0.0, regime="backlog", limit="redis",
        loadgen_cpu_us_per_job=locust, raw_cpu_us_per_job=raw, **values,
    )  # fmt: skip


def test_bullmqs_client_cpu_a_job_is_judged_against_echomqs_on_clean_medians():
    even = [_bound(p, s, 40.0, 30.0) for p in ("echomq", "bullmq") for s in ("fused", "two_call")]
    assert _cpu_verdict(even)[0] == MET
    # bullmq two_call under Locust at 1.3x echomq's
    costly = [*even[:3], _bound("bullmq", "two_call", 52.0, 30.0)]
    assert _cpu_verdict(costly) == (MISSED, "two_call Locust 1.30x")
    # the raw driver is judged too
    raw = [*even[:2], _bound("bullmq", "fused", 40.0, 38.0), even[3]]
    assert _cpu_verdict(raw) == (MISSED, "fused raw 1.27x")
    # the median of the repetitions: one costly repetition of three is not the figure
    reps = [*even, _bound("bullmq", "fused", 41.0, 30.0), _bound("bullmq", "fused", 80.0, 30.0)]
    assert _cpu_verdict(reps)[0] == MET
    # contended or saturated windows are no evidence
    dirty = [*even[:3], _bound("bullmq", "two_call", 52.0, 30.0, contended=True)]
    assert _cpu_verdict(dirty)[0] == MET  # two_call judged on nothing: the others met
    assert (
        _cpu_verdict([_bound(p, "fused", 40.0, 30.0, saturated=True) for p in ("echomq", "bullmq")])[0]
        == NOT_MEASURED
    )
    # one protocol only: nothing to hold it against
    assert _cpu_verdict(even[:2])[0] == NOT_MEASURED
    # a window measured again on two load processes pays two processes' overhead: not held
    # against windows on one
    two = [*even, _bound("bullmq", "fused", 90.0, 30.0, loadgen_processes=2)]
    two += [_bound("bullmq", "fused", 90.0, 30.0, loadgen_processes=2)]
    assert _cpu_verdict(two)[0] == MET


def test_a_goal_says_what_it_names_that_the_run_did_not_measure():
    # the raw driver at c8 only (raw-driver-at = c8-rtt0): the c32 half and the raw driver's CPU
    # at the Redis-bound point are said unmeasured, not passed over
    locust_only = [
        {**_bound(p, s, 40.0, 30.0), "raw_cpu_us_per_job": None, "raw_reference_cpu_ratio": None}
        for p in ("echomq", "bullmq")
        for s in ("fused", "two_call")
    ]
    rows = [_row(concurrency=8, rtt_ms=0.0), *locust_only]
    goals = judge(rows)
    assert goal_lines(rows)[0].endswith("met (worst: fused w4 c8 rtt0 steady 1.20; not measured: c32)")
    assert goals[7].unmeasured == "fused raw, two_call raw"
    # measured at both: nothing said
    both = judge(
        [
            _row(concurrency=8, rtt_ms=0.0),
            *(_bound(p, s, 40.0, 30.0) for p in ("echomq", "bullmq") for s in ("fused", "two_call")),
        ]
    )
    assert (both[0].unmeasured, both[7].unmeasured) == ("", "")
