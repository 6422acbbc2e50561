"""A run's rows of finish_fetch_shards.csv (one a master) and finish_fetch_queues.csv (one a
queue), from its summary's ``shards``."""

from __future__ import annotations

from typing import Any

from bench.finish_fetch.locust_run import RunResult
from bench.protocol.spread import slot_of
from bench.results import FinishFetchQueueRow, FinishFetchShardRow, RunIds


def _point(run: RunResult, ids: RunIds) -> dict[str, Any]:
    p = run.point
    return {
        "run_id": ids.run_id, "protocol": ids.protocol, "profile": ids.profile, "strategy": run.strategy,
        "rep": run.rep, "workers": p.workers, "concurrency": p.concurrency, "job_ms": p.job_ms,
        "rtt_ms": p.rtt_ms, "queues": p.queues, **(run.machine.row_fields() if run.machine else {}),
    }  # fmt: skip


def _round(value: Any, digits: int) -> float | None:
    return round(float(value), digits) if value is not None else None


def shard_rows(run: RunResult, ids: RunIds) -> list[FinishFetchShardRow]:
    masters = run.summary.get("shards", {}).get("masters", {})
    return [
        FinishFetchShardRow(
            **_point(run, ids),
            master=master,
            master_queues=len(m["queues"]),
            jobs=m["jobs"],
            jobs_per_s=_round(m["jobs_per_s"], 1),
            server_calls=m["server_calls"],
            server_usec=m["server_usec"],
            server_us_per_job=_round(m["server_us_per_job"], 2),
        )
        for master, m in masters.items()
    ]


def queue_rows(run: RunResult, ids: RunIds) -> list[FinishFetchQueueRow]:
    queues = run.summary.get("shards", {}).get("queues", {})
    return [
        FinishFetchQueueRow(
            **_point(run, ids),
            queue=name,
            slot=slot_of(name),
            master=q["master"],
            jobs=q["jobs"],
            jobs_per_s=_round(q["jobs_per_s"], 1),
        )
        for name, q in queues.items()
    ]
