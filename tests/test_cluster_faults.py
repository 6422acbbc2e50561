"""A cluster master killed during the load stage: the run ends as a lost server's does (one
line, exit 2, meta.json incomplete), naming the master, and the audit names the shard whose data
is gone and audits the queues it can still see, never counting jobs lost."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from bench.harness.cluster import EmbeddedCluster
from tests.test_faults import TRICKLE, BenchRun, tiny_profile

pytestmark = [pytest.mark.timeout(120), pytest.mark.cluster, pytest.mark.locust]


@pytest.mark.slow
def test_a_master_killed_during_the_load_ends_the_run_and_the_audit_names_its_shard(tmp_path: Path):
    with EmbeddedCluster() as cluster:
        profile = tiny_profile(tmp_path, measure_s=30, workers=3, producers=3, queues=3, target_rate=TRICKLE)
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
    (verdict,) = meta["finish_fetch"]["audit_failures"].values()
    assert f"shard {victim}: unreachable" in verdict and "its data is gone" in verdict, verdict
    # the two masters left are audited whole: their jobs are each in exactly one place
    assert "the other 2 queue(s): ok:" in verdict, verdict
    assert "missing" not in verdict and "lost" not in verdict.replace("not audited", "")
    summary = run.summary()
    assert summary["audit"]["ok"] is False and summary["audit"]["verdict"] == verdict
    (row,) = run.rows()
    assert row["audit_ok"] == "False" and int(row["jobs"]) > 0


def _queue_slot_on(node: redis.Redis) -> int:
    """The slot of a queue whose keys this master holds (the run names its queues afresh)."""
    for key in node.scan_iter(match="emq:{*}:*", count=1000):
        return int(key_slot(key))
    raise AssertionError("no queue key on this master")


def move_slot(
    slot: int,
    source: redis.Redis,
    target: redis.Redis,
    masters: Sequence[redis.Redis],
    between_batches: Callable[[], None],
    batch: int = 10,
) -> tuple[int, int]:
    """Move ``slot`` from ``source`` to ``target`` as an operator's resharding does (IMPORTING,
    MIGRATING, MIGRATE a batch at a time, then the slot assigned on every master); between batches
    the slot is in both places (ASK, TRYAGAIN). The keys moved, and the batches."""
    source_id, target_id = (n.execute_command("CLUSTER", "MYID").decode() for n in (source, target))
    where = target.connection_pool.connection_kwargs
    target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    moved = batches = 0
    while keys := source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
        source.execute_command("MIGRATE", where["host"], where["port"], "", 0, 5000, "KEYS", *keys)
        moved, batches = moved + len(keys), batches + 1
        between_batches()
    # The target first, so it serves the slot before the source stops (redis-cli's order).
    for node in [target, source, *(m for m in masters if m not in (target, source))]:
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    return moved, batches


@pytest.mark.slow
def test_a_queue_slot_moved_to_another_master_during_the_load_is_followed_and_every_job_found(
    tmp_path: Path,
):
    with EmbeddedCluster() as cluster:
        profile = tiny_profile(tmp_path, measure_s=8, workers=3, producers=3, queues=3, target_rate=TRICKLE)
        run = BenchRun(tmp_path, profile, cluster.url)
        run.wait_for_window()
        masters = [redis.Redis(port=p) for p in cluster.ports]
        try:
            slot = _queue_slot_on(masters[0])
            moved, batches = move_slot(slot, masters[0], masters[1], masters, lambda: time.sleep(0.01))
            code = run.finish()
        finally:
            for m in masters:
                m.close()
    assert moved > 0 and batches > 1, (moved, batches)
    assert code == 0, run.stderr
    summary = run.summary()
    # Followed: the calls answered MOVED, ASK or TRYAGAIN ran where the slot had gone, none failed.
    assert summary["derived"]["errors"] == 0, summary["derived"]["errors_by_kind"]
    followed = summary["derived"]["followed_by_kind"]
    assert followed.get("moved", 0) > 0, (followed, moved)
    assert summary["audit"]["ok"] is True, summary["audit"]
    assert "slot moving, calls sent on: " in run.stderr and f"{followed['moved']} moved" in run.stderr
    (row,) = run.rows()
    assert row["audit_ok"] == "True" and int(row["jobs"]) > 0
