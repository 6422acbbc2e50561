"""The protocol interface: every step a Producer, Worker or Sweeper takes is built by the queue's protocol."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from bench.errors import BenchError
from bench.protocol.base import PROTOCOLS, STEPS, EchoMQ, ScriptCall, protocol_named
from bench.protocol.connection import Client
from bench.protocol.queue import Producer, Queue, Worker
from bench.protocol.sweep import make_sweeper

pytestmark = pytest.mark.protocol


class Recording(EchoMQ):
    """EchoMQ that notes each step it is asked to build."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def _noted(self, call: ScriptCall) -> ScriptCall:
        self.built.append(call.script)
        return call

    def add_job(self, keys: Any, **kw: Any) -> ScriptCall:
        return self._noted(super().add_job(keys, **kw))

    def move_to_active(self, keys: Any, **kw: Any) -> ScriptCall:
        return self._noted(super().move_to_active(keys, **kw))

    def move_to_finished(self, keys: Any, job: Any, **kw: Any) -> ScriptCall:
        return self._noted(super().move_to_finished(keys, job, **kw))

    def extend_lock(self, keys: Any, job: Any, **kw: Any) -> ScriptCall:
        return self._noted(super().extend_lock(keys, job, **kw))

    def sweep(self, keys: Any, **kw: Any) -> ScriptCall:
        return self._noted(super().sweep(keys, **kw))


def test_an_unknown_protocol_is_a_one_line_error() -> None:
    with pytest.raises(BenchError, match="unknown protocol 'nope'; use one of echomq"):
        protocol_named("nope")
    assert "echomq" in PROTOCOLS


def test_producer_worker_and_sweeper_build_every_call_through_the_protocol(client: Client) -> None:
    proto = Recording()
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=proto)
    try:
        producer = Producer(queue)
        producer.add()
        producer.add_batch(3)
        fused, two_call = Worker(queue, "fused"), Worker(queue, "two_call")
        job = fused.fetch()
        assert job is not None and fused.extend_lock(job)
        job = fused.complete_and_next(job)  # fused: moveToFinished with fetch next
        assert job is not None
        job = two_call.complete_and_next(job)  # moveToFinished, then moveToActive
        assert job is not None and len(two_call.fetch_batch(2)) == 1
        make_sweeper("atomic", queue).sweep()
        assert set(proto.built) == set(STEPS)
        assert proto.built.count("add_job") == 4 and proto.built.count("move_to_active") == 4
        assert proto.built.count("move_to_finished") == 2
    finally:
        queue.delete()
