"""The server a run talks to: the user's (REDIS_URL, checked), an embedded redis-server, or an
embedded cluster. Its own module, above server.py and cluster.py, so neither imports the other
back."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import replace

from bench.harness.cluster import EmbeddedCluster
from bench.harness.cluster_check import node_settings
from bench.harness.server import EmbeddedRedis, ServerInfo, identify, inspect_server
from bench.protocol.connection import RedisSettings, redact_url


@contextlib.contextmanager
def redis_for_run(
    env: Mapping[str, str] | None = None, cluster: bool = False
) -> Iterator[tuple[RedisSettings, ServerInfo]]:
    """The server a run talks to: REDIS_URL when set (checked; a cluster node makes every
    client a cluster client), else an embedded one (an embedded cluster with ``cluster``)."""
    env = os.environ if env is None else env
    url = env.get("REDIS_URL", "").strip()
    if url:
        settings = RedisSettings.from_url(url)
        version, masters = inspect_server(settings)
        settings = replace(settings, cluster=bool(masters))
        name, own = identify(node_settings(settings, masters[0].address) if masters else settings)
        yield settings, ServerInfo(redact_url(url), "REDIS_URL", None, version, masters, name, own)
        return
    if cluster:
        with EmbeddedCluster() as nodes:
            settings = RedisSettings.from_url(nodes.url, cluster=True)
            version, masters = inspect_server(settings)
            source_name = nodes.nodes[0].source
            name, own = identify(node_settings(settings, masters[0].address))
            yield settings, ServerInfo(nodes.url, source_name, nodes.binary, version, masters, name, own)
        return
    with EmbeddedRedis() as server:
        settings = RedisSettings.from_url(server.url)
        name, own = identify(settings)
        yield settings, ServerInfo(server.url, server.source, server.binary, server.version(), (), name, own)
