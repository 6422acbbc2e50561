"""Which side set the pace: each side's used share of its capacity, and the name of the limit."""

from __future__ import annotations

import pytest

from bench.stages.finish_fetch.pace import (
    LATENCY,
    PRODUCER,
    STARVED_FETCHES_PER_JOB,
    PaceInputs,
    closed_limit,
    limit,
    redis_ceiling,
    shares,
)


def inputs(**changes: object) -> PaceInputs:
    base = {
        "jobs_per_s": 1000.0, "workers": 1, "concurrency": 1, "job_ms": 0.0, "rtt_ms": 0.0,
        "round_trips_per_job": 1.0, "busiest_cpu_pct": 10.0, "redis_cpu_pct": 10.0,
        "redis_us_per_job": 100.0,
    }  # fmt: skip
    return PaceInputs(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "side"),
    [
        ({"busiest_cpu_pct": 97.0}, "client"),
        ({"rtt_ms": 0.9}, "network"),  # 1000 exchanges/s x 0.9 ms on one connection
        ({"rtt_ms": 0.9, "round_trips_per_job": 0.125}, LATENCY),  # eight calls an exchange: 11%
        ({"job_ms": 3.6, "concurrency": 4}, "job time"),  # four slots, each 90% holding a job
        ({"redis_cpu_pct": 95.0}, "redis"),
        ({}, LATENCY),  # nothing near its capacity: each exchange waits on the last
    ],
)
def test_the_side_nearest_its_capacity_is_the_limit(changes: dict[str, object], side: str) -> None:
    assert limit(shares(inputs(**changes)))[0] == side


def test_without_redis_cpu_its_share_is_jobs_over_its_ceiling() -> None:
    assert redis_ceiling(100.0) == 10_000 and redis_ceiling(None) is None
    used = shares(inputs(redis_cpu_pct=None, jobs_per_s=9000.0))
    assert used["redis"] == pytest.approx(0.9)


BUSY_LINK = {"client": 0.3, "network": 0.95, "redis": 0.2}  # a worker's connection near capacity


@pytest.mark.parametrize(
    ("producer", "fetches_alone", "side"),
    [
        # it hardly waited for room and the workers found no job: their empty fetches kept the
        # connection busy, so the network's share alone would misname the side
        (0.8, 0.5, PRODUCER),
        (0.5, 0.5, "network"),  # it waited for room half the time: not the one that set the pace
        (0.8, STARVED_FETCHES_PER_JOB, "network"),  # the workers always found a job waiting
    ],
)
def test_in_a_closed_loop_the_producers_set_the_pace_only_when_the_workers_starve(
    producer: float, fetches_alone: float, side: str
) -> None:
    used = {**BUSY_LINK, PRODUCER: producer}
    assert limit(used)[0] == "network"
    assert closed_limit(used, fetches_alone)[0] == side
