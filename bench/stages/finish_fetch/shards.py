"""Each queue's and each master's part of a run: jobs/s a queue, Redis µs a job a master, so a
hot shard shows. The masters' parts add up to the run's whole (commandstats read once a master).
No Locust import here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from bench.protocol.commandstats import CommandStats, client_side
from bench.stages.finish_fetch.seats import for_queue


def _per(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


class QueueFigures(TypedDict):
    """One queue's part of a trial."""

    master: str  # host:port of the master that holds the queue's slot
    jobs: int
    jobs_per_s: float | None


class MasterFigures(TypedDict):
    """One master's part of a trial."""

    queues: list[str]  # the queues whose slot it holds
    jobs: int
    jobs_per_s: float | None
    server_calls: float | None  # client-sent calls (commandstats)
    server_usec: float | None
    server_us_per_job: float | None


class Shards(TypedDict, total=False):
    """The summary's ``shards``: each queue's part and each master's, by name (JSON as written)."""

    queues: dict[str, QueueFigures]
    masters: dict[str, MasterFigures]


def shard_figures(
    counters: Mapping[str, int],
    home: Mapping[str, str],
    by_master: Mapping[str, CommandStats] | None,
    window_s: float,
) -> Shards:
    """The summary's ``shards``: ``queues`` {name: master, jobs, jobs/s} and ``masters``
    {host:port: its queues, jobs, jobs/s, client-sent calls and µs (commandstats), µs a job}."""
    queues: dict[str, QueueFigures] = {
        name: QueueFigures(
            master=master,
            jobs=int(counters.get(for_queue(name), 0)),
            jobs_per_s=_per(counters.get(for_queue(name), 0), window_s),
        )
        for name, master in sorted(home.items())
    }
    masters: dict[str, MasterFigures] = {}
    for master in sorted({*home.values(), *(by_master or {})}):
        mine = [name for name, q in queues.items() if q["master"] == master]
        jobs = sum(queues[name]["jobs"] for name in mine)
        side = client_side(by_master[master]) if by_master and master in by_master else None
        masters[master] = MasterFigures(
            queues=mine,
            jobs=jobs,
            jobs_per_s=_per(jobs, window_s),
            server_calls=side.total_calls if side else None,
            server_usec=side.total_usec if side else None,
            server_us_per_job=_per(side.total_usec, jobs) if side else None,
        )
    return Shards(queues=queues, masters=masters)
