"""The bullmq protocol's calls built from templates: byte for byte what the package's builders give.

Each test builds calls both ways: the package's builder per call (``package_*``, BullMQ's own
Scripts methods), and the protocol's step (a template, patched per call), at the same clock
reading, and compares the bytes redis-py would send."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgpack
import pytest
from redis.connection import Connection

from bench.errors import BenchError
from bench.protocol import bullmq as bullmq_protocol
from bench.protocol.base import ScriptCall
from bench.protocol.bullmq import FINISH_JOB_FIELDS, BullMQ
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Job, Producer, Queue, Worker, WorkerOptions, job_payload
from bench.protocol.template import derive
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.reference import run_reference
from bench.stages.finish_fetch.trial_settings import TrialSettings

pytestmark = pytest.mark.protocol

CALLS = 300  # calls a shape is built both ways
# Every worker option set the suite uses (a BullMQ Worker's defaults), and ones that enter the
# packed options differently: a lock, each keep, metrics, a limiter.
OPTION_SETS = {
    "defaults": WorkerOptions(),
    "lock-5s": WorkerOptions(lock_ms=5_000),
    "keep-none": WorkerOptions(keep=0),
    "keep-100": WorkerOptions(keep=100),
    "metrics": WorkerOptions(metrics_minutes=60),
    "limiter": WorkerOptions(limiter_max=10, limiter_ms=1_000),
}
SHA = "0" * 40
WIRE = Connection()  # packs commands only; never connects


def wire(call: ScriptCall) -> bytes:
    """The bytes redis-py sends for the call, as the suite's pipelines send it."""
    return b"".join(WIRE.pack_command("EVALSHA", SHA, len(call.keys), *call.keys, *call.args))


class Clock:
    """time.time, set by the test: the package's builders and the templates read the same instant."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1_764_000_000.0
        monkeypatch.setattr(time, "time", lambda: self.now)

    @property
    def ms(self) -> int:
        """The instant in ms as the package's builders stamp it (rounded): the suite's now_ms."""
        return round(self.now * 1000)

    def tick(self, i: int) -> None:
        self.now = 1_764_000_000.0 + i * 0.0007391  # ms that round up and down, and cross a second


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture
def bull(client: Client) -> Iterator[Queue]:
    q = Queue.open(client, f"bt-{uuid.uuid4().hex[:10]}", protocol=BullMQ())  # templates of its own
    yield q
    q.delete()


def custom_id(i: int) -> str:
    return f"job-{i}-" + "x" * (i % 40)  # lengths either side of msgpack's 31-byte fixstr


def fetched_jobs(queue: Queue, count: int) -> list[Job]:
    """``count`` jobs added as the suite adds them (batches, and some with ids of their own),
    fetched as the suite fetches them: real job hashes, each under its own token."""
    producer = Producer(queue)
    for start in range(0, count - 10, 50):
        producer.add_batch(min(50, count - 10 - start), payload_bytes=start)
    for i in range(10):
        producer.add(job_payload(i), job_id=custom_id(i))
    worker = Worker(queue, "fused")
    worker.worker_id = "w" * 30  # tokens past 31 bytes as their count grows
    jobs = worker.fetch_batch(count)
    assert len(jobs) == count
    return jobs


def same_bytes(
    clock: Clock, calls: int, ours: Callable[[int], ScriptCall], package: Callable[[int], ScriptCall]
) -> None:
    for i in range(calls):
        clock.tick(i)
        mine, theirs = ours(i), package(i)
        assert mine.script == theirs.script
        assert wire(mine) == wire(theirs), (i, mine, theirs)


@pytest.mark.parametrize("with_id", [False, True], ids=["own-ids", "custom-ids"])
def test_adds_from_the_template_are_the_packages_byte_for_byte(bull: Queue, clock: Clock, with_id: bool):
    proto = bull.protocol
    assert isinstance(proto, BullMQ)

    def data(i: int) -> str:
        return job_payload(i % 7 * 40, enqueued_us=1_764_000_000_000_000 + i // 5)  # a batch of 5 shares one

    def ours(i: int) -> ScriptCall:
        job_id = custom_id(i) if with_id else ""
        return proto.add_job(
            bull.keys, name="bench", data=data(i), job_id=job_id, priority=0, delay_ms=0, now_ms=clock.ms
        )

    def package(i: int) -> ScriptCall:
        return proto.package_add_job(
            bull.keys, name="bench", data=data(i), job_id=custom_id(i) if with_id else ""
        )

    same_bytes(clock, CALLS, ours, package)


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_fetches_from_the_template_are_the_packages_byte_for_byte(
    bull: Queue, clock: Clock, options: WorkerOptions
):
    proto = bull.protocol
    assert isinstance(proto, BullMQ)

    def token(i: int) -> str:
        return f"{'w' * (i % 30)}:{i}"

    def ours(i: int) -> ScriptCall:
        return proto.move_to_active(bull.keys, token=token(i), options=options, now_ms=1_764_000_000_000 + i)

    def package(i: int) -> ScriptCall:
        return proto.package_move_to_active(
            bull.keys, token=token(i), options=options, now_ms=1_764_000_000_000 + i
        )

    same_bytes(clock, CALLS, ours, package)


SHAPES = {
    f"{'failed' if failed else 'completed'}-{'fetch' if fetch_next else 'alone'}": (failed, fetch_next)
    for failed in (False, True)
    for fetch_next in (True, False)
}


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
@pytest.mark.parametrize(("failed", "fetch_next"), SHAPES.values(), ids=SHAPES.keys())
def test_finishes_from_the_template_are_the_packages_byte_for_byte(
    bull: Queue, clock: Clock, options: WorkerOptions, failed: bool, fetch_next: bool
):
    """Every finish shape (completed or failed, fetch next or not) of real fetched jobs."""
    proto = bull.protocol
    assert isinstance(proto, BullMQ)
    jobs = fetched_jobs(bull, CALLS)
    value = "job stalled more than allowable limit" if failed else "ok"

    def ours(i: int) -> ScriptCall:
        return proto.move_to_finished(
            bull.keys,
            jobs[i],
            fetch_next=fetch_next,
            failed=failed,
            value=value,
            options=options,
            now_ms=clock.ms,
        )

    def package(i: int) -> ScriptCall:
        return proto.package_move_to_finished(
            bull.keys, jobs[i], fetch_next=fetch_next, failed=failed, value=value, options=options
        )

    same_bytes(clock, CALLS, ours, package)


def varied(job: Job, i: int) -> Job:
    """The job with the fields the finish builder reads changed, and ones it does not."""
    fields = dict(job.fields)
    opts = json.loads(fields["opts"])
    if i % 3 == 1:
        opts["attempts"] = 3
    if i % 4 == 2:
        opts["fpof"] = True  # failParentOnFailure, as the package stores it
    fields["opts"] = json.dumps(opts)
    fields["atm"] = str(i % 5)
    fields["stc"] = str(i % 2)
    fields["processedOn"] = str(1_764_000_000_000 + i)
    return dataclasses.replace(job, fields=fields)


def test_finishes_of_jobs_whose_fields_differ_are_the_packages_byte_for_byte(bull: Queue, clock: Clock):
    proto = bull.protocol
    assert isinstance(proto, BullMQ)
    jobs = [varied(job, i) for i, job in enumerate(fetched_jobs(bull, 60))]
    assert len({tuple(job.fields.get(f) for f in FINISH_JOB_FIELDS) for job in jobs}) > 10
    options = WorkerOptions()

    def ours(i: int) -> ScriptCall:
        return proto.move_to_finished(
            bull.keys, jobs[i], fetch_next=True, failed=False, value="ok", options=options, now_ms=clock.ms
        )

    def package(i: int) -> ScriptCall:
        return proto.package_move_to_finished(
            bull.keys, jobs[i], fetch_next=True, failed=False, value="ok", options=options
        )

    same_bytes(clock, len(jobs), ours, package)


def test_a_changed_option_builds_another_template_never_a_stale_one(bull: Queue, clock: Clock):
    proto = bull.protocol
    assert isinstance(proto, BullMQ)
    [job] = fetched_jobs(bull, 11)[:1]
    options = WorkerOptions()  # one object, changed in place as a caller may change it
    sent: list[bytes] = []
    for change in [{}, {"lock_ms": 5_000}, {"keep": 10}, {"limiter_max": 5, "limiter_ms": 100}]:
        for name, value in change.items():
            setattr(options, name, value)
        finish = proto.move_to_finished(
            bull.keys, job, fetch_next=True, failed=False, value="ok", options=options, now_ms=clock.ms
        )
        fetch = proto.move_to_active(bull.keys, token=job.token, options=options, now_ms=1)
        assert wire(finish) == wire(
            proto.package_move_to_finished(
                bull.keys, job, fetch_next=True, failed=False, value="ok", options=options
            )
        )
        assert wire(fetch) == wire(
            proto.package_move_to_active(bull.keys, token=job.token, options=options, now_ms=1)
        )
        sent.append(wire(finish) + wire(fetch))
    assert len(set(sent)) == len(sent)  # each change reached the bytes
    lock = msgpack.unpackb(proto.move_to_active(bull.keys, token="t", options=options, now_ms=1).args[2])
    assert lock["lockDuration"] == 5_000 and lock["limiter"] == {"max": 5, "duration": 100}


def test_the_templates_kept_stay_bounded_whatever_the_values(
    bull: Queue, clock: Clock, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(bullmq_protocol, "TEMPLATES_MAX", 8)
    proto = bull.protocol
    assert isinstance(proto, BullMQ)
    [job] = fetched_jobs(bull, 11)[:1]
    options = WorkerOptions()
    for i in range(30):  # a failed reason of its own each: a template each
        value = f"reason {i}"
        ours = proto.move_to_finished(
            bull.keys, job, fetch_next=False, failed=True, value=value, options=options, now_ms=clock.ms
        )
        theirs = proto.package_move_to_finished(
            bull.keys, job, fetch_next=False, failed=True, value=value, options=options
        )
        assert wire(ours) == wire(theirs)
        assert 1 <= len(proto._templates) <= 8


def test_a_builder_whose_output_does_not_fit_a_template_is_refused():
    """A slot's value used other than as itself, inside a string or packed: the second build
    differs from the template filled with its sentinels."""

    def hidden(values: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        return ["q:" + values[0].upper()], [values[1]]

    with pytest.raises(BenchError, match="does not fit a template"):
        derive(hidden, ("id-a", 1), ("id-bb", 2), what="this builder")

    def packed(values: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        return ["q"], [msgpack.packb({"token": values[0], "n": len(values[0])})]

    with pytest.raises(BenchError, match="does not fit a template"):
        derive(packed, ("tok-a",), ("tok-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",))
    template = derive(lambda v: (["q"], [msgpack.packb({"token": v[0], "n": 1})]), ("tok-a",), ("t" * 40,))
    assert msgpack.unpackb(template.fill(("t" * 300,))[1][0]) == {"token": "t" * 300, "n": 1}


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fused", "two_call"])
def test_a_bullmq_run_from_templates_passes_the_audit(settings: RedisSettings, strategy: str):
    run = TrialSettings(
        strategy=strategy, workers=1, producers=1, batch_size=20, payload_bytes=20, target_rate=0.0,
        warmup_s=0.2, measure_s=0.6, rtt_ms=0.0, queue="", protocol="bullmq", concurrency=32,
    )  # fmt: skip
    raw = run_raw(settings, run)
    assert raw.audit is not None and raw.audit.ok, raw.audit
    assert raw.audit.counts is not None and raw.audit.counts["completed"] > 0
    reference = run_reference(settings, dataclasses.replace(run, measure_s=60.0), jobs=200)
    assert reference.jobs == 200 and reference.audit_ok, reference
