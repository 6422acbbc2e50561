"""A cluster REDIS_URL's checks: the cluster is whole, and every master is fit for a run.

The node at the URL says which masters serve which slots (CLUSTER NODES). A
master flagged ``fail``, a ``cluster_state`` other than ok, or a master that
does not answer is one line; then each master gets the single server's checks
(version, noeviction), on the URL's user, password and TLS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from bench.errors import BenchError, first_line
from bench.protocol.connection import RedisSettings

CHECK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ClusterMaster:
    """One master as meta.json records it."""

    address: str  # host:port
    slots: tuple[tuple[int, int], ...]  # inclusive ranges
    version: str = ""
    flags: str = ""

    def as_meta(self) -> dict[str, Any]:
        return {"address": self.address, "slots": [list(r) for r in self.slots], "version": self.version}


def parse_masters(nodes: Any) -> list[ClusterMaster]:
    """The masters of a CLUSTER NODES reply as redis-py parses it ({address: fields}), with
    their slot ranges, ordered by their first slot."""
    masters = []
    for address, node in dict(nodes).items():
        flags = str(node.get("flags", ""))
        if "master" not in flags.split(","):
            continue
        ranges = tuple(sorted((int(r[0]), int(r[-1])) for r in node.get("slots", [])))
        masters.append(ClusterMaster(str(address).split("@")[0], ranges, flags=flags))
    return sorted(masters, key=lambda m: m.slots[0] if m.slots else (16384, 0))


def node_settings(settings: RedisSettings, address: str) -> RedisSettings:
    """The URL's settings (user, password, TLS) pointed at another node, as a single server."""
    parts = urlsplit(settings.url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{address}" if credentials else address
    url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return replace(settings, url=url, cluster=False)


def cluster_layout(settings: RedisSettings) -> list[ClusterMaster]:
    """The masters as the URL's node sees them, after the whole-cluster checks."""
    where = settings.where
    client = replace(settings, socket_timeout_s=CHECK_TIMEOUT_S, cluster=False).connect_single()
    try:
        info = client.cluster("INFO")
        nodes = client.cluster("NODES")
    except redis.RedisError as exc:
        raise BenchError(
            f"Redis Cluster node {where} did not describe the cluster: {first_line(exc)}"
        ) from None
    finally:
        client.close()
    masters = parse_masters(nodes)
    failed = [m.address for m in masters if "fail" in m.flags.split(",")]
    if failed:
        raise BenchError(
            f"Redis Cluster at {where}: master {', '.join(failed)} is in fail state; "
            "bring it back (or fail over to a replica) before a run"
        )
    state = str(info.get("cluster_state", "unknown")) if isinstance(info, dict) else "unknown"
    if state != "ok":
        assigned = info.get("cluster_slots_assigned", "?") if isinstance(info, dict) else "?"
        raise BenchError(
            f"Redis Cluster at {where} says cluster_state:{state} ({assigned} of 16384 slots assigned); "
            "a run needs every slot served"
        )
    return masters
