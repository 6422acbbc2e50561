"""Each queue's and each master's part of a run: jobs/s a queue, Redis µs a job a master, so a
hot shard shows. The masters' parts add up to the run's whole (commandstats read once a master).
No Locust import here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.protocol.commandstats import CommandStats, client_side
from bench.stages.finish_fetch.seats import for_queue


def _per(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def shard_figures(
    counters: Mapping[str, int],
    home: Mapping[str, str],
    by_master: Mapping[str, CommandStats] | None,
    window_s: float,
) -> dict[str, Any]:
    """The summary's ``shards``: ``queues`` {name: master, jobs, jobs/s} and ``masters``
    {host:port: its queues, jobs, jobs/s, client-sent calls and µs (commandstats), µs a job}."""
    queues: dict[str, dict[str, Any]] = {
        name: {
            "master": master,
            "jobs": int(counters.get(for_queue(name), 0)),
            "jobs_per_s": _per(counters.get(for_queue(name), 0), window_s),
        }
        for name, master in sorted(home.items())
    }
    masters: dict[str, Any] = {}
    for master in sorted({*home.values(), *(by_master or {})}):
        mine = [name for name, q in queues.items() if q["master"] == master]
        jobs = sum(queues[name]["jobs"] for name in mine)
        side = client_side(by_master[master]) if by_master and master in by_master else None
        masters[master] = {
            "queues": mine,
            "jobs": jobs,
            "jobs_per_s": _per(jobs, window_s),
            "server_calls": side.total_calls if side else None,
            "server_usec": side.total_usec if side else None,
            "server_us_per_job": _per(side.total_usec, jobs) if side else None,
        }
    return {"queues": queues, "masters": masters}
