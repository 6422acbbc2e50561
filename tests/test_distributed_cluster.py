"""Locust's master and two Locust workers as separate processes on loopback, as on several
machines, against the embedded cluster: the merged summary counts every job exactly, and the
audit finds every job produced either finished or still in its queue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bench.harness.cluster import EmbeddedCluster
from bench.paths import LOCUSTFILE, REPO
from bench.protocol.audit import audit_queues, master_run_ids
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Queue
from bench.protocol.spread import homes, queue_names
from bench.results import hdr
from bench.stages.finish_fetch.loadstats import issued_job_ids
from bench.stages.finish_fetch.locust_trial import _free_port

pytestmark = [pytest.mark.timeout(120), pytest.mark.cluster, pytest.mark.locust]
END_DEADLINE_S = 90.0  # three Python + Locust starts on a busy 2-core machine, then the window


@pytest.mark.slow
def test_a_master_and_two_workers_count_every_job_on_the_cluster(tmp_path: Path):
    with EmbeddedCluster() as cluster:
        port, base = str(_free_port()), f"dist-{uuid.uuid4().hex[:8]}"
        masters = {f"127.0.0.1:{p}" for p in cluster.ports}
        load = ["--queue", base, "--queues", "3", "--workers", "4", "--producers", "3",
                "--strategy", "fused", "--warmup-s", "0.3", "--measure-s", "1", "--rtt-ms", "0",
                "--keep-queue"]  # fmt: skip
        locust = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--loglevel", "INFO"]
        env = {**os.environ, "REDIS_URL": cluster.url}  # every process on the same REDIS_URL
        summary_path = tmp_path / "summary.json"
        master = [*locust, *load, "--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1",
                  "--master-bind-port", port, "--summary-json", str(summary_path)]  # fmt: skip
        worker = [*locust, *load, "--worker", "--master-host", "127.0.0.1", "--master-port", port]
        logs = [(tmp_path / f"{name}.log").open("w") for name in ("master", "worker1", "worker2")]
        processes = [
            subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
            for command, log in zip((master, worker, worker), logs, strict=True)
        ]
        try:
            assert processes[0].wait(timeout=END_DEADLINE_S) == 0, (tmp_path / "master.log").read_text()
            for process in processes[1:]:
                process.wait(timeout=20)  # a worker quits when its master does
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        summary = json.loads(summary_path.read_text())
        client = RedisSettings.from_url(cluster.url).connect()
        try:
            names = queue_names(client, base, 3)
            queues = [Queue.open(client, n) for n in names]
            audited = audit_queues(queues, issued_job_ids, master_run_ids(client), homes(client, names))
            for queue in queues:
                queue.delete()
        finally:
            client.close()
    assert summary["mode"] == "distributed" and summary["complete"], summary["missing_processes"]
    # both Locust workers ran users (Locust may put the fixed counts of a class on one of them)
    workers = [p for p in summary["processes"] if p["role"] == "worker" and p["counts"]]
    assert len(workers) == 2, summary["processes"]
    jobs = summary["counters"]["jobs"]
    merged = hdr.decode(summary["histograms"]["cycle"]).get_total_count()
    assert merged == sum(p["counts"].get("cycle", 0) for p in workers) == jobs > 0  # merged exactly
    added = hdr.decode(summary["histograms"]["enqueue"]).get_total_count()
    assert added == sum(p["counts"].get("enqueue", 0) for p in workers) > 0
    assert sum(q["jobs"] for q in summary["shards"]["queues"].values()) == jobs
    assert {q["master"] for q in summary["shards"]["queues"].values()} == masters
    # produced = finished + left in the queues, each job once
    assert audited.ok and audited.queues == 3, audited.verdict
    c = audited.counts
    assert (
        audited.produced == c["completed"] + c["wait"] + c["active"] + c["failed"] and c["completed"] >= jobs
    )
