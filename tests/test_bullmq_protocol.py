"""The bullmq protocol: BullMQ's own scripts and builders, leaving the state BullMQ's own client leaves."""

from __future__ import annotations

import asyncio
import hashlib
import tomllib
import uuid
from collections import Counter
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import bullmq
import pytest
from bullmq.redis_connection import RedisConnection
from bullmq.scripts import Scripts
from redis.crc import key_slot

from bench.errors import BenchError
from bench.paths import LUA_DIR, REPO
from bench.protocol.audit import audit, server_run_id
from bench.protocol.base import protocol_named
from bench.protocol.bullmq_package import REQUIRED_VERSION, require_bullmq
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions
from bench.protocol.sweep import make_sweeper
from bench.stages.race.count import count_anomalies, read_state
from bench.stages.race.plan import Point
from bench.stages.race.trial import run_trial, stall_jobs
from tests.helpers import race_anomalies

pytestmark = pytest.mark.protocol

# Fields every job hash carries whose values are times (or the lock token): compared by presence.
TIMES = {"timestamp", "processedOn", "finishedOn"}


@pytest.fixture
def bull(client: Client) -> Iterator[Queue]:
    q = Queue.open(client, f"b-{uuid.uuid4().hex[:10]}", protocol="bullmq")
    yield q
    q.delete()


def state(
    queue: Queue, ignore: tuple[str, ...] = ("marker", "events"), masked: frozenset[str] = frozenset(TIMES)
) -> dict[str, Any]:
    """Every key of the queue and its value, times masked; BullMQ's marker and events left out
    (the marker is popped by an idle Worker, the events stream holds ids and times)."""
    c = queue.client
    found: dict[str, Any] = {}
    for key in sorted(queue.key_names()):
        suffix = key.removeprefix(queue.keys.prefix)
        if suffix in ignore:
            continue
        kind = c.type(key).decode()
        if kind == "hash":
            raw = {k.decode(): v.decode() for k, v in c.hgetall(key).items()}
            found[suffix] = {k: ("<masked>" if k in masked else v) for k, v in raw.items()}
        elif kind == "list":
            found[suffix] = [v.decode() for v in c.lrange(key, 0, -1)]
        elif kind == "set":
            found[suffix] = sorted(v.decode() for v in c.smembers(key))
        elif kind == "zset":
            found[suffix] = [m.decode() for m in c.zrange(key, 0, -1)]
        else:
            found[suffix] = kind
    return found


def test_the_scripts_come_from_the_installed_package_and_none_is_copied(bull: Queue):
    commands = Path(bullmq.__file__).parent / "commands"
    files = protocol_named("bullmq").script_files()
    for step, sha in bull.scripts.shas().items():
        assert sha == hashlib.sha1((commands / files[step]).read_bytes()).hexdigest()
    ours = {hashlib.sha1(p.read_bytes()).hexdigest() for p in LUA_DIR.rglob("*.lua")}
    assert not ours & set(bull.scripts.shas().values())
    assert bull.keys.prefix.startswith("bull:{") and files["move_to_finished"] == "moveToFinished-14.lua"


def test_the_package_is_pinned_to_the_version_the_protocol_checks():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert f"bullmq=={REQUIRED_VERSION}" in project["dependencies"]
    assert require_bullmq() == REQUIRED_VERSION == bullmq.__version__


@pytest.mark.parametrize("found", ["3.5.0", None])
def test_a_missing_or_different_bullmq_is_one_line_naming_the_version(monkeypatch: pytest.MonkeyPatch, found):
    def version(name: str) -> str:
        if found is None:
            raise metadata.PackageNotFoundError(name)
        return found

    monkeypatch.setattr(metadata, "version", version)
    with pytest.raises(BenchError) as caught:
        require_bullmq()
    message = str(caught.value)
    assert "\n" not in message and f"bullmq {REQUIRED_VERSION}" in message
    assert (found or "not installed") in message


def test_every_key_of_a_bullmq_queue_is_in_one_cluster_slot(bull: Queue):
    Producer(bull).add_batch(3)
    worker = Worker(bull, "fused")
    job = worker.fetch()
    assert job is not None
    worker.complete_and_next(job)
    make_sweeper("atomic", bull).sweep()
    names = list(bull.key_names())
    assert len(names) > 10 and all(n.startswith(f"bull:{{{bull.keys.name}}}:") for n in names)
    assert len({key_slot(n.encode()) for n in names}) == 1


def test_fetch_arguments_are_those_of_bullmqs_own_async_move_to_active(bull: Queue):
    sent: list[tuple[list[str], list[Any]]] = []

    async def move_to_active(keys: Any = None, args: Any = None, client: Any = None) -> list[int]:
        sent.append((keys, args))
        return [0, 0, 0, 0]

    scripts = Scripts(
        "bull", bull.keys.tag, SimpleNamespace(conn=None, commands={"moveToActive": move_to_active})
    )
    asyncio.run(scripts.moveToActive("tok-1", {"lockDuration": 30000}))
    ours = bull.protocol.move_to_active(bull.keys, token="tok-1", options=WorkerOptions(), now_ms=1)
    [(keys, args)] = sent
    assert ours.keys == keys
    assert ours.args[0] == args[0] and ours.args[2] == args[2]  # args[1] is the time


async def _bullmq_handles_one_job(url: str, name: str, data: dict[str, Any]) -> None:
    """BullMQ's own Queue.add and Worker (its default options) complete one job."""
    queue = bullmq.Queue(name, {"connection": url})
    await queue.add("bench", data)
    done = asyncio.Event()

    async def process(job: Any, token: str) -> str:
        return "ok"

    worker = bullmq.Worker(name, process, {"connection": url})
    worker.on("completed", lambda job, result: done.set())
    await asyncio.wait_for(done.wait(), 20)
    await worker.close()
    await queue.close()


@pytest.mark.parametrize("strategy", ["fused", "two_call"])
def test_a_job_added_and_finished_by_the_suite_leaves_what_bullmqs_own_client_leaves(
    client: Client, settings: RedisSettings, strategy: str
):
    ours = Queue.open(client, f"ours-{uuid.uuid4().hex[:8]}", protocol="bullmq")
    theirs = Queue.open(client, f"theirs-{uuid.uuid4().hex[:8]}", protocol="bullmq")
    try:
        data = {"t_us": 1, "pad": ""}
        Producer(ours).add('{"t_us": 1, "pad": ""}')
        Producer(ours).add('{"t_us": 2, "pad": ""}')  # a second, so fused has a next job to take
        worker = Worker(ours, strategy)
        job = worker.fetch()
        assert job is not None
        following = worker.complete_and_next(job)
        assert following is not None and following.id == "2"
        worker.complete_and_next(following, want_next=False)
        asyncio.run(_bullmq_handles_one_job(settings.url, theirs.keys.tag, data))
        asyncio.run(_bullmq_handles_one_job(settings.url, theirs.keys.tag, {**data, "t_us": 2}))
        mine, bulls = state(ours), state(theirs)
        assert mine == bulls
        assert (
            mine["1"]["returnvalue"] == '"ok"' and mine["1"]["atm"] == "1" and mine["completed"] == ["1", "2"]
        )
        assert "wait" not in mine and "active" not in mine and "1:lock" not in mine
    finally:
        ours.delete()
        theirs.delete()


def test_a_stalled_job_swept_by_the_suite_leaves_what_bullmqs_own_sweep_leaves(
    client: Client, settings: RedisSettings
):
    queues = [Queue.open(client, f"sw-{uuid.uuid4().hex[:8]}", protocol="bullmq") for _ in range(2)]
    try:
        for queue in queues:
            stall_jobs(queue, 3)  # in active, their 1 ms locks gone
        ours, theirs = queues
        sweeper = make_sweeper("atomic", ours)
        assert sweeper.sweep().moved == []  # the marking pass
        assert sorted(sweeper.sweep().moved) == ["1", "2", "3"]  # the throttle key was cleared first

        async def bullmq_sweeps_twice() -> list[Any]:
            connection = RedisConnection(settings.url)
            scripts = Scripts("bull", theirs.keys.tag, connection)
            first = await scripts.moveStalledJobsToWait(1, 30000)
            await connection.conn.delete(theirs.keys.stalled_check)
            second = await scripts.moveStalledJobsToWait(1, 30000)
            await connection.close()
            return [first, second]

        first, second = asyncio.run(bullmq_sweeps_twice())
        assert first == [] and sorted(second) == ["1", "2", "3"]
        masked = frozenset({*TIMES, "data"})  # the jobs' data hold their enqueue times
        mine = state(ours, ignore=("marker", "events", "stalled-check"), masked=masked)
        bulls = state(theirs, masked=masked)
        bulls.pop("stalled-check")
        assert mine == bulls and mine["1"]["stc"] == "1" and sorted(mine["wait"]) == ["1", "2", "3"]
    finally:
        for queue in queues:
            queue.delete()


def test_a_sweep_past_max_stalled_marks_the_job_and_the_worker_fails_it(bull: Queue):
    [job_id] = stall_jobs(bull, 1)
    sweeper = make_sweeper("atomic", bull, max_stalled=0)
    sweeper.sweep()
    assert sweeper.sweep().moved == [job_id]  # BullMQ sends it to wait, marked, not to failed
    job = Worker(bull).fetch()
    assert (
        job is not None
        and bull.protocol.deferred_failure(job.fields) == "job stalled more than allowable limit"
    )


def test_a_sweep_that_is_not_bullmqs_is_refused_in_one_line(bull: Queue):
    with pytest.raises(
        BenchError, match=r"^sweep variant 'app_side' is not a bullmq sweep; bullmq has atomic$"
    ):
        make_sweeper("app_side", bull)


def test_the_audit_reads_bullmqs_layout(bull: Queue):
    produced = Producer(bull).add_batch(10)
    Worker(bull, "two_call").run(max_jobs=6)
    result = audit(bull, produced, server_run_id(bull))
    assert result.ok, result.verdict
    assert result.counts == {"wait": 4, "active": 0, "completed": 6, "failed": 0}
    bull.client.rpush(bull.keys.wait, produced[0])  # finished and back in wait: found
    assert audit(bull, produced).duplicated == [produced[0]]


def test_the_race_counters_read_stalls_in_stc_and_finishes_in_atm(bull: Queue):
    produced = Producer(bull).add_batch(3)
    c, k = bull.client, bull.keys
    c.delete(k.wait)
    c.rpush(k.wait, "1", "2")
    c.zadd(k.completed, {"3": 1})
    c.hset(k.job("1"), mapping={"stc": 1})  # reclaimed once, counted
    c.hset(k.job("2"), mapping={"stc": 1})  # reclaimed twice, one stall lost
    c.hset(k.job("3"), mapping={"stc": 1, "atm": 0})  # reclaimed, then a finish that wrote no atm
    found = count_anomalies(
        read_state(bull, produced),
        audit(bull, produced),
        Counter({"1": 1, "2": 2, "3": 1}),
        Counter({"3": 1}),
    )
    assert found.lost_attempt_updates == 2 and found.double_recoveries == 1


@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "workers"])
def test_bullmqs_sweep_with_8_sweepers_shows_no_anomaly(settings: RedisSettings, workers: int):
    setting = Point(
        "atomic",
        sweepers=8,
        stalled_jobs=100,
        delay_ms=0.0,
        workers=workers,
        deadline_s=20,
        protocol="bullmq",
    )
    for found in [run_trial(settings, setting) for _ in range(2)]:
        assert (found.errors, found.unrecovered, found.reclaimed) == (0, 0, 100)
        assert found.finished == (100 if workers else 0)
        assert race_anomalies(found) == (0, 0, 0, 0)
