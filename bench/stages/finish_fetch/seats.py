"""Which of a run's queues a user takes: seats counted on the server, a counter a role, so the
users of every Locust process (on any machine) spread over the queues evenly. No Locust import."""

from __future__ import annotations

from collections.abc import Sequence

from bench.protocol.queue import Queue

SEATS = "seats"  # a hash under the first queue's prefix: deleted with that queue
QUEUE_JOBS = "jobs@"  # a counter a queue: jobs@<name>
STARTED = "started"  # the seats hash's field: users whose start (connect, SCRIPT LOAD, seat) is done


def seated(first: Queue, names: Sequence[str], role: str) -> str:
    """The queue name of the next ``role`` user: the n-th of that role takes names[n mod len]."""
    if len(names) == 1:
        return names[0]
    seat = int(first.client.hincrby(first.keys.key(SEATS), role, 1)) - 1
    return names[seat % len(names)]


def for_queue(name: str) -> str:
    """The counter of jobs finished on queue ``name`` (the summary's per-queue figures)."""
    return QUEUE_JOBS + name


def mark_started(first: Queue) -> None:
    """Count a user whose start is done, on the server: every Locust process's users add to it."""
    first.client.hincrby(first.keys.key(SEATS), STARTED, 1)


def started(first: Queue) -> int:
    """Users of the run whose start is done, in every Locust process."""
    return int(first.client.hget(first.keys.key(SEATS), STARTED) or 0)


def reset_started(first: Queue) -> None:
    """A new test (the web UI's second start) counts its users afresh."""
    first.client.hdel(first.keys.key(SEATS), STARTED)
