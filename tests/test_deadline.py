"""echomq-deadline's scripts against their contract: lua/'s protocol, plus a deadline index
(lua/*Deadline-*.lua). The contract tests of lua/ also run against it (test_scripts.py,
test_sweep.py, test_audit.py); these cover what the index adds or could get wrong."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from redis.crc import key_slot

from bench.protocol.audit import audit
from bench.protocol.base import EchoMQ, SweepSlice
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.deadline import (
    DEADLINE_SCRIPT_FILES,
    EchoMQDeadline,
    deadlines_key,
    full_pass_key,
    lapse_deadlines,
    pass_key,
)
from bench.protocol.phases import command_difference, cycle_commands, measure_phases
from bench.protocol.queue import Job, Producer, Queue, Worker, WorkerOptions, now_ms
from bench.protocol.scripts import script_source
from bench.protocol.sweep import AtomicSweeper
from tests.helpers import ids, wait_until

pytestmark = pytest.mark.protocol

LOCK_MS = 60_000


@pytest.fixture
def protocol_name() -> str:
    return "echomq-deadline"


# The contract tests run against the sweep in one call (no limit) and against a pass spread
# over calls of at most LIMIT expired deadlines (the limited call): sweep() below is a pass.
LIMIT = 2


@pytest.fixture(params=[0, LIMIT], ids=["one_call", "limited"])
def sweep_limit(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def queue(client: Client, sweep_limit: int) -> Iterator[Queue]:
    q = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=EchoMQDeadline(sweep_limit=sweep_limit))
    yield q
    q.delete()


@pytest.fixture
def one_call_queue(client: Client) -> Iterator[Queue]:
    """For the tests that count the commands of the sweep in one call."""
    q = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=EchoMQDeadline())
    yield q
    q.delete()


def index(queue: Queue) -> dict[str, float]:
    """The deadline index: id -> score (ms)."""
    entries = queue.client.zrange(deadlines_key(queue.keys), 0, -1, withscores=True)
    return {ids([pair[0]])[0]: float(pair[1]) for pair in entries}


def marked(queue: Queue) -> list[str]:
    return sorted(ids(queue.client.smembers(queue.keys.stalled)))


def sweep(queue: Queue, *, now: int | None = None, max_stalled: int = 1) -> tuple[list[str], list[str]]:
    """One sweep at client time ``now``: (ids moved to failed, ids moved to wait). With a limit,
    a pass: calls until a reply has two elements (each call's ids in the order it gave them)."""
    failed: list[str] = []
    moved: list[str] = []
    for _ in range(100_000):
        call = queue.protocol.sweep(
            queue.keys, max_stalled=max_stalled, now_ms=now_ms() if now is None else now, interval_ms=0
        )
        reply = queue.call(call)
        got_failed, got_moved = queue.protocol.read_swept(reply)
        failed, moved = failed + got_failed, moved + got_moved
        if len(reply) < 3:
            return failed, moved
    raise AssertionError("a limited pass did not end within 100,000 calls")


def fetch_at(queue: Queue, ts: int, token: str = "w:1", lock_ms: int = LOCK_MS) -> str:
    """moveToActive at client time ``ts``: the id taken."""
    k = queue.keys
    reply = queue.scripts.move_to_active(k.move_to_active_keys(), [k.prefix, ts, token, lock_ms, 0, 0])
    return reply[1].decode()


def lapse(queue: Queue, job_ids: list[str]) -> None:
    """The locks of ``job_ids`` expired a moment ago: gone, and their deadlines passed."""
    pipe = queue.client.pipeline(transaction=False)
    pipe.delete(*(queue.keys.lock(job_id) for job_id in job_ids))
    lapse_deadlines(pipe, queue.keys, job_ids, now_ms() - 1)
    pipe.execute()


def stalled_jobs(queue: Queue, count: int) -> list[Job]:
    Producer(queue).add_batch(count)
    worker = Worker(queue, options=WorkerOptions(lock_ms=LOCK_MS))
    jobs = [worker.fetch() for _ in range(count)]
    assert all(jobs)
    return [j for j in jobs if j is not None]


# The scripts and their keys.


def test_every_script_declares_its_keys_and_the_derived_keys_in_its_header():
    for step, file_name in DEADLINE_SCRIPT_FILES.items():
        source = script_source(file_name)
        n = int(file_name.rsplit("-", 1)[1].removesuffix(".lua"))  # <name>-<numkeys>.lua
        assert source.startswith("--[["), file_name
        assert f"KEYS[{n}]" in source and f"KEYS[{n + 1}]" not in source, file_name
        assert "@include" not in source, file_name
        if step != "add_job":  # lua/'s own addJob: it takes no lock
            header = source.split("]]", 1)[0]
            assert "deadlines" in header, file_name


def test_the_shared_keys_keep_the_protocol_pages_order():
    deadline, echomq = EchoMQDeadline(), EchoMQ()
    q = echomq.keys("order")
    job = Job("7", {}, "tok")
    options = WorkerOptions()
    assert (
        deadline.move_to_active(q, token="t", options=options, now_ms=1).keys
        == echomq.move_to_active(q, token="t", options=options, now_ms=1).keys
    )
    finish = {"fetch_next": True, "failed": False, "value": "ok", "options": options, "now_ms": 1}
    assert deadline.move_to_finished(q, job, **finish) == echomq.move_to_finished(q, job, **finish)
    swept = deadline.sweep(q, max_stalled=1, now_ms=1, interval_ms=0)
    base = echomq.sweep(q, max_stalled=1, now_ms=1, interval_ms=0)
    assert swept.keys == base.keys and swept.args[: len(base.args)] == base.args
    extended = deadline.extend_lock(q, job, options=options, now_ms=1_000)
    assert extended.keys == [
        *echomq.extend_lock(q, job, options=options, now_ms=1_000).keys,
        deadlines_key(q),
    ]


def test_the_derived_keys_share_the_queues_slot(queue: Queue):
    keys = queue.keys
    names = [*keys.sweep_keys(), *keys.move_to_finished_keys("7", "completed"), keys.lock("7")]
    names += [deadlines_key(keys), full_pass_key(keys)]
    assert len({key_slot(n.encode()) for n in names}) == 1


# Where the index is written.


def test_a_fetch_indexes_its_locks_deadline(queue: Queue):
    Producer(queue).add_batch(2)
    ts = now_ms()
    assert fetch_at(queue, ts, lock_ms=5_000) == "1"
    assert index(queue) == {"1": ts + 5_000}
    assert 0 < queue.client.pttl(queue.keys.lock("1")) <= 5_000


def test_a_fetch_that_takes_nothing_indexes_nothing(queue: Queue):
    assert Worker(queue).fetch() is None  # empty
    Producer(queue).add()
    queue.pause()
    assert Worker(queue).fetch() is None  # paused
    assert index(queue) == {}


def test_a_fused_finish_moves_the_entry_to_the_next_job(queue: Queue):
    Producer(queue).add_batch(2)
    job = Worker(queue).fetch()
    assert job is not None
    ts = now_ms()
    k = queue.keys
    args = [job.id, ts, "returnvalue", "ok", "completed", 1, k.prefix, job.token, 7_000, -1, 0, 0, 0]
    reply = queue.scripts.move_to_finished(k.move_to_finished_keys(job.id, "completed"), args)
    assert reply[1] == b"2"
    assert index(queue) == {"2": ts + 7_000}


def test_a_finish_without_next_removes_the_entry(queue: Queue):
    Producer(queue).add_batch(2)
    worker = Worker(queue, "two_call")
    job = worker.fetch()
    assert job is not None
    assert worker.finish(job, fetch_next=False).code == 0
    assert index(queue) == {}
    assert worker.fetch() is not None and list(index(queue)) == ["2"]


def test_a_refused_finish_leaves_the_index_as_it_was(queue: Queue):
    Producer(queue).add()
    job = Worker(queue).fetch()
    assert job is not None
    before = index(queue)
    assert Worker(queue).finish(Job(job.id, job.fields, "other"), fetch_next=True).code == -6
    assert index(queue) == before


def test_an_id_that_comes_straight_back_keeps_its_entry(queue: Queue):
    Producer(queue).add()
    job = Worker(queue).fetch()
    assert job is not None
    queue.client.rpush(queue.keys.wait, job.id)  # the same id ready again (as a double recovery leaves it)
    outcome = Worker(queue).finish(job, fetch_next=True)
    assert outcome.next_job is not None and outcome.next_job.id == job.id
    assert list(index(queue)) == [job.id]


def test_extend_lock_moves_the_deadline_and_only_for_the_holder(queue: Queue):
    Producer(queue).add()
    worker = Worker(queue, options=WorkerOptions(lock_ms=1_000))
    job = worker.fetch()
    assert job is not None
    first = index(queue)[job.id]
    worker.options.lock_ms = LOCK_MS
    assert not worker.extend_lock(Job(job.id, job.fields, "wrong"))
    assert index(queue)[job.id] == first
    before = now_ms()
    assert worker.extend_lock(job)
    assert before + LOCK_MS <= index(queue)[job.id] <= now_ms() + LOCK_MS


def test_extend_lock_writes_a_lost_entry_again_and_reads_the_server_clock_without_a_timestamp(queue: Queue):
    Producer(queue).add()
    job = Worker(queue).fetch()
    assert job is not None
    c, k = queue.client, queue.keys
    c.zrem(deadlines_key(k), job.id)
    keys = [k.lock(job.id), k.stalled, deadlines_key(k)]
    server_ms = int(c.time()[0]) * 1000
    assert queue.scripts.extend_lock(keys, [job.token, 5_000, job.id]) == 1  # no ARGV[4]
    assert server_ms + 5_000 <= index(queue)[job.id] <= server_ms + 5_000 + 2_000


# The sweep.


def test_a_healthy_sweep_writes_nothing(queue: Queue):
    jobs = stalled_jobs(queue, 3)
    before = index(queue)
    for _ in range(3):
        assert sweep(queue) == ([], [])
    assert index(queue) == before and marked(queue) == []
    assert sorted(ids(queue.client.lrange(queue.keys.active, 0, -1))) == sorted(j.id for j in jobs)


def test_a_lapsed_lock_is_marked_by_one_sweep_and_reclaimed_by_the_next(queue: Queue):
    jobs = stalled_jobs(queue, 3)
    lapse(queue, [jobs[0].id, jobs[2].id])
    assert sweep(queue) == ([], [])  # seen lockless once: marked
    assert marked(queue) == sorted([jobs[0].id, jobs[2].id])
    failed, moved = sweep(queue)
    assert failed == [] and sorted(moved) == sorted([jobs[0].id, jobs[2].id])
    c, k = queue.client, queue.keys
    assert list(index(queue)) == [jobs[1].id] and marked(queue) == []
    assert ids(c.lrange(k.active, 0, -1)) == [jobs[1].id]
    assert sorted(ids(c.lrange(k.wait, 0, -1))) == sorted(moved)
    assert all(c.hget(k.job(j), "atm") == b"1" for j in moved)
    assert c.zcard(k.marker) == 1


def test_a_live_lock_is_never_marked_or_reclaimed(queue: Queue):
    jobs = stalled_jobs(queue, 2)
    lapse(queue, [jobs[0].id])
    live = index(queue)[jobs[1].id]
    for _ in range(3):
        sweep(queue)
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [jobs[1].id]
    assert marked(queue) == [] and index(queue) == {jobs[1].id: live}


def test_a_lock_renewed_just_before_the_sweep_is_not_reclaimed(queue: Queue):
    # The index says the lock expired, the lock says it was renewed: the lock wins.
    Producer(queue).add_batch(2)
    ts = now_ms()
    stale = fetch_at(queue, ts - 2 * LOCK_MS)  # its deadline passed LOCK_MS ago, its lock lives
    for _ in range(2):
        assert sweep(queue) == ([], [])
    assert marked(queue) == [] and ts + LOCK_MS - 5_000 <= index(queue)[stale] <= now_ms() + LOCK_MS
    # A lock gone at one sweep and written again before the next: not reclaimed, unmarked.
    lapse(queue, [stale])
    assert sweep(queue) == ([], []) and marked(queue) == [stale]
    queue.client.set(queue.keys.lock(stale), "w:1", px=LOCK_MS)
    assert sweep(queue) == ([], [])
    assert marked(queue) == [] and index(queue)[stale] > now_ms()
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [stale]


def test_extend_lock_just_before_the_sweep_keeps_the_job_off_the_sweeps_list(queue: Queue):
    jobs = stalled_jobs(queue, 1)
    queue.client.zadd(deadlines_key(queue.keys), {jobs[0].id: now_ms() - 1})  # about to lapse
    assert Worker(queue, options=WorkerOptions(lock_ms=LOCK_MS)).extend_lock(jobs[0])
    before = CommandStats.read(queue.client)
    assert sweep(queue) == ([], [])
    delta = CommandStats.read(queue.client).since(before)
    # not due: the sweep did not even look at its lock
    assert delta.calls.get("pttl", 0) == 0 and delta.calls.get("mget", 0) == 0


@pytest.mark.parametrize("finished_by", ["echomq-deadline", "echomq"])
def test_a_job_finished_between_the_marking_sweep_and_the_moving_one_is_not_requeued(
    queue: Queue, client: Client, finished_by: str
):
    jobs = stalled_jobs(queue, 1)
    job_id = jobs[0].id
    lapse(queue, [job_id])
    assert sweep(queue) == ([], []) and marked(queue) == [job_id]
    # Finished with token 0 (the lock check skipped: the lock has gone), by this protocol,
    # or by lua/'s plain moveToFinished, which leaves the index entry behind.
    finisher = queue if finished_by == queue.protocol.name else Queue.open(client, queue.keys.name)
    assert Worker(finisher).finish(Job(job_id, {}, "0"), fetch_next=False).code == 0
    assert marked(queue) == []
    if finished_by == queue.protocol.name:
        assert index(queue) == {}
    for _ in range(3):
        assert sweep(queue) == ([], [])
    c, k = queue.client, queue.keys
    assert c.llen(k.wait) == 0 and c.llen(k.active) == 0 and ids(c.zrange(k.completed, 0, -1)) == [job_id]
    assert index(queue) == {} and marked(queue) == []  # a left-behind entry is cleared, not acted on
    assert c.hget(k.job(job_id), "atm") == b"1"  # the finish's attempt, no reclaim's


@pytest.fixture
def full_pass_queue(client: Client, sweep_limit: int) -> Iterator[Queue]:
    """A queue whose full pass runs at most once a minute: a test ends the interval itself
    (full_pass_due), so a slow machine cannot end it early."""
    protocol = EchoMQDeadline(full_pass_ms=60_000, sweep_limit=sweep_limit)
    q = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=protocol)
    yield q
    q.delete()


def full_pass_due(queue: Queue) -> None:
    """The interval's end, by the key's own expiry, brought forward."""
    queue.client.pexpire(full_pass_key(queue.keys), 1)
    wait_until(lambda: not queue.client.exists(full_pass_key(queue.keys)), 5.0, "the full pass interval")


def test_a_job_whose_entry_is_missing_is_found_within_two_intervals(full_pass_queue: Queue):
    queue = full_pass_queue
    assert sweep(queue) == ([], [])  # the first call runs a full pass and starts its interval
    assert queue.client.pttl(full_pass_key(queue.keys)) > 0
    crashed, live = stalled_jobs(queue, 2)
    c, k = queue.client, queue.keys
    c.zrem(deadlines_key(k), crashed.id, live.id)  # in active, no entry (a fetch half done)
    c.delete(k.lock(crashed.id))  # and its worker gone
    assert sweep(queue) == ([], []) and marked(queue) == []  # not due: the index does not know it
    full_pass_due(queue)
    assert sweep(queue) == ([], [])  # the full pass indexes both; the lockless one is marked
    assert marked(queue) == [crashed.id]
    assert live.id in index(queue) and index(queue)[live.id] > now_ms() + LOCK_MS / 2
    assert sweep(queue) == ([], [crashed.id])  # reclaimed by the sweep after the full pass
    assert ids(c.lrange(k.active, 0, -1)) == [live.id] and list(index(queue)) == [live.id]


def test_a_full_pass_over_a_complete_index_reads_no_ids(full_pass_queue: Queue):
    queue = full_pass_queue
    stalled_jobs(queue, 5)
    before = CommandStats.read(queue.client)
    assert sweep(queue) == ([], [])  # the first call: a full pass, counts equal
    delta = CommandStats.read(queue.client).since(before)
    assert delta.calls.get("zcard") == 1
    assert delta.calls.get("lrange", 0) == 0 and delta.calls.get("zmscore", 0) == 0


def test_a_lock_without_expiry_is_looked_at_again_a_full_pass_interval_later(queue: Queue):
    jobs = stalled_jobs(queue, 1)
    c, k = queue.client, queue.keys
    c.set(k.lock(jobs[0].id), jobs[0].token)  # no PX
    c.zadd(deadlines_key(k), {jobs[0].id: now_ms() - 1})
    ts = now_ms()
    assert sweep(queue, now=ts) == ([], [])
    assert isinstance(queue.protocol, EchoMQDeadline)
    assert index(queue)[jobs[0].id] == ts + queue.protocol.full_pass_ms
    assert marked(queue) == []


def test_an_entry_for_an_id_not_in_active_is_cleared_and_nothing_moves(queue: Queue):
    c, k = queue.client, queue.keys
    c.zadd(deadlines_key(k), {"ghost": now_ms() - 1})
    assert sweep(queue) == ([], []) and marked(queue) == ["ghost"]
    assert sweep(queue) == ([], [])
    assert index(queue) == {} and marked(queue) == [] and c.llen(k.wait) == 0


@pytest.mark.parametrize("max_stalled", [1, 2])
def test_attempts_after_k_stalls_is_k_then_failed_past_the_max(queue: Queue, max_stalled: int):
    stalled_jobs(queue, 1)
    c, k = queue.client, queue.keys
    worker = Worker(queue, options=WorkerOptions(lock_ms=LOCK_MS))
    for stalls in range(1, max_stalled + 2):
        lapse(queue, ["1"])
        assert sweep(queue, max_stalled=max_stalled) == ([], [])  # marks
        failed, moved = sweep(queue, max_stalled=max_stalled)  # reclaims
        assert c.hget(k.job("1"), "atm") == str(stalls).encode()
        assert index(queue) == {}
        if stalls <= max_stalled:
            assert moved == ["1"] and failed == []
            assert worker.fetch() is not None and list(index(queue)) == ["1"]
        else:
            assert failed == ["1"] and moved == []
            assert ids(c.zrange(k.failed, 0, -1)) == ["1"]
            assert c.hget(k.job("1"), "failedReason") == b"job stalled more than allowable limit"
            assert c.llen(k.wait) == 0 and c.llen(k.active) == 0


def test_a_reclaim_on_a_paused_queue_goes_to_paused(queue: Queue):
    jobs = stalled_jobs(queue, 1)
    lapse(queue, [jobs[0].id])
    sweep(queue)
    queue.pause()
    assert sweep(queue) == ([], [jobs[0].id])
    assert ids(queue.client.lrange(queue.keys.paused, 0, -1)) == [jobs[0].id]
    assert queue.client.llen(queue.keys.wait) == 0


def test_a_limited_pass_spans_calls_and_reclaims_in_the_next_pass_oldest_first(client: Client):
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=EchoMQDeadline(sweep_limit=2))
    try:
        jobs = stalled_jobs(queue, 3)
        ts = now_ms()
        pipe = client.pipeline(transaction=False)
        for age, job in zip((1, 3, 2), jobs, strict=True):  # job 2 lapsed first, then 3, then 1
            pipe.delete(queue.keys.lock(job.id))
            lapse_deadlines(pipe, queue.keys, [job.id], ts - age * 1000)
        pipe.execute()
        call = queue.protocol.sweep(queue.keys, max_stalled=1, now_ms=now_ms(), interval_ms=0)
        assert queue.call(call) == [[], [], 1]  # two read and marked, one left: the pass goes on
        assert marked(queue) == ["2", "3"] and client.exists(pass_key(queue.keys))
        assert queue.call(call) == [[], []]  # the third, marked; the pass is done
        assert marked(queue) == ["1", "2", "3"] and not client.exists(pass_key(queue.keys))
        assert sweep(queue) == ([], ["2", "3", "1"])  # the next pass reclaims, oldest first
        assert ids(client.lrange(queue.keys.wait, 0, -1)) == ["2", "3", "1"]
    finally:
        queue.delete()


# What it costs.


def test_the_hot_path_script_cost_is_one_zadd_and_one_zrem_a_cycle_and_one_zadd_an_extend(client: Client):
    base = cycle_commands(measure_phases(client, 10, "echomq"))
    deadline = cycle_commands(measure_phases(client, 10, "echomq-deadline"))
    assert command_difference(base["fused cycle"], deadline["fused cycle"]) == {"zadd": 1, "zrem": 1}
    assert command_difference(base["two-call cycle"], deadline["two-call cycle"]) == {"zadd": 1, "zrem": 1}
    assert command_difference(base["extendLock"], deadline["extendLock"]) == {"zadd": 1}
    assert deadline["fused cycle"]["evalsha"] == 1 and deadline["two-call cycle"]["evalsha"] == 2


def fill_active(queue: Queue, size: int) -> None:
    """``size`` healthy jobs in active, written as the protocol writes them (ids, locks, entries)."""
    c, k = queue.client, queue.keys
    due = now_ms() + LOCK_MS
    pipe = c.pipeline(transaction=False)
    for start in range(0, size, 5_000):
        chunk = [str(i) for i in range(start, min(size, start + 5_000))]
        pipe.lpush(k.active, *chunk)
        pipe.zadd(deadlines_key(k), dict.fromkeys(chunk, due))
        pipe.mset({k.lock(job_id): "w" for job_id in chunk})  # no expiry: none lapses meanwhile
        pipe.execute()


def commands_per_sweep(queue: Queue) -> dict[str, int]:
    sweeper = AtomicSweeper(queue)
    before = CommandStats.read(queue.client)
    assert sweeper.sweep().moved == []
    return {n: c for n, c in CommandStats.read(queue.client).since(before).calls.items() if c}


def test_a_healthy_sweeps_commands_stay_flat_as_active_grows(client: Client):
    counted: dict[str, list[dict[str, int]]] = {"echomq": [], "echomq-deadline": []}
    for size in (1_000, 20_000):
        for name, found in counted.items():
            queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=name)
            try:
                fill_active(queue, size)
                first = commands_per_sweep(queue)  # echomq-deadline: the full pass, counts equal
                found.append(first)
                found.append(commands_per_sweep(queue))
            finally:
                queue.delete()
    deadline = counted["echomq-deadline"]
    assert deadline[0] == deadline[2] and deadline[1] == deadline[3]
    # A call: the full pass's throttle and the expired deadlines (none).
    assert deadline[1] == {"evalsha": 1, "exists": 1, "zrangebyscore": 1}
    # The first call's full pass compares two counts and reads no id of active.
    assert deadline[0] == {**deadline[1], "set": 1, "zcard": 1, "llen": 1}
    # The count does see an active list: echomq's sweep checks one lock a marked id.
    assert counted["echomq"][1]["exists"] == 1_000 and counted["echomq"][3]["exists"] == 20_000


# Many sweepers at once.


@pytest.mark.parametrize("sweepers", [2, 8])
def test_concurrent_sweepers_reclaim_each_stalled_job_once(
    queue: Queue, settings: RedisSettings, sweepers: int
):
    count = 150
    Producer(queue).add_batch(count)
    crashed = Worker(queue, "two_call", WorkerOptions(lock_ms=1))
    stalled = [j.id for j in crashed.fetch_batch(count)]
    wait_until(lambda: queue.client.exists(*(queue.keys.lock(j) for j in stalled)) == 0, what="1 ms locks")
    live = Producer(queue).add_batch(count)
    moved: Counter[str] = Counter()
    done = threading.Event()
    errors: list[BaseException] = []
    clients = [settings.connect() for _ in range(sweepers + 1)]

    def sweep_loop(own: Client) -> None:
        try:
            sweeper = AtomicSweeper(queue.with_client(own), max_stalled=5)
            while not done.is_set():
                result = sweeper.sweep()
                with lock:
                    moved.update(result.moved)
                    if set(moved) >= set(stalled):
                        done.set()
        except BaseException as exc:  # a thread's failure fails the test
            errors.append(exc)
            done.set()

    def work_loop(own: Client) -> None:
        worker = Worker(queue.with_client(own), "fused", WorkerOptions(lock_ms=LOCK_MS))
        job = worker.fetch()
        while job is not None and not done.is_set():
            job = worker.complete_and_next(job)

    lock = threading.Lock()
    threads = [threading.Thread(target=sweep_loop, args=(c,)) for c in clients[:sweepers]]
    threads.append(threading.Thread(target=work_loop, args=(clients[-1],)))
    try:
        for t in threads:
            t.start()
        assert done.wait(30.0), "the sweepers did not reclaim every stalled job within 30 s"
        for t in threads:
            t.join(10.0)
    finally:
        done.set()
        for own in clients:
            own.close()
    assert errors == []
    assert all(moved[j] == 1 for j in stalled) and set(moved) == set(stalled)  # none twice, none lost
    result = audit(queue, [*stalled, *live])
    assert result.ok, result.verdict
    c, k = queue.client, queue.keys
    assert all(c.hget(k.job(j), "atm") in (b"1", b"2") for j in stalled)  # one reclaim (+ its finish)
    in_active = set(ids(c.lrange(k.active, 0, -1)))
    assert set(index(queue)) == in_active  # every job in active has its entry, and only those


# Taking reclaimed ids out of active: from its right end in chunks while they sit there, else LREM.


def _two_sweeps(queue: Queue, lapsed: list[str]) -> tuple[list[str], list[str]]:
    """Lapse the locks of ``lapsed``, mark them, then the sweep that reclaims: its reply (the
    commands it ran inside in ``queue.swept_with``)."""
    lapse(queue, lapsed)
    assert sweep(queue, max_stalled=5) == ([], [])
    assert marked(queue) == sorted(lapsed)
    before = CommandStats.read(queue.client)
    reply = sweep(queue, max_stalled=5)
    queue.swept_with = CommandStats.read(queue.client).since(before).calls  # type: ignore[attr-defined]
    return reply


@pytest.mark.parametrize("count", [1, 1500, 2600])  # one id; two chunks but part of one; three
def test_stalled_ids_at_the_oldest_end_leave_active_and_the_rest_keep_their_order(
    one_call_queue: Queue, count: int
):
    queue = one_call_queue
    jobs = stalled_jobs(queue, count + 3)
    active = ids(queue.client.lrange(queue.keys.active, 0, -1))  # newest first
    oldest = active[-count:]
    failed, moved = _two_sweeps(queue, [j for j in reversed(oldest)])
    assert failed == [] and moved == list(reversed(oldest))  # in the order their locks lapsed
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == active[:-count]
    assert ids(queue.client.lrange(queue.keys.wait, 0, -1)) == list(reversed(oldest))
    assert len(jobs) == count + 3
    # all taken by RPOP from the end (a chunk a 1000), none by LREM, whatever the count
    assert queue.swept_with.get("lrem", 0) == 0 and queue.swept_with["rpop"] == -(-count // 1000)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "lapses",
    [
        lambda i: i % 3 == 2,  # one in three: a chunk at the end holds too few of them, so LREM
        lambda i: i % 3 != 0,  # two in three: chunks from the end, the live ones among them put back
        lambda i: (i < 1200 and i % 4 != 0) or (i >= 2000 and i % 5 == 0),  # chunks, then LREM
    ],
    ids=["one_in_three", "two_in_three", "chunks_then_lrem"],
)
def test_stalled_ids_among_live_ones_leave_active_and_the_rest_keep_their_order(
    one_call_queue: Queue, lapses: Callable[[int], bool], request: pytest.FixtureRequest
):
    queue = one_call_queue
    name = request.node.callspec.id
    stalled_jobs(queue, 2500)
    active = ids(queue.client.lrange(queue.keys.active, 0, -1))
    lapsed = [job_id for i, job_id in enumerate(reversed(active)) if lapses(i)]  # i: from the oldest
    failed, moved = _two_sweeps(queue, lapsed)
    assert failed == [] and moved == lapsed
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [j for j in active if j not in lapsed]
    # one chunk with too few of them, then LREM; chunks while most of one is
    rpops, lrems = {
        "one_in_three": (1, 556),  # 277 of the 833 ids at the end were lapsed: too few
        "two_in_three": (8, 0),  # 1000, 1000, 333, 111, ... at the end, two thirds each
        "chunks_then_lrem": (3, 100),  # 750 of 1000, 150 of 250, 0 of 100: the last 100 by LREM
    }[name]
    calls = queue.swept_with  # type: ignore[attr-defined]
    assert (calls["rpop"], calls.get("lrem", 0)) == (rpops, lrems), len(lapsed)


def test_a_reclaimed_id_twice_in_active_leaves_once_from_the_oldest_end(queue: Queue):
    stalled_jobs(queue, 3)
    k = queue.keys
    active = ids(queue.client.lrange(k.active, 0, -1))  # [3, 2, 1]
    queue.client.lpush(k.active, active[-1])  # "1" again, at the newest end
    assert _two_sweeps(queue, [active[-1]]) == ([], [active[-1]])
    assert ids(queue.client.lrange(k.active, 0, -1)) == [active[-1], *active[:-1]]  # the left copy stays


def test_a_marked_lockless_id_gone_from_active_is_not_reclaimed_beside_ones_that_are(queue: Queue):
    stalled_jobs(queue, 4)
    k = queue.keys
    active = ids(queue.client.lrange(k.active, 0, -1))
    lapsed = list(reversed(active))  # all four
    lapse(queue, lapsed)
    assert sweep(queue, max_stalled=5) == ([], [])
    queue.client.lrem(k.active, 0, lapsed[1])  # taken out by another sweep meanwhile
    assert sweep(queue, max_stalled=5) == ([], [lapsed[0], lapsed[2], lapsed[3]])
    assert queue.client.llen(k.active) == 0 and lapsed[1] not in index(queue)


# The limited call: a pass of many calls, each reading at most its limit.


def fill_stalled(queue: Queue, size: int) -> list[str]:
    """``size`` jobs in active whose locks lapsed (no lock, an expired entry), as the protocol
    leaves them; their ids oldest first (the rightmost of active lapsed first)."""
    c, k = queue.client, queue.keys
    job_ids = [str(i) for i in range(size)]
    pipe = c.pipeline(transaction=False)
    for start in range(0, size, 5_000):
        chunk = job_ids[start : start + 5_000]
        pipe.lpush(k.active, *chunk)
        pipe.zadd(deadlines_key(k), dict.fromkeys(chunk, 0))
    lapse_deadlines(pipe, k, job_ids, now_ms() - 1)
    pipe.execute()
    return job_ids


def limited_pass(queue: Queue, limit: int, budget_us: int = 0) -> list[tuple[int, list[str]]]:
    """One pass of calls of ``limit``: per call, the marks it added and the ids it moved."""
    calls: list[tuple[int, list[str]]] = []
    while len(calls) < 100_000:
        marks = queue.client.scard(queue.keys.stalled)
        call = queue.protocol.sliced_sweep(
            queue.keys, max_stalled=5, now_ms=now_ms(), interval_ms=0, cut=SweepSlice(limit, budget_us)
        )
        reply = queue.call(call)
        calls.append((queue.client.scard(queue.keys.stalled) - marks, ids(reply[1])))
        if len(reply) < 3:
            return calls
    raise AssertionError("a limited pass did not end within 100,000 calls")


@pytest.mark.parametrize("stalled", [1_000, 20_000])
def test_each_call_of_a_limited_pass_reads_at_most_its_limit_and_the_pass_reclaims_each_once(
    client: Client, stalled: int
):
    limit = 150
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=EchoMQDeadline())
    try:
        lapsed = fill_stalled(queue, stalled)
        calls = -(-stalled // limit)
        marking = limited_pass(queue, limit)
        # every id read is lockless and unmarked: a call marks what it reads, no more than its limit
        assert [n for n, _ in marking] == [limit] * (stalled // limit) + (
            [stalled % limit] if stalled % limit else []
        )
        assert all(moved == [] for _, moved in marking) and len(marking) == calls
        assert queue.client.scard(queue.keys.stalled) == stalled
        reclaiming = limited_pass(queue, limit)
        # every id read is marked and lockless: a call reclaims what it reads, oldest first
        assert [len(moved) for _, moved in reclaiming] == [
            len(lapsed[i : i + limit]) for i in range(0, stalled, limit)
        ]
        assert [j for _, moved in reclaiming for j in moved] == lapsed  # each once, in the order they lapsed
        c, k = queue.client, queue.keys
        assert ids(c.lrange(k.wait, 0, -1)) == lapsed and c.llen(k.active) == 0
        assert c.zcard(deadlines_key(k)) == 0 and c.scard(k.stalled) == 0
        assert not c.exists(pass_key(k))
    finally:
        queue.delete()


def test_a_limited_pass_among_live_jobs_reclaims_exactly_the_stalled_and_keeps_the_rest(client: Client):
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=EchoMQDeadline())
    try:
        jobs = stalled_jobs(queue, 300)
        active = ids(queue.client.lrange(queue.keys.active, 0, -1))
        lapsed = [j for i, j in enumerate(reversed(active)) if i % 3 == 1]  # oldest first
        lapse(queue, lapsed)
        assert [moved for _, moved in limited_pass(queue, 7)] == [[]] * (-(-len(lapsed) // 7))
        moved = [j for _, got in limited_pass(queue, 7) for j in got]
        assert moved == lapsed
        assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == [j for j in active if j not in lapsed]
        assert len(jobs) == 300 and marked(queue) == []
        assert limited_pass(queue, 7) == [(0, [])]  # nothing due: one call, a pass
    finally:
        queue.delete()


def test_a_limited_pass_spreads_its_full_pass_over_calls_and_reads_what_it_indexed(client: Client):
    limit, size = 150, 1000
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=EchoMQDeadline(full_pass_ms=0))
    try:
        c, k = queue.client, queue.keys
        job_ids = [str(i) for i in range(size)]
        c.lpush(k.active, *job_ids)  # in active, no entry, no lock: found only by the full pass
        c.zadd(deadlines_key(k), {"live": now_ms() + LOCK_MS})  # one entry: the counts differ
        c.lpush(k.active, "live")
        c.set(k.lock("live"), "w", px=LOCK_MS)
        seen = []  # per call: entries indexed plus marks added, all ids it read
        while True:
            entries, marks = c.zcard(deadlines_key(k)), c.scard(k.stalled)
            call = queue.protocol.sliced_sweep(
                k, max_stalled=5, now_ms=now_ms(), interval_ms=0, cut=SweepSlice(limit, 0)
            )
            reply = queue.call(call)
            seen.append(c.zcard(deadlines_key(k)) - entries + c.scard(k.stalled) - marks)
            if len(reply) < 3:
                break
        # the walk reads 1,001 ids of active (1,000 indexed), then the pass marks the 1,000 due
        assert all(n <= limit for n in seen) and sum(seen) == 2 * size
        assert len(seen) == -(-(size + 1 + size) // limit)
        assert c.scard(k.stalled) == size and c.zcard(deadlines_key(k)) == size + 1
        moved = [j for _, got in limited_pass(queue, limit) for j in got]
        assert sorted(moved) == sorted(job_ids)  # the next pass reclaims each once
        assert ids(c.lrange(k.active, 0, -1)) == ["live"] and marked(queue) == []
    finally:
        queue.delete()
