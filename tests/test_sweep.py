"""The protocol's atomic sweep, and the app-side baselines, at small sizes."""

from __future__ import annotations

import pytest

from bench.protocol.deadline import lapse_deadlines
from bench.protocol.queue import Job, Producer, Queue, Worker, WorkerOptions, now_ms
from bench.protocol.sweep import AppSidePipelinedSweeper, AppSideSweeper, AtomicSweeper
from tests.helpers import PROTOCOL_NAMES, has_deadlines, ids

pytestmark = pytest.mark.protocol


@pytest.fixture(params=PROTOCOL_NAMES)
def protocol_name(request: pytest.FixtureRequest) -> str:
    """Every test that takes ``queue`` runs against each protocol of PROTOCOL_NAMES."""
    return str(request.param)


def echomq_timing(queue: Queue) -> None:
    """Skip where a test counts on the protocol sweep marking every active id: a lock that
    lapses after one sweep is reclaimed by the next. The deadline sweep marks only lockless
    ids, so it reclaims one sweep later (tests/test_deadline.py has those cases)."""
    if has_deadlines(queue):
        pytest.skip("echomq-deadline marks a job when its lock is gone, and reclaims it a sweep later")


def stall(queue: Queue, count: int, lock_ms: int = 60_000) -> list[Job]:
    """``count`` jobs fetched into active; their locks are dropped by the caller to stall them."""
    Producer(queue).add_batch(count)
    worker = Worker(queue, options=WorkerOptions(lock_ms=lock_ms))
    jobs = [worker.fetch() for _ in range(count)]
    assert all(jobs)
    return [j for j in jobs if j is not None]


def drop_locks(queue: Queue, jobs: list[Job]) -> None:
    """The jobs' locks gone, as when they lapse; with a deadline index their deadlines pass too."""
    if not has_deadlines(queue):
        queue.client.delete(*(queue.keys.lock(j.id) for j in jobs))
        return
    pipe = queue.client.pipeline(transaction=False)
    pipe.delete(*(queue.keys.lock(j.id) for j in jobs))
    lapse_deadlines(pipe, queue.keys, [j.id for j in jobs], now_ms() - 1)
    pipe.execute()


def test_atomic_sweep_marks_first_and_reclaims_on_the_next_sweep(queue: Queue):
    jobs = stall(queue, 3)
    sweeper = AtomicSweeper(queue)
    drop_locks(queue, jobs)
    first = sweeper.sweep()  # nothing was marked yet: this sweep only marks
    assert first.moved == [] and first.failed == []
    assert sorted(ids(queue.client.smembers(queue.keys.stalled))) == ["1", "2", "3"]
    second = sweeper.sweep()
    assert sorted(second.moved) == ["1", "2", "3"] and second.failed == []
    c, k = queue.client, queue.keys
    assert c.llen(k.active) == 0 and sorted(ids(c.lrange(k.wait, 0, -1))) == ["1", "2", "3"]
    assert c.smembers(k.stalled) == set()  # nothing left in active to mark
    assert c.zcard(k.marker) == 1


def test_a_live_lock_is_never_reclaimed(queue: Queue):
    echomq_timing(queue)
    jobs = stall(queue, 2)
    sweeper = AtomicSweeper(queue)
    sweeper.sweep()
    drop_locks(queue, jobs[:1])
    result = sweeper.sweep()
    assert result.moved == [jobs[0].id]
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [jobs[1].id]
    assert queue.client.sismember(queue.keys.stalled, jobs[1].id)  # marked again


def test_extend_lock_unmarks_so_an_expired_lock_is_not_reclaimed_yet(queue: Queue):
    jobs = stall(queue, 1)
    worker = Worker(queue)
    sweeper = AtomicSweeper(queue)
    sweeper.sweep()  # marks it
    assert worker.extend_lock(jobs[0])  # unmarks it
    drop_locks(queue, jobs)
    assert sweeper.sweep().moved == []  # not marked: only marked again now
    assert sweeper.sweep().moved == [jobs[0].id]


def test_a_job_finished_after_marking_is_not_reclaimed(queue: Queue):
    jobs = stall(queue, 1)
    sweeper = AtomicSweeper(queue)
    sweeper.sweep()
    Worker(queue).finish(jobs[0], fetch_next=False)
    result = sweeper.sweep()
    assert result.moved == [] and result.failed == []
    assert queue.client.llen(queue.keys.wait) == 0


@pytest.mark.parametrize("max_stalled", [1, 3])
def test_attempts_after_k_stalls_is_k_then_failed_past_the_max(queue: Queue, max_stalled: int):
    echomq_timing(queue)
    stall(queue, 1)
    c, k = queue.client, queue.keys
    sweeper = AtomicSweeper(queue, max_stalled=max_stalled)
    worker = Worker(queue)
    for stalls in range(1, max_stalled + 2):
        sweeper.sweep()  # mark
        c.delete(k.lock("1"))
        result = sweeper.sweep()  # reclaim
        assert c.hget(k.job("1"), "atm") == str(stalls).encode()
        if stalls <= max_stalled:
            assert result.moved == ["1"]
            assert worker.fetch() is not None  # back to active for the next stall
        else:
            assert result.failed == ["1"] and result.moved == []
            assert ids(c.zrange(k.failed, 0, -1)) == ["1"]
            assert c.hget(k.job("1"), "failedReason") == b"job stalled more than allowable limit"
            assert c.llen(k.wait) == 0 and c.llen(k.active) == 0


def test_sweep_of_a_paused_queue_goes_to_paused(queue: Queue):
    echomq_timing(queue)
    jobs = stall(queue, 1)
    sweeper = AtomicSweeper(queue)
    sweeper.sweep()
    drop_locks(queue, jobs)
    queue.pause()
    assert sweeper.sweep().moved == [jobs[0].id]
    assert ids(queue.client.lrange(queue.keys.paused, 0, -1)) == [jobs[0].id]
    assert queue.client.llen(queue.keys.wait) == 0


def test_throttle_skips_sweeps_within_the_interval(queue: Queue):
    jobs = stall(queue, 1)
    sweeper = AtomicSweeper(queue, check_interval_ms=60_000)
    sweeper.sweep()
    drop_locks(queue, jobs)
    assert sweeper.sweep().moved == []  # throttled: returns {{}, {}}
    assert queue.client.pttl(queue.keys.stalled_check) > 0
    keys = queue.keys
    reply = queue.scripts.sweep(keys.sweep_keys(), [1, keys.prefix, now_ms(), 60_000])
    assert reply == [[], []]


def test_atomic_sweep_marks_100000_active_ids_without_an_unpack_error(queue: Queue):
    c, k = queue.client, queue.keys
    pipe = c.pipeline(transaction=False)
    for start in range(0, 100_000, 10_000):
        pipe.rpush(k.active, *range(start, start + 10_000))
    pipe.execute()
    result = AtomicSweeper(queue).sweep()
    assert result.moved == [] and c.scard(k.stalled) == 100_000


@pytest.mark.parametrize("sweeper_class", [AppSideSweeper, AppSidePipelinedSweeper])
def test_app_side_sweeps_reclaim_every_lockless_job_at_once(queue: Queue, sweeper_class):
    jobs = stall(queue, 5)
    drop_locks(queue, jobs[:3])
    result = sweeper_class(queue, max_stalled=5).sweep()
    reclaimed = sorted(j.id for j in jobs[:3])
    assert sorted(result.moved) == reclaimed and result.failed == []
    c, k = queue.client, queue.keys
    assert sorted(ids(c.lrange(k.wait, 0, -1))) == reclaimed
    assert sorted(ids(c.lrange(k.active, 0, -1))) == sorted(j.id for j in jobs[3:])
    assert all(c.hget(k.job(j), "atm") == b"1" for j in reclaimed)


@pytest.mark.parametrize("sweeper_class", [AppSideSweeper, AppSidePipelinedSweeper])
def test_app_side_sweeps_fail_a_job_past_the_max(queue: Queue, sweeper_class):
    jobs = stall(queue, 1)
    drop_locks(queue, jobs)
    queue.client.hset(queue.keys.job(jobs[0].id), "atm", 1)
    result = sweeper_class(queue, max_stalled=1).sweep()
    assert result.failed == [jobs[0].id]
    assert queue.client.hget(queue.keys.job(jobs[0].id), "atm") == b"2"
    assert queue.client.zcard(queue.keys.failed) == 1


def test_round_trips_per_sweep_are_counted(queue: Queue):
    jobs = stall(queue, 10)
    drop_locks(queue, jobs[:4])
    plain = AppSideSweeper(queue, max_stalled=5).sweep()
    # LRANGE, 10 EXISTS, then HGETALL, LREM and a push+HSET pipeline a reclaimed job
    assert plain.round_trips == 1 + 10 + 4 * 3
    drop_locks(queue, jobs[4:])
    piped = AppSidePipelinedSweeper(queue, max_stalled=5).sweep()
    assert piped.round_trips == 4  # LRANGE, EXISTS pipeline, HGET pipeline, recovery pipeline
    assert AtomicSweeper(queue).sweep().round_trips == 1
