"""finish_fetch per master (finish_fetch_shards.csv): each master's jobs/s and its own Redis µs
a job at each point and strategy, so a hot shard shows; left out when every run had one master
and one queue."""

from __future__ import annotations

import pandas as pd

from bench.report.markdown import markdown_table

SHARD_KEYS = ["protocol", "strategy", "workers", "queues", "concurrency", "job_ms", "rtt_ms", "master"]


def shards_section(frame: pd.DataFrame | None) -> list[str]:
    if frame is None or frame.empty or not set(SHARD_KEYS) <= set(frame.columns):
        return []
    if (frame["queues"] == 1).all() and frame["master"].nunique() == 1:
        return []
    table = (
        frame.groupby(SHARD_KEYS, sort=True)
        .agg(
            master_queues=("master_queues", "first"),
            reps=("rep", "nunique"),
            jobs_per_s=("jobs_per_s", "mean"),
            server_us_per_job=("server_us_per_job", "mean"),
        )
        .reset_index()
    )
    if table["protocol"].nunique() == 1:
        table = table.drop(columns="protocol")
    return [
        "Per master, mean over repetitions (finish_fetch_shards.csv; each master's Redis µs a job "
        "from its own INFO commandstats; finish_fetch_queues.csv has each queue):",
        "",
        markdown_table(table),
        "",
    ]
