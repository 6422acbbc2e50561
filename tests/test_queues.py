"""The queues key: producers and workers spread evenly over several queues, on one server and on
every master of a cluster, each queue and each master counted on its own (their parts sum to
the run's whole), every queue audited."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.harness.cluster import EmbeddedCluster
from bench.harness.profile import FinishFetchOptions
from bench.protocol.commandstats import CLIENT_COMMANDS
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Job, Queue, job_payload
from bench.results.rows import RunIds
from bench.stages.finish_fetch.locust_trial import run_trial
from bench.stages.finish_fetch.plan import Point
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.rows import queue_rows, shard_rows
from bench.stages.finish_fetch.seats import seated
from bench.stages.finish_fetch.summary import TrialSummary
from bench.stages.finish_fetch.table import shard_table
from tests.test_finish_fetch import QUICK, _raw_settings

THREE = dataclasses.replace(QUICK, producers=3, workers=(3,), queues=(3,), measure_s=0.6)
POINT = Point(workers=3, rtt_ms=0.0, queues=3)


def _parts_sum_to_the_whole(summary: TrialSummary, masters: int) -> None:
    shards = summary.shards
    assert len(shards["queues"]) == 3 and len(shards["masters"]) == masters, shards
    assert all(q["jobs"] > 0 for q in shards["queues"].values()), shards["queues"]  # every queue worked
    jobs = summary.figures.jobs
    assert sum(q["jobs"] for q in shards["queues"].values()) == jobs
    assert sum(m["jobs"] for m in shards["masters"].values()) == jobs
    assert summary.server is not None
    usec = sum(u for name, u in summary.server["usec"].items() if name in CLIENT_COMMANDS)
    by_master = [m["server_usec"] for m in shards["masters"].values()]
    assert None not in by_master and sum(u for u in by_master if u is not None) == usec  # read once a master


@pytest.mark.locust
@pytest.mark.slow
def test_three_queues_on_one_server(tmp_path: Path, settings: RedisSettings):
    run = run_trial(settings, THREE, "fused", POINT, 1, tmp_path)
    assert run.audit.ok and run.audit.queues == 3, run.audit.verdict
    _parts_sum_to_the_whole(run.summary, masters=1)
    raw = run_raw(settings, dataclasses.replace(_raw_settings(THREE, "fused", POINT), queues=3))
    assert raw.audit is not None and raw.audit.ok, raw.audit
    _parts_sum_to_the_whole(raw, masters=1)


@pytest.mark.locust
@pytest.mark.cluster
def test_three_queues_land_on_every_master_of_the_cluster(tmp_path: Path, cluster: EmbeddedCluster):
    settings = RedisSettings.from_url(cluster.url)
    run = run_trial(settings, THREE, "two_call", POINT, 1, tmp_path)
    assert run.audit.ok and run.audit.queues == 3, run.audit.verdict
    _parts_sum_to_the_whole(run.summary, masters=3)
    homes = {q["master"] for q in run.summary.shards["queues"].values()}
    assert homes == {f"127.0.0.1:{port}" for port in cluster.ports}  # one queue a master
    ids = RunIds("r", "p")
    rows = shard_rows(run, ids)
    assert sum(r.jobs for r in rows) == run.summary.figures.jobs
    assert all(r.server_us_per_job and r.master_queues == 1 for r in rows), rows
    assert {r.master for r in queue_rows(run, ids)} == homes
    lines = shard_table(rows).splitlines()
    assert sum(1 for line in lines if "127.0.0.1:" in line) == 3  # a line a master


def test_seats_go_round_the_queues_by_role(client):
    names = ["s-0", "s-1", "s-2"]
    first = Queue.open(client, names[0])
    try:
        taken = [seated(first, names, "worker") for _ in range(7)]
        assert taken == [*names, *names, "s-0"]
        assert seated(first, names, "producer") == "s-0"  # each role counts its own seats
    finally:
        first.delete()


def test_more_queues_than_producers_or_workers_is_one_line():
    with pytest.raises(BenchError, match="queues = 3 is more than producers 2") as caught:
        FinishFetchOptions(producers=2, workers=(4,), queues=(1, 3))
    assert "\n" not in str(caught.value)


def test_the_per_master_lines_pair_a_master_with_the_repetitions_it_held_the_queue_in():
    """One queue, three repetitions, the queue on another master each time: each master's line
    is the one repetition it held the queue in; no line for a master holding none."""
    from bench.results.finish_fetch import FinishFetchShardRow

    def part(rep: int, master: str, holder: int) -> FinishFetchShardRow:
        held = rep == holder  # this master held the queue in this repetition
        return FinishFetchShardRow(
            "r", "echomq", "p", "fused", 3, 4, 0.0, 0.0, 1, rep, master, int(held),
            3000 + rep if held else 0, 3000.0 + rep if held else 0.0, None, None,
            120.0 + rep if held else None,
        )  # fmt: skip

    masters = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    rows = [part(rep, master, i + 1) for rep in (1, 2, 3) for i, master in enumerate(masters)]
    lines = [line.split() for line in shard_table(rows, width=100).splitlines() if "127.0.0.1:" in line]
    assert [(cells[2], cells[4], cells[5], cells[6]) for cells in lines] == [
        ("127.0.0.1:1", "1", "3001", "121.0"),
        ("127.0.0.1:2", "1", "3002", "122.0"),
        ("127.0.0.1:3", "1", "3003", "123.0"),
    ]


@pytest.mark.parametrize(
    ("data", "enqueued"),
    [
        (job_payload(100, enqueued_us=1_733_000_000_123_456), 1_733_000_000_123_456),  # the fast read
        ('{"t_us":1733000000123456,"pad":"xx"}', 1_733_000_000_123_456),  # BullMQ's compact JSON of it
        ('{"pad": "xx", "t_us": 42}', 42),  # another layout: parsed
        ('{"t_us": "soon", "pad": ""}', None),  # not a time: parsed, refused
        ('{"t_us": 123}', 123),
        ('{"t_us": 7.0}', 7),
        ("not json", None),
    ],
)
def test_a_jobs_enqueue_time_is_read_from_its_data(data: str, enqueued: int | None) -> None:
    assert Job("1", {"data": data}, "token").enqueued_us == enqueued
