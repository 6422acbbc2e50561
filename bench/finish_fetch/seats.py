"""Which of a run's queues a user takes: seats counted on the server, a counter a role, so the
users of every Locust process (on any machine) spread over the queues evenly. No Locust import."""

from __future__ import annotations

from collections.abc import Sequence

from bench.protocol.queue import Queue

SEATS = "seats"  # a hash under the first queue's prefix: deleted with that queue
QUEUE_JOBS = "jobs@"  # a counter a queue: jobs@<name>


def seated(first: Queue, names: Sequence[str], role: str) -> str:
    """The queue name of the next ``role`` user: the n-th of that role takes names[n mod len]."""
    if len(names) == 1:
        return names[0]
    seat = int(first.client.hincrby(first.keys.key(SEATS), role, 1)) - 1
    return names[seat % len(names)]


def for_queue(name: str) -> str:
    """The counter of jobs finished on queue ``name`` (the summary's per-queue figures)."""
    return QUEUE_JOBS + name
