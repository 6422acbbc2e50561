"""How the suite connects to Redis: settings, no silent re-sends, round-trip counting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import hiredis  # a dependency (redis[hiredis]): its packer and parser
import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.retry import Retry

from bench.errors import BenchError


def redact_url(url: str) -> str:
    """The URL with any password replaced by ***, safe to print or record."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


@dataclass(frozen=True)
class RedisSettings:
    """Where and how to connect. ``socket_timeout_s`` bounds every read; it never triggers a re-send."""

    url: str = "redis://127.0.0.1:6379/0"
    socket_timeout_s: float = 30.0
    connect_timeout_s: float = 5.0
    # A Redis Cluster node: every client is a RedisCluster. None: ask the node (INFO cluster)
    # at the first connect, so a child process handed only the URL finds out by itself.
    cluster: bool | None = None

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> RedisSettings:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise BenchError(
                f"REDIS_URL scheme {parts.scheme!r} is not supported; use redis://, rediss:// or unix://"
            )
        try:
            _ = parts.port
        except ValueError:
            raise BenchError(
                f"REDIS_URL {redact_url(url)!r} has a bad port; use redis://host:port/db"
            ) from None
        return replace(cls(url=url), **overrides)

    @property
    def where(self) -> str:
        """host:port (or the socket path), never the password."""
        parts = urlsplit(self.url)
        if parts.scheme == "unix":
            return parts.path
        return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"

    def connect(self) -> Client:
        """A client on its own connection pool that never re-sends a command: a script such as
        moveToFinished or the sweep is not idempotent, so a timeout surfaces as redis.TimeoutError
        for the caller to count. A cluster client still follows MOVED and ASK (it did not run)."""
        if not self.is_cluster():
            return self.connect_single()
        client = CountingRedisCluster.from_url(self.url, **self._options())  # learns the slots there
        assert isinstance(client, CountingRedisCluster)
        return client

    def connect_single(self) -> CountingRedis:
        """A plain client of the one server (or cluster node) at the URL."""
        client = CountingRedis.from_url(self.url, **self._options(), retry_on_error=[])
        assert isinstance(client, CountingRedis)  # from_url builds cls
        return client

    def _options(self) -> dict[str, Any]:
        return {
            "socket_timeout": self.socket_timeout_s,
            "socket_connect_timeout": self.connect_timeout_s,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 0,
        }

    def is_cluster(self) -> bool:
        if self.cluster is not None:
            return self.cluster
        if (known := _CLUSTER_URLS.get(self.url)) is None:
            client = self.connect_single()
            try:
                known = str(client.info("cluster").get("cluster_enabled", 0)) == "1"
            except redis.RedisError:
                # Not answering now: a plain client, lazy as before, whose first command says why.
                return False
            finally:
                client.close()
            _CLUSTER_URLS[self.url] = known
        return known


# What each URL's node said about cluster mode, once per process.
_CLUSTER_URLS: dict[str, bool] = {}


class RoundTripCounting:
    """Counts a client's exchanges on the wire: one a command. ``round_trips`` is also a class
    default: redis-py's cluster constructor sends COMMAND before __init__ could set it."""

    round_trips = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_trips = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.round_trips += 1
        return super().execute_command(*args, **options)  # type: ignore[misc]


class CountingRedis(RoundTripCounting, redis.Redis):
    """A redis-py client that counts its round trips: a command, each step of a NOSCRIPT
    recovery, a whole pipeline; not a connection's set-up (once, outside the measured loop)."""

    def pipeline(self, transaction: bool = False, shard_hint: Any = None) -> CountingPipeline:
        return CountingPipeline(self, transaction, shard_hint)


class CountingPipeline(Pipeline):
    """A pipeline that adds one round trip to its client per non-empty execute."""

    def __init__(self, owner: CountingRedis, transaction: bool, shard_hint: Any) -> None:
        super().__init__(owner.connection_pool, owner.response_callbacks, transaction, shard_hint)
        self._owner = owner

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        if len(self.command_stack) > 0:
            self._owner.round_trips += 1
        return super().execute(raise_on_error)


class CountingRedisCluster(RoundTripCounting, RedisCluster):
    """A RedisCluster that counts its round trips as CountingRedis does; a MOVED or ASK
    redirect (only while a slot migrates) is a second exchange it does not count. A queue's
    pipeline goes to the one node that holds its hash tag: one round trip."""

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> CountingClusterPipeline:
        if shard_hint:
            raise redis.RedisError("shard_hint is not supported on a cluster")
        return CountingClusterPipeline(self, transaction)

    def info(self, section: Any = None, *args: Any, **kwargs: Any) -> Any:
        """INFO of every master as one answer (merge_info), so a caller reading commandstats,
        CPU or run_id sees the whole cluster; ``target_nodes`` as redis-py."""
        if "target_nodes" in kwargs:
            return super().info(section, *args, **kwargs)
        per_node = {name: node.info(section, *args) for name, node in primaries(self)}
        return merge_info(section, per_node)


class CountingClusterPipeline(ClusterPipeline):
    """A cluster pipeline that adds one round trip to its client per non-empty execute."""

    def __init__(self, owner: CountingRedisCluster, transaction: Any) -> None:
        super().__init__(
            nodes_manager=owner.nodes_manager,
            commands_parser=owner.commands_parser,
            startup_nodes=list(owner.nodes_manager.startup_nodes.values()),  # unused by the pipeline
            result_callbacks=owner.result_callbacks,
            cluster_response_callbacks=owner.cluster_response_callbacks,
            read_from_replicas=owner.read_from_replicas,
            load_balancing_strategy=owner.load_balancing_strategy,
            reinitialize_steps=owner.reinitialize_steps,
            retry=owner.retry,
            lock=owner._lock,
            transaction=transaction,
            event_dispatcher=owner._event_dispatcher,
        )
        self._owner = owner

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        if len(self) > 0:
            self._owner.round_trips += 1
        return super().execute(raise_on_error)

    def mset(self, mapping: Any) -> Any:
        return self.execute_command("MSET", *(item for pair in dict(mapping).items() for item in pair))

    # redis-py's cluster pipeline refuses multi-key MSET, DEL, UNLINK and EXISTS (keys may span
    # slots). A queue's keys share one slot, so each is one command to one node; keys that
    # did not would fail the slot check here, as CROSSSLOT would on the server.
    def delete(self, *names: Any) -> Any:
        return self.execute_command("DEL", *names)

    def unlink(self, *names: Any) -> Any:
        return self.execute_command("UNLINK", *names)

    def exists(self, *names: Any) -> Any:
        return self.execute_command("EXISTS", *names)


# INFO sections whose fields add up over masters: the cluster's Redis µs per job is their sum.
ADDITIVE = ("commandstats", "cpu", "stats")


def _added(values: list[Any]) -> Any:
    if all(isinstance(v, Mapping) for v in values):  # commandstats: {calls, usec, ...} per command
        keys = {k for v in values for k in v}
        return {k: _added([v[k] for v in values if k in v]) for k in keys}
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return sum(values)
    return _joined(values)


def _joined(values: list[Any]) -> Any:
    """One value where every master agrees, else each master's, comma-separated (so a run_id
    that changes on any master changes the joined one too)."""
    if all(v == values[0] for v in values):
        return values[0]
    return ",".join(str(v) for v in values)


def merge_info(section: str | None, per_node: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One INFO dict from each master's (keyed by host:port, in a stable order)."""
    nodes = [per_node[name] for name in sorted(per_node)]
    fields = {k for info in nodes for k in info}
    combine = _added if (section or "").lower() in ADDITIVE else _joined
    return {k: combine([info[k] for info in nodes if k in info]) for k in sorted(fields)}


# Every client the suite makes: one server's, or a cluster's.
Client: TypeAlias = CountingRedis | CountingRedisCluster


def node_client(client: Client, key: str) -> redis.Redis:
    """The plain client of the server that holds ``key`` now: the client itself on one server."""
    if not isinstance(client, CountingRedisCluster):
        return client
    node = client.get_node_from_key(key)
    found = node.redis_connection or client.get_redis_connection(node)
    assert found is not None
    return found


def primaries(client: Client) -> list[tuple[str, redis.Redis]]:
    """(host:port, plain client) of every master; one server is its own only master."""
    if isinstance(client, CountingRedisCluster):
        return [(node.name, client.get_redis_connection(node)) for node in client.get_primaries()]
    kwargs = client.connection_pool.connection_kwargs
    return [(f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}", client)]


def write_and_read(connection: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Every command written at once on ``connection``, then one reply each, a Redis error as a
    value (a whole reply: the connection stays in step). On any other failure the connection is
    dropped, since replies left unread would be taken for the next exchange's; nothing is re-sent.
    Packed by hiredis straight: redis-py's packer first walks every argument in Python, the
    client's largest cost a call in a load generator's profile."""
    try:
        try:
            packed = [b"".join([hiredis.pack_command(command) for command in commands])]
        except TypeError:  # an argument hiredis does not take (a memoryview): redis-py's packer converts it
            packed = connection.pack_commands(commands)
        connection.send_packed_command(packed, check_health=False)
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(connection.read_response())
            except redis.ResponseError as exc:
                replies.append(exc)
    except BaseException:
        connection.disconnect()
        raise
    return replies
