"""Micro benchmarks (pytest-benchmark): one worker, one connection, no load.

A full fused cycle against a full two-call cycle, and each script alone. Each
round's set-up (adding the job it will take) is outside the timing. `make test`
runs each once as a check (benchmarks disabled); `make bench-micro` times them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench.protocol.queue import Job, Producer, Queue, Worker

ROUNDS = 2000
WARMUP_ROUNDS = 100


def _counted(queue: Queue, call: Callable[[], Any], tally: list[int]) -> Callable[[], Any]:
    """``call``, adding the round trips it makes to ``tally`` (set-up round trips stay out)."""

    def run() -> Any:
        before = queue.client.round_trips
        result = call()
        tally[0] += queue.client.round_trips - before
        tally[1] += 1
        return result

    return run


def _adds_one(producer: Producer) -> Callable[[], None]:
    """A set-up that adds the job the round will take (it must return None for pytest-benchmark)."""

    def add() -> None:
        producer.add()

    return add


def _record_round_trips(benchmark: Any, tally: list[int]) -> float:
    per_call = tally[0] / tally[1]
    benchmark.extra_info["round_trips_per_call"] = per_call
    return per_call


@pytest.mark.parametrize("strategy", ["fused", "two_call"])
def test_full_cycle(benchmark: Any, queue: Queue, strategy: str) -> None:
    """Finish the held job and take the next, by the strategy: what a busy worker does per job."""
    producer, worker = Producer(queue), Worker(queue, strategy)
    producer.add()
    held: list[Job | None] = [worker.fetch()]
    tally = [0, 0]

    def cycle() -> None:
        job = held[0]
        assert job is not None
        held[0] = worker.complete_and_next(job)

    benchmark.extra_info["strategy"] = strategy
    benchmark.pedantic(
        _counted(queue, cycle, tally), setup=_adds_one(producer), rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    assert held[0] is not None  # every cycle found the job its set-up added
    assert _record_round_trips(benchmark, tally) == (1 if strategy == "fused" else 2)


def test_add_job_alone(benchmark: Any, queue: Queue) -> None:
    producer = Producer(queue)
    tally = [0, 0]
    job_id = benchmark.pedantic(
        _counted(queue, producer.add, tally), rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    assert int(job_id) >= 1 and _record_round_trips(benchmark, tally) == 1


def test_move_to_active_alone(benchmark: Any, queue: Queue) -> None:
    producer, worker = Producer(queue), Worker(queue)
    tally = [0, 0]
    job = benchmark.pedantic(
        _counted(queue, worker.fetch, tally),
        setup=_adds_one(producer),
        rounds=ROUNDS,
        warmup_rounds=WARMUP_ROUNDS,
    )
    assert job is not None and _record_round_trips(benchmark, tally) == 1


def test_move_to_finished_alone(benchmark: Any, queue: Queue) -> None:
    """moveToFinished with fetch next off: the first half of a two-call cycle."""
    producer, worker = Producer(queue), Worker(queue, "two_call")
    taken: list[Job] = []

    def active_job() -> None:
        producer.add()
        job = worker.fetch()
        assert job is not None
        taken.append(job)

    def finish() -> int:
        return worker.finish(taken.pop(), fetch_next=False).code

    tally = [0, 0]
    code = benchmark.pedantic(
        _counted(queue, finish, tally), setup=active_job, rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    assert code == 0 and _record_round_trips(benchmark, tally) == 1
