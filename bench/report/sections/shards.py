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
    # Keyed by the queues a master held too: each repetition names its queues afresh, so at one
    # queue the queue sits on another master each time; a master that held none is left out.
    held = frame[frame["master_queues"] > 0]
    table = (
        held.groupby([*SHARD_KEYS, "master_queues"], sort=True)
        .agg(
            reps=("rep", "nunique"),
            jobs_per_s=("jobs_per_s", "mean"),
            server_us_per_job=("server_us_per_job", "mean"),
        )
        .reset_index()
    )
    if table["protocol"].nunique() == 1:
        table = table.drop(columns="protocol")
    return [
        "Per master holding queues of the run, mean over the repetitions it held them in "
        "(finish_fetch_shards.csv; each master's Redis µs a job from its own INFO commandstats; "
        "finish_fetch_queues.csv has each queue):",
        "",
        markdown_table(table),
        "",
    ]
