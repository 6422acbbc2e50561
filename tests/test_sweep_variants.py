"""The two new atomic sweeps keep the protocol sweep's contract; every sweeper sweeps each scenario right."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from bench.errors import BenchError
from bench.protocol import sweep as sweep_module
from bench.protocol.queue import Job, Producer, Queue, Worker, WorkerOptions, now_ms
from bench.protocol.sweep import (
    SWEEPERS,
    AppSideSweeper,
    AtomicLinearSweeper,
    AtomicSlicedSweeper,
    AtomicSweeper,
    Sweeper,
    ensure_script,
    has_gap,
    is_sliced,
    make_sweeper,
)
from bench.stages.sweep.probe import Probe
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, SCENARIOS, ScenarioQueue, stalled_share
from tests.helpers import ids

pytestmark = pytest.mark.protocol

ATOMIC = ("atomic", "atomic_linear", "atomic_sliced")
STALLED_REASON = "job stalled more than allowable limit"


def atomic(queue: Queue, variant: str, max_stalled: int = 1, interval_ms: int = 0) -> AtomicSweeper:
    sweeper = SWEEPERS[variant](queue, max_stalled=max_stalled, check_interval_ms=interval_ms)  # type: ignore[call-arg]
    assert isinstance(sweeper, AtomicSweeper)
    return sweeper


def fetch(queue: Queue, count: int) -> list[Job]:
    Producer(queue).add_batch(count)
    worker = Worker(queue, options=WorkerOptions(lock_ms=60_000))
    jobs = [worker.fetch() for _ in range(count)]
    assert all(jobs)
    return [j for j in jobs if j is not None]


def lose_lock(queue: Queue, *jobs: Job) -> None:
    """The worker died: its lock lapses (deleted, so the test need not wait for a PX)."""
    for job in jobs:
        queue.client.delete(queue.keys.lock(job.id))


# ------------------------------------------------------------ the protocol's sweep rules


@pytest.mark.parametrize("variant", ATOMIC)
def test_a_stalled_job_is_reclaimed_on_the_second_pass(queue: Queue, variant: str):
    jobs = fetch(queue, 3)
    lose_lock(queue, *jobs)
    sweeper = atomic(queue, variant)
    first = sweeper.sweep()
    assert first.moved == [] and first.failed == []
    assert set(ids(queue.client.smembers(queue.keys.stalled))) == {j.id for j in jobs}
    queue.client.delete(queue.keys.marker)
    second = sweeper.sweep()
    assert sorted(second.moved) == sorted(j.id for j in jobs) and second.failed == []
    assert queue.client.llen(queue.keys.active) == 0
    assert sorted(ids(queue.client.lrange(queue.keys.wait, 0, -1))) == sorted(j.id for j in jobs)
    assert queue.client.zrange(queue.keys.marker, 0, -1) == [b"0"]
    assert queue.client.scard(queue.keys.stalled) == 0


@pytest.mark.parametrize("variant", ATOMIC)
def test_never_reclaimed_while_its_lock_lives(queue: Queue, variant: str):
    jobs = fetch(queue, 2)
    sweeper = atomic(queue, variant)
    for _ in range(3):
        result = sweeper.sweep()
        assert result.moved == [] and result.failed == []
    assert sorted(ids(queue.client.lrange(queue.keys.active, 0, -1))) == sorted(j.id for j in jobs)
    assert set(ids(queue.client.smembers(queue.keys.stalled))) == {j.id for j in jobs}  # marked again


@pytest.mark.parametrize("variant", ATOMIC)
def test_a_job_finished_after_marking_is_not_reclaimed(queue: Queue, variant: str):
    [job] = fetch(queue, 1)
    sweeper = atomic(queue, variant)
    sweeper.sweep()
    Worker(queue).finish(job, fetch_next=False)
    result = sweeper.sweep()
    assert result.moved == [] and result.failed == []
    assert queue.client.llen(queue.keys.wait) == 0
    assert ids(queue.client.zrange(queue.keys.completed, 0, -1)) == [job.id]


@pytest.mark.parametrize("variant", ATOMIC)
def test_marks_100000_active_ids_without_an_unpack_error(queue: Queue, variant: str):
    client, keys = queue.client, queue.keys
    pipe = client.pipeline(transaction=False)
    for start in range(0, 100_000, 10_000):
        pipe.rpush(keys.active, *range(start, start + 10_000))
    pipe.execute()
    result = atomic(queue, variant).sweep()
    assert result.moved == [] and client.scard(keys.stalled) == 100_000
    assert client.llen(keys.active) == 100_000


@pytest.mark.parametrize("variant", ATOMIC)
def test_extend_lock_takes_the_mark_away(queue: Queue, variant: str):
    [job] = fetch(queue, 1)
    sweeper = atomic(queue, variant)
    sweeper.sweep()  # marks it
    assert Worker(queue).extend_lock(job)
    lose_lock(queue, job)
    assert sweeper.sweep().moved == []  # no mark: only marked now
    assert sweeper.sweep().moved == [job.id]


@pytest.mark.parametrize("variant", ATOMIC)
def test_past_the_max_stalled_count_a_job_fails(queue: Queue, variant: str):
    sweeper = atomic(queue, variant, max_stalled=1)
    [job] = fetch(queue, 1)
    sweeper.sweep()
    lose_lock(queue, job)
    assert sweeper.sweep().moved == [job.id]  # attempts 1: back to wait
    again = Worker(queue).fetch()
    assert again is not None and again.id == job.id
    sweeper.sweep()
    lose_lock(queue, again)
    result = sweeper.sweep()
    assert result.failed == [job.id] and result.moved == []
    fields = queue.client.hgetall(queue.keys.job(job.id))
    assert fields[b"atm"] == b"2" and fields[b"failedReason"].decode() == STALLED_REASON
    assert int(fields[b"finishedOn"]) > 0
    assert ids(queue.client.zrange(queue.keys.failed, 0, -1)) == [job.id]
    assert queue.client.llen(queue.keys.wait) == 0 and queue.client.llen(queue.keys.active) == 0


@pytest.mark.parametrize("variant", ATOMIC)
def test_attempts_after_k_stalls_is_k(queue: Queue, variant: str):
    sweeper = atomic(queue, variant, max_stalled=100)
    [job] = fetch(queue, 1)
    for stall in range(1, 4):
        sweeper.sweep()
        lose_lock(queue, job)
        assert sweeper.sweep().moved == [job.id]
        assert queue.client.hget(queue.keys.job(job.id), "atm") == str(stall).encode()
        refetched = Worker(queue).fetch()
        assert refetched is not None
        job = refetched


@pytest.mark.parametrize("variant", ATOMIC)
def test_a_paused_queue_takes_reclaimed_jobs_into_paused(queue: Queue, variant: str):
    [job] = fetch(queue, 1)
    sweeper = atomic(queue, variant)
    sweeper.sweep()
    lose_lock(queue, job)
    queue.pause()
    queue.client.delete(queue.keys.marker)
    assert sweeper.sweep().moved == [job.id]
    assert ids(queue.client.lrange(queue.keys.paused, 0, -1)) == [job.id]
    assert queue.client.llen(queue.keys.wait) == 0
    assert queue.client.exists(queue.keys.marker) == 0  # no wake-up while paused


@pytest.mark.parametrize("variant", ATOMIC)
def test_the_throttle_lets_one_sweep_through_an_interval(queue: Queue, variant: str):
    [job] = fetch(queue, 1)
    sweeper = atomic(queue, variant, interval_ms=60_000)
    sweeper.sweep()
    assert 0 < queue.client.pttl(queue.keys.stalled_check) <= 60_000
    lose_lock(queue, job)
    throttled = sweeper.sweep()
    assert throttled.moved == [] and throttled.calls == 1
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [job.id]
    queue.client.delete(queue.keys.stalled_check)  # the interval is over
    assert sweeper.sweep().moved == [job.id]


@pytest.mark.parametrize("variant", ATOMIC)
def test_a_marked_id_no_longer_in_active_is_skipped(queue: Queue, variant: str):
    jobs = fetch(queue, 2)
    sweeper = atomic(queue, variant)
    sweeper.sweep()
    queue.client.lrem(queue.keys.active, 1, jobs[0].id)  # another sweep took it meanwhile
    lose_lock(queue, *jobs)
    assert sweeper.sweep().moved == [jobs[1].id]
    assert ids(queue.client.lrange(queue.keys.wait, 0, -1)) == [jobs[1].id]


@pytest.mark.parametrize("variant", ATOMIC)
def test_evalsha_with_the_protocol_argv_returns_the_protocol_reply(queue: Queue, variant: str):
    [job] = fetch(queue, 1)
    sweeper = atomic(queue, variant)
    script = queue.scripts.by_step("sweep" if sweeper.protocol_step else sweeper.script_file)
    keys = queue.keys
    args = [1, keys.prefix, now_ms(), 0]  # no ARGV[5]: the sliced sweep's default slice
    assert script(keys.sweep_keys(), args) == [[], []]
    lose_lock(queue, job)
    assert script(keys.sweep_keys(), args) == [[], [job.id.encode()]]
    throttled = [1, keys.prefix, now_ms(), 60_000]
    script(keys.sweep_keys(), throttled)
    assert script(keys.sweep_keys(), throttled) == [[], []]


# ------------------------------------------------------------ the same outcome, three ways


def hand_built(queue: Queue, active: list[str], marked: list[str], locked: list[str]) -> None:
    client, keys = queue.client, queue.keys
    client.delete(keys.active, keys.stalled, keys.wait)
    client.rpush(keys.active, *active)
    client.sadd(keys.stalled, *marked)
    for job_id in set(active):
        client.delete(keys.lock(job_id))
    for job_id in locked:
        client.set(keys.lock(job_id), "t")


@pytest.mark.parametrize("stalled_count", [3, 40])  # the LREM path and the rewrite path
def test_linear_matches_the_protocol_sweep_exactly(client, stalled_count: int):
    """Duplicates, marked ids gone from active, unmarked lockless ids: the same lists after."""
    active = [str(i) for i in range(1, 61)] + ["5", "7"]  # two ids twice
    lockless = [str(i) for i in range(1, stalled_count + 1)]
    marked = [*lockless, "99", "50"]  # 99 is not in active; 50 keeps its lock
    locked = [j for j in active if j not in lockless]
    outcomes = []
    for variant in ("atomic", "atomic_linear"):
        queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}")
        try:
            hand_built(queue, active, marked, locked)
            result = atomic(queue, variant, max_stalled=10).sweep()
            keys = queue.keys
            outcomes.append(
                (
                    sorted(result.moved),
                    ids(client.lrange(keys.active, 0, -1)),
                    sorted(ids(client.lrange(keys.wait, 0, -1))),
                    sorted(ids(client.smembers(keys.stalled))),
                )
            )
        finally:
            queue.delete()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1].count("5") == 1 or stalled_count < 5  # one copy reclaimed, one kept


def test_sliced_matches_the_protocol_sweep_as_multisets(client):
    active = [str(i) for i in range(1, 31)] + ["4"]
    lockless = [str(i) for i in range(1, 21)]
    locked = [j for j in active if j not in lockless]
    outcomes = []
    for slice_size in (0, 4):  # the protocol sweep, then sliced by 4
        queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}")
        try:
            hand_built(queue, active, [*lockless, "77"], locked)
            sweeper: Sweeper = (
                AtomicSlicedSweeper(queue, max_stalled=10, slice_size=slice_size)
                if slice_size
                else AtomicSweeper(queue, max_stalled=10)
            )
            result = sweeper.sweep()
            keys = queue.keys
            outcomes.append(
                (
                    sorted(result.moved),
                    Counter(ids(client.lrange(keys.active, 0, -1))),
                    sorted(ids(client.smembers(keys.stalled))),
                )
            )
        finally:
            queue.delete()
    assert outcomes[0] == outcomes[1]


# ------------------------------------------------------------ what is particular to each


def test_linear_keeps_the_order_of_active(queue: Queue):
    jobs = fetch(queue, 50)
    sweeper = AtomicLinearSweeper(queue, max_stalled=5)
    sweeper.sweep()
    before = ids(queue.client.lrange(queue.keys.active, 0, -1))
    lose_lock(queue, *jobs[::2])
    assert len(sweeper.sweep().moved) == 25
    stalled = {j.id for j in jobs[::2]}
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [j for j in before if j not in stalled]


def test_sliced_spreads_a_pass_over_calls_of_at_most_a_slice(queue: Queue):
    jobs = fetch(queue, 25)
    sweeper = AtomicSlicedSweeper(queue, max_stalled=5, slice_size=4)
    first = sweeper.sweep()
    assert first.calls == 7 and first.round_trips == 7  # ceil(25 / 4)
    before = ids(queue.client.lrange(queue.keys.active, 0, -1))
    assert sorted(before) == sorted(j.id for j in jobs)
    healthy = sweeper.sweep()
    assert healthy.moved == [] and ids(queue.client.lrange(queue.keys.active, 0, -1)) == before
    lose_lock(queue, *jobs)
    result = sweeper.sweep()
    assert sorted(result.moved) == sorted(j.id for j in jobs) and result.calls == 7
    assert queue.client.exists(queue.keys.key("stalled-prev"), queue.keys.key("stalled-pass")) == 0


def test_sliced_throttle_is_checked_when_a_pass_starts(queue: Queue):
    fetch(queue, 6)
    sweeper = AtomicSlicedSweeper(queue, check_interval_ms=60_000, slice_size=2)
    assert sweeper.sweep().calls == 3  # the pass runs to its end inside the interval
    assert queue.client.scard(queue.keys.stalled) == 6
    assert sweeper.sweep().calls == 1  # a new pass is throttled


def test_sliced_pass_left_by_one_client_is_finished_by_another(queue: Queue, settings):
    jobs = fetch(queue, 9)
    AtomicSlicedSweeper(queue, max_stalled=5, slice_size=3).sweep()
    lose_lock(queue, *jobs)
    keys = queue.keys
    script = queue.scripts.by_step(AtomicSlicedSweeper.script_file)
    partial = script(keys.sweep_keys(), [5, keys.prefix, now_ms(), 0, 3])
    assert len(partial) == 3 and partial[2] == 6  # six ids still to visit
    other = settings.connect()
    try:
        rest = AtomicSlicedSweeper(queue.with_client(other), max_stalled=5, slice_size=3).sweep()
    finally:
        other.close()
    reclaimed = [i.decode() for i in partial[1]] + rest.moved
    assert sorted(reclaimed) == sorted(j.id for j in jobs)
    assert Counter(ids(queue.client.lrange(keys.wait, 0, -1))) == Counter(j.id for j in jobs)


def test_new_sweepers_load_their_own_script(client):
    plain = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}")  # opened without the extra scripts
    try:
        fetch(plain, 2)
        for cls in (AtomicLinearSweeper, AtomicSlicedSweeper):
            assert cls.script_file not in plain.scripts.extra or cls is AtomicSlicedSweeper
            cls(plain).sweep()
            assert cls.script_file in plain.scripts.extra
        ensure_script(plain, AtomicSweeper.script_file)  # a protocol script: nothing to add
        assert AtomicSweeper.script_file not in plain.scripts.extra
        assert AtomicSweeper(plain).sweep().moved == []
    finally:
        plain.delete()


def test_linear_sweeps_100000_stalled_ids_without_busy(queue: Queue, settings):
    client, keys = queue.client, queue.keys
    all_ids = [str(i) for i in range(1, 100_001)]
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(all_ids), 5000):
        chunk = all_ids[start : start + 5000]
        pipe.rpush(keys.active, *chunk)
        pipe.sadd(keys.stalled, *chunk)  # marked by a previous pass; no lock: all stalled
    pipe.execute()
    sweeper = AtomicLinearSweeper(queue, max_stalled=5)
    with Probe(settings, 200) as probe:
        probe.begin()
        result = sweeper.sweep()
        seen = probe.end()
    assert seen.busy == 0 and seen.errors == 0 and seen.sent > 0
    assert result.calls == 1 and len(result.moved) == 100_000 and len(set(result.moved)) == 100_000
    assert client.llen(keys.active) == 0 and client.llen(keys.wait) == 100_000


# ------------------------------------------------------------ every sweeper, every scenario


@pytest.fixture(scope="module")
def small_scenario(settings):
    client = settings.connect()
    scenario = ScenarioQueue(Queue.open(client, f"t-{uuid.uuid4().hex[:10]}"), []).grow(30)
    yield scenario
    scenario.queue.delete()
    client.close()


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("variant", list(SWEEPERS))
def test_each_sweeper_reclaims_exactly_the_stalled_jobs_once(small_scenario, variant: str, scenario: str):
    stalled = stalled_share(small_scenario.ids, scenario)
    small_scenario.restore(stalled)
    kwargs = {"slice_size": 7} if variant == "atomic_sliced" else {}
    sweeper = SWEEPERS[variant](small_scenario.queue, max_stalled=BENCH_MAX_STALLED, **kwargs)
    result = sweeper.sweep()
    assert small_scenario.check(stalled, result) is None
    assert len(result.moved) == len(stalled) == {"healthy": 0, "all_stalled": 30, "mixed": 3}[scenario]


def test_the_check_names_a_double_reclaim(small_scenario):
    stalled = stalled_share(small_scenario.ids, "mixed")
    small_scenario.restore(stalled)
    result = AtomicLinearSweeper(small_scenario.queue, max_stalled=BENCH_MAX_STALLED).sweep()
    small_scenario.queue.client.rpush(small_scenario.queue.keys.wait, stalled[0])  # a second recovery
    problem = small_scenario.check(stalled, result)
    assert problem is not None and "1 stalled jobs reclaimed twice" in problem


@pytest.mark.parametrize("variant", list(SWEEPERS))
def test_make_sweeper_gives_each_variant_only_what_applies_to_it(
    queue: Queue, variant: str, monkeypatch: pytest.MonkeyPatch
):
    pauses: list[float] = []
    monkeypatch.setattr(sweep_module.time, "sleep", pauses.append)
    sweeper = make_sweeper(variant, queue, max_stalled=7, act_delay_ms=3.0, slice_size=11)
    assert type(sweeper) is SWEEPERS[variant] and sweeper.max_stalled == 7
    assert (getattr(sweeper, "slice_size", None) == 11) == is_sliced(variant)
    assert isinstance(sweeper, AppSideSweeper) == has_gap(variant)
    if isinstance(sweeper, AppSideSweeper):
        sweeper.act_delay()
        assert pauses == [0.003]  # the simulated pause between check and act
        undelayed = make_sweeper(variant, queue, act_delay_ms=0.0)
        assert isinstance(undelayed, AppSideSweeper)
        undelayed.act_delay()
        assert pauses == [0.003]  # no pause asked, none taken


def test_make_sweeper_refuses_an_unknown_variant_naming_the_known(queue: Queue):
    with pytest.raises(BenchError, match=r"unknown sweep variant 'sideways'.*atomic_sliced"):
        make_sweeper("sideways", queue)
