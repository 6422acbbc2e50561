"""The driver goals (bench/results/finish_fetch_goals.py) judged over finish_fetch rows, and the Redis-bound
point they judge: verdicts and points only."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.harness.profile import FinishFetchOptions
from bench.results.finish_fetch_goals import MET, MISSED, NOT_MEASURED, judge
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
    return [goal.verdict for goal in judge(rows)]


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
    assert _verdicts([_row(rtt_slept_ms=1.11), *bound])[3] == MISSED
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
