"""The audit against hand-built queue states whose right answer is known."""

import pytest

from bench.protocol.audit import audit, server_run_id
from bench.protocol.queue import Producer, Queue, Worker
from tests.helpers import PROTOCOL_NAMES

pytestmark = pytest.mark.protocol


@pytest.fixture(params=PROTOCOL_NAMES)
def protocol_name(request: pytest.FixtureRequest) -> str:
    """Every test that takes ``queue`` runs against each protocol of PROTOCOL_NAMES."""
    return str(request.param)


def test_a_clean_run_passes(queue: Queue):
    produced = Producer(queue).add_batch(10)
    Worker(queue).run(max_jobs=6)
    result = audit(queue, produced, server_run_id(queue))
    assert result.ok, result.verdict
    assert result.counts == {"wait": 4, "active": 0, "completed": 6, "failed": 0}


def test_missing_duplicated_and_unknown_ids_are_found(queue: Queue):
    produced = Producer(queue).add_batch(3)  # ids 1, 2, 3 in wait
    c, k = queue.client, queue.keys
    c.lrem(k.wait, 0, "1")  # lost
    c.zadd(k.completed, {"2": 1})  # in wait and completed
    c.rpush(k.wait, "3")  # twice in wait
    c.rpush(k.active, "99")  # never produced
    result = audit(queue, produced)
    assert not result.ok
    assert result.missing == ["1"] and result.duplicated == ["2", "3"] and result.unknown == ["99"]


def test_a_restarted_server_is_reported_as_such(queue: Queue):
    produced = Producer(queue).add_batch(2)
    result = audit(queue, produced, expected_run_id="not-this-server")
    assert result.server_restarted and not result.ok and "restarted" in result.verdict
