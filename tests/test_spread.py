"""Queue names land on every master evenly; their slots are the cluster's own."""

from __future__ import annotations

from collections import Counter

import pytest
from redis.cluster import RedisCluster

from bench.harness.cluster import EmbeddedCluster, slot_ranges
from bench.protocol.spread import master_of, slot_of, spread_names

THREE = [[r] for r in slot_ranges(3)]


@pytest.mark.parametrize("count", [1, 3, 7, 12])
def test_names_cover_the_masters_evenly(count: int):
    names = spread_names("q", count, THREE)
    per_master = Counter(master_of(slot_of(n), THREE) for n in names)
    assert len(set(names)) == count
    assert max(per_master.values()) - min(per_master.values(), default=0) <= 1
    assert len(per_master) == min(count, 3)
    assert len({slot_of(n) for n in names}) == count  # one queue a slot


def test_one_server_gets_plain_names():
    assert spread_names("q", 3, [[(0, 16383)]]) == ["q-0", "q-1", "q-2"]


@pytest.mark.cluster
def test_the_names_land_where_the_cluster_puts_them(cluster: EmbeddedCluster):
    client = RedisCluster.from_url(cluster.url)
    try:
        masters = sorted(client.get_primaries(), key=lambda n: n.port)
        layout = [[r] for r in slot_ranges(3)]
        by_port = dict(zip(cluster.ports, layout, strict=True))
        ordered = [by_port[node.port] for node in masters]
        names = spread_names("q", 6, ordered)
        homes = {client.get_node_from_key(f"emq:{{{n}}}:wait").port for n in names}
        assert homes == set(cluster.ports)
        assert all(client.keyslot(f"emq:{{{n}}}:wait") == slot_of(n) for n in names)
    finally:
        client.close()
