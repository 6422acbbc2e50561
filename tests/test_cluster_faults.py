"""A cluster master killed during the load stage: the run ends as a lost server's does (one
line, exit 2, meta.json incomplete), naming the master, and the audit names the shard whose data
is gone and audits the queues it can still see, never counting jobs lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.cluster import EmbeddedCluster
from tests.test_faults import BenchRun, tiny_profile

pytestmark = pytest.mark.timeout(120)


def test_a_master_killed_during_the_load_ends_the_run_and_the_audit_names_its_shard(tmp_path: Path):
    with EmbeddedCluster() as cluster:
        profile = tiny_profile(tmp_path, measure_s=30, workers=3, producers=3, queues=3)
        run = BenchRun(tmp_path, profile, cluster.url)
        run.wait_for_window()  # counted on the URL's node: its queue is one of the three
        victim = f"127.0.0.1:{cluster.ports[2]}"
        cluster.kill(2)
        code = run.finish()  # well before the 30 s window: 2 s without the master stops it
    assert code == 2, run.stderr
    line = run.last_line()
    assert line.startswith("echomq-bench: error: finish_fetch run fused w3-q3-rtt0 rep 1 stopped:"), line
    assert f"Redis Cluster master {victim} unreachable" in line, line
    meta = run.meta()
    assert meta["complete"] is False and meta["stages_done"] == [] and victim in meta["reason"]
    (verdict,) = meta["finish_fetch_audit_failures"].values()
    assert f"shard {victim}: unreachable" in verdict and "its data is gone" in verdict, verdict
    # the two masters left are audited whole: their jobs are each in exactly one place
    assert "the other 2 queue(s): ok:" in verdict, verdict
    assert "missing" not in verdict and "lost" not in verdict.replace("not audited", "")
    summary = run.summary()
    assert summary["audit"]["ok"] is False and summary["audit"]["verdict"] == verdict
    (row,) = run.rows()
    assert row["audit_ok"] == "False" and int(row["jobs"]) > 0
