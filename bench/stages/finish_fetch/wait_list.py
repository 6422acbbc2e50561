"""The wait list watched through a window: its length sampled now and then, so a backlog trial can
show it never ran dry (a fused fetch-next found a job every time). Locust and the raw loops use it: a
greenlet of Locust's controller, a thread of the raw driver. No Locust or gevent import here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.protocol.queue import Queue

SAMPLE_EVERY_S = 0.01  # often enough to catch a dry spell of a few ms; one LLEN a queue each time


@dataclass
class WaitSamples:
    """The window's samples of the wait list's length (over the run's queues, added)."""

    samples: int = 0
    empty: int = 0  # samples that found it empty
    least: int | None = None  # the shortest it was found
    calls: int = 0  # LLEN calls the samples sent: not the load's, taken off its commands a job

    def add(self, length: int, calls: int = 1) -> None:
        self.samples += 1
        self.calls += calls
        self.empty += length == 0
        self.least = length if self.least is None else min(self.least, length)


def wait_length(queues: Sequence[Queue]) -> int:
    """The jobs waiting now, over the run's queues (one LLEN each, on each queue's own client)."""
    return sum(int(q.client.llen(q.keys.wait)) for q in queues)
