"""The Lua scripts against protocol.md, driven by EVALSHA with the page's KEYS and ARGV."""

from __future__ import annotations

import time

import pytest
from redis.crc import key_slot

from bench.protocol.keys import QueueKeys
from bench.protocol.queue import Job, Producer, Queue, Worker, WorkerOptions, now_ms
from bench.protocol.scripts import SCRIPT_FILES, script_source
from tests.helpers import PROTOCOL_NAMES, ids

pytestmark = pytest.mark.protocol


@pytest.fixture(params=PROTOCOL_NAMES)
def protocol_name(request: pytest.FixtureRequest) -> str:
    """Every test that takes ``queue`` runs against each protocol of PROTOCOL_NAMES."""
    return str(request.param)


def finish_args(queue: Queue, job_id: str, token: str, fetch_next: int = 0, keep: int = -1) -> list:
    return [
        job_id,
        now_ms(),
        "returnvalue",
        "ok",
        "completed",
        fetch_next,
        queue.keys.prefix,
        token,
        30_000,
        keep,
        0,
        0,
        0,
    ]


def finish(queue: Queue, job_id: str, token: str, **kw) -> object:
    keys = queue.keys.move_to_finished_keys(job_id, "completed")
    return queue.scripts.move_to_finished(keys, finish_args(queue, job_id, token, **kw))


def test_every_script_declares_its_key_count_and_header():
    for file_name in SCRIPT_FILES.values():
        source = script_source(file_name)
        n = int(file_name.rsplit("-", 1)[1].removesuffix(".lua"))  # <name>-<numkeys>.lua
        assert source.startswith("--[["), file_name
        assert f"KEYS[{n}]" in source
        assert f"KEYS[{n + 1}]" not in source
        assert "@include" not in source


def test_all_keys_of_a_queue_share_one_cluster_slot(queue: Queue):
    keys = queue.keys
    names = [
        *keys.move_to_finished_keys("7", "completed"),
        *keys.sweep_keys(),
        *keys.add_job_keys(),
        keys.lock("7"),
        keys.metrics("failed"),
    ]
    assert len({key_slot(n.encode()) for n in names}) == 1
    assert all(f"{{{keys.name}}}" in n for n in names)


def test_add_job_writes_hash_pushes_to_wait_and_sets_marker(queue: Queue):
    job_id = Producer(queue).add('{"x":1}')
    c, k = queue.client, queue.keys
    assert job_id == "1"
    assert ids(c.lrange(k.wait, 0, -1)) == ["1"]
    fields = c.hgetall(k.job("1"))
    assert fields[b"data"] == b'{"x":1}' and fields[b"atm"] == b"0" and fields[b"name"] == b"bench"
    assert c.zrange(k.marker, 0, -1) == [b"0"]
    assert c.xlen(k.events) == 1


def test_add_job_refuses_an_existing_id_and_writes_nothing(queue: Queue):
    producer = Producer(queue)
    producer.add('{"a":1}', job_id="j1")
    before = queue.client.hgetall(queue.keys.job("j1"))
    reply = queue.scripts.add_job(
        queue.keys.add_job_keys(), [queue.keys.prefix, "j1", "n", "{}", now_ms(), 0, 0]
    )
    assert reply == -5
    assert queue.client.hgetall(queue.keys.job("j1")) == before
    assert queue.client.llen(queue.keys.wait) == 1


def test_fetch_locks_the_job_and_returns_its_hash(queue: Queue):
    Producer(queue).add('{"x":2}')
    worker = Worker(queue)
    job = worker.fetch()
    assert job is not None and job.id == "1"
    assert job.fields["data"] == '{"x":2}' and job.fields["ats"] == "1"
    assert queue.client.get(queue.keys.lock("1")).decode() == job.token
    assert 0 < queue.client.pttl(queue.keys.lock("1")) <= 30_000
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == ["1"]
    assert queue.client.llen(queue.keys.wait) == 0


def test_fetch_takes_oldest_first_and_reports_nothing_to_take(queue: Queue):
    producer = Producer(queue)
    for _ in range(3):
        producer.add()
    worker = Worker(queue)
    assert [worker.fetch().id for _ in range(3)] == ["1", "2", "3"]
    reply = queue.scripts.move_to_active(
        queue.keys.move_to_active_keys(), [queue.keys.prefix, now_ms(), "t", 1000, 0, 0]
    )
    assert reply == [0, 0, 0, 0]


def test_fused_finish_returns_the_next_job_locked_with_the_same_token(queue: Queue):
    producer = Producer(queue)
    producer.add()
    producer.add()
    worker = Worker(queue, "fused")
    job = worker.fetch()
    assert job is not None
    nxt = worker.complete_and_next(job)
    assert nxt is not None and nxt.id == "2"
    c, k = queue.client, queue.keys
    assert c.get(k.lock("2")).decode() == job.token
    assert c.exists(k.lock("1")) == 0
    assert ids(c.zrange(k.completed, 0, -1)) == ["1"]
    assert c.hget(k.job("1"), "atm") == b"1"
    assert c.hget(k.job("1"), "returnvalue") == b"ok"
    assert ids(c.lrange(k.active, 0, -1)) == ["2"]


def test_finish_without_next_returns_zero(queue: Queue):
    Producer(queue).add()
    worker = Worker(queue)
    job = worker.fetch()
    assert job is not None
    assert finish(queue, job.id, job.token, fetch_next=1) == 0  # nothing left to take
    assert queue.client.llen(queue.keys.active) == 0


def snapshot(queue: Queue) -> dict:
    c, k = queue.client, queue.keys
    return {
        "wait": c.lrange(k.wait, 0, -1),
        "active": c.lrange(k.active, 0, -1),
        "completed": sorted(c.zrange(k.completed, 0, -1)),  # ties in ms sort by id text
        "atm": [c.hget(k.job(str(i)), "atm") for i in range(1, 11)],
        "ats": [c.hget(k.job(str(i)), "ats") for i in range(1, 11)],
    }


def test_both_strategies_leave_the_queue_in_the_same_state(client, protocol_name: str):
    states = []
    for strategy in ("fused", "two_call"):
        queue = Queue.open(client, f"same-{strategy}-{time.time_ns()}", protocol=protocol_name)
        try:
            producer = Producer(queue)
            for _ in range(10):
                producer.add()
            before = client.round_trips
            assert Worker(queue, strategy).run(max_jobs=10) == 10
            trips = client.round_trips - before
            states.append((snapshot(queue), trips))
        finally:
            queue.delete()
    (fused_state, fused_trips), (two_state, two_trips) = states
    assert fused_state == two_state
    assert len(fused_state["completed"]) == 10 and fused_state["active"] == []
    assert fused_trips == 11  # the first fetch, then one fused call per job
    assert two_trips == 20  # the first fetch, then finish + fetch a job (no fetch after the last)


@pytest.mark.parametrize(
    ("case", "expected"),
    [("wrong_token", -6), ("lock_missing", -2), ("not_active", -3), ("job_missing", -1)],
)
def test_finish_failed_checks_return_their_code_and_change_nothing(queue: Queue, case: str, expected: int):
    Producer(queue).add()
    job = Worker(queue).fetch()
    assert job is not None
    c, k = queue.client, queue.keys
    token = job.token
    if case == "wrong_token":
        token = "someone-else"
    elif case == "lock_missing":
        c.delete(k.lock(job.id))
    elif case == "not_active":
        c.lrem(k.active, 0, job.id)
    elif case == "job_missing":
        c.delete(k.job(job.id))
    before = {key: c.dump(key) for key in queue.key_names() if not key.endswith(":events")}
    assert finish(queue, job.id, token, fetch_next=1) == expected
    after = {key: c.dump(key) for key in queue.key_names() if not key.endswith(":events")}
    assert after == before
    assert c.xlen(k.events) == 2  # added, active: no finish event


def test_token_zero_skips_the_lock_check(queue: Queue):
    Producer(queue).add()
    job = Worker(queue).fetch()
    assert job is not None
    queue.client.delete(queue.keys.lock(job.id))
    assert finish(queue, job.id, "0") == 0
    assert ids(queue.client.zrange(queue.keys.completed, 0, -1)) == [job.id]


@pytest.mark.parametrize("keep", [0, 2])
def test_keep_removes_old_finished_jobs(queue: Queue, keep: int):
    producer = Producer(queue)
    for _ in range(4):
        producer.add()
    worker = Worker(queue, options=WorkerOptions(keep=keep))
    assert worker.run(max_jobs=4) == 4
    c, k = queue.client, queue.keys
    kept = ids(c.zrange(k.completed, 0, -1))
    assert kept == ["3", "4"][:keep]
    for job_id in ("1", "2", "3", "4"):
        assert bool(c.exists(k.job(job_id))) == (job_id in kept)


def test_metrics_count_finished_jobs(queue: Queue):
    producer = Producer(queue)
    for _ in range(3):
        producer.add()
    assert Worker(queue, options=WorkerOptions(metrics_minutes=60)).run(max_jobs=3) == 3
    assert queue.client.hget(queue.keys.metrics("completed"), "count") == b"3"


def test_failed_target_records_the_reason(queue: Queue):
    Producer(queue).add()
    worker = Worker(queue)
    job = worker.fetch()
    assert job is not None
    assert worker.finish(job, fetch_next=False, failed=True, value="boom").code == 0
    assert ids(queue.client.zrange(queue.keys.failed, 0, -1)) == [job.id]
    assert queue.client.hget(queue.keys.job(job.id), "failedReason") == b"boom"


def test_paused_queue_holds_jobs_and_hands_out_nothing(queue: Queue):
    queue.pause()
    Producer(queue).add()
    c, k = queue.client, queue.keys
    assert ids(c.lrange(k.paused, 0, -1)) == ["1"] and c.llen(k.wait) == 0
    assert c.zcard(k.marker) == 0
    reply = queue.scripts.move_to_active(k.move_to_active_keys(), [k.prefix, now_ms(), "t", 1000, 0, 0])
    assert reply == [0, 0, 0, 0]


def test_delayed_job_waits_until_due_then_is_promoted(queue: Queue):
    Producer(queue).add(delay_ms=200)
    c, k = queue.client, queue.keys
    assert c.zcard(k.delayed) == 1 and c.llen(k.wait) == 0
    ts = now_ms()
    reply = queue.scripts.move_to_active(k.move_to_active_keys(), [k.prefix, ts, "t", 1000, 0, 0])
    assert reply[:3] == [0, 0, 0] and reply[3] >= ts  # the next due time
    later = now_ms() + 1000  # a client clock past the due time
    reply = queue.scripts.move_to_active(k.move_to_active_keys(), [k.prefix, later, "t", 1000, 0, 0])
    assert reply[1] == b"1" and c.zcard(k.delayed) == 0


def test_prioritized_jobs_come_lowest_priority_first_after_wait(queue: Queue):
    producer = Producer(queue)
    producer.add(priority=5)
    producer.add(priority=1)
    producer.add(priority=5)
    producer.add()  # plain wait is taken before prioritized
    worker = Worker(queue)
    order = []
    while (job := worker.fetch()) is not None:
        order.append(job.id)
    assert order == ["4", "2", "1", "3"]


def test_rate_limiter_stops_fetches_at_its_max(queue: Queue):
    producer = Producer(queue)
    for _ in range(3):
        producer.add()
    k = queue.keys
    args = [k.prefix, now_ms(), "t", 1000, 2, 10_000]
    first = queue.scripts.move_to_active(k.move_to_active_keys(), args)
    second = queue.scripts.move_to_active(k.move_to_active_keys(), args)
    third = queue.scripts.move_to_active(k.move_to_active_keys(), args)
    assert first[1] == b"1" and second[1] == b"2"
    assert third[0] == 0 and third[1] == 0 and 0 < third[2] <= 10_000
    assert queue.client.llen(k.wait) == 1


def test_extend_lock_renews_only_the_holders_lock(queue: Queue):
    Producer(queue).add()
    worker = Worker(queue, options=WorkerOptions(lock_ms=500))
    job = worker.fetch()
    assert job is not None
    c, k = queue.client, queue.keys
    c.sadd(k.stalled, job.id)
    assert not worker.extend_lock(Job(job.id, job.fields, "wrong"))
    assert c.sismember(k.stalled, job.id)
    worker.options.lock_ms = 60_000
    assert worker.extend_lock(job)
    assert c.pttl(k.lock(job.id)) > 500
    assert not c.sismember(k.stalled, job.id)


def test_script_flush_costs_one_reload_not_an_error(queue: Queue):
    producer = Producer(queue)
    producer.add()
    queue.client.script_flush()
    before = queue.client.round_trips
    producer.add()
    assert queue.client.round_trips - before == 3  # EVALSHA (NOSCRIPT), SCRIPT LOAD, EVALSHA
    assert queue.client.llen(queue.keys.wait) == 2


def test_batch_add_is_one_round_trip(queue: Queue):
    before = queue.client.round_trips
    added = Producer(queue).add_batch(25, payload_bytes=10)
    assert queue.client.round_trips - before == 1
    assert len(set(added)) == 25 and queue.client.llen(queue.keys.wait) == 25


def test_batch_fetch_is_one_round_trip_and_locks_each_job_under_its_own_token(queue: Queue):
    added = Producer(queue).add_batch(5)
    worker = Worker(queue, options=WorkerOptions(lock_ms=20_000))
    before = queue.client.round_trips
    jobs = worker.fetch_batch(7)  # two more than wait holds
    assert queue.client.round_trips - before == 1
    assert [j.id for j in jobs] == added  # oldest first, as single fetches take them
    assert len({j.token for j in jobs}) == 5
    for job in jobs:
        assert queue.client.get(queue.keys.lock(job.id)).decode() == job.token
        assert 0 < queue.client.pttl(queue.keys.lock(job.id)) <= 20_000
        assert job.fields["ats"] == "1"
    assert ids(queue.client.lrange(queue.keys.active, 0, -1)) == list(reversed(added))
    assert queue.client.llen(queue.keys.wait) == 0
    assert worker.fetch_batch(3) == [] and worker.fetch_batch(0) == []


def test_idle_worker_blocks_on_the_marker_and_wakes_on_add(queue: Queue, settings):
    waiter_client = settings.connect()
    try:
        worker = Worker(queue.with_client(waiter_client))
        assert worker.wait_for_work(0.05) is False
        Producer(queue).add()
        assert worker.wait_for_work(1.0) is True
        assert worker.fetch() is not None
    finally:
        waiter_client.close()


def test_queue_names_that_break_the_hash_tag_are_refused():
    from bench.errors import BenchError

    for bad in ("a{b}", "x*", "", "a b"):
        with pytest.raises(BenchError):
            QueueKeys(bad)
