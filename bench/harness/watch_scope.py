"""What the machine watch can count as the run's own (docs/method.md): the suite's process family
(an embedded redis-server in it), and a REDIS_URL server on loopback by the pid it reports, once
that pid is a Redis process here (a server in a container answers with a pid of its namespace)."""

from __future__ import annotations

import ipaddress
from contextlib import closing
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil
import redis

from bench.harness.server import ServerInfo
from bench.protocol.connection import RedisSettings

EMBEDDED = "client and the embedded redis-server, on this machine"
REMOTE = "client side only: the REDIS_URL server's machine is not watched"
SERVER_NAMES = ("redis", "valkey", "keydb")  # what a Redis server's process name contains


@dataclass(frozen=True)
class WatchScope:
    """Pids to watch beside the suite's own family, and meta.json's words for it."""

    extra_pids: tuple[int, ...]
    note: str


def is_loopback(settings: RedisSettings) -> bool:
    """Whether the URL reaches a server on this machine: a unix socket, localhost or 127/8, ::1."""
    parts = urlsplit(settings.url)
    if parts.scheme == "unix":
        return True
    host = (parts.hostname or "localhost").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def watch_scope(settings: RedisSettings, server: ServerInfo) -> WatchScope:
    """The scope of a run against ``server``; a server that cannot be asked is a remote one."""
    if server.source != "REDIS_URL":
        return WatchScope((), EMBEDDED)
    if not is_loopback(settings):
        return WatchScope((), REMOTE)
    with closing(settings.connect()) as client:
        try:
            pid = int(client.info("server").get("process_id", 0))
        except (redis.RedisError, ValueError, TypeError):
            pid = 0
    if pid <= 0:
        return WatchScope((), f"{REMOTE} (its pid is not known)")
    try:
        name = psutil.Process(pid).name().lower()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        name = ""
    if not any(word in name for word in SERVER_NAMES):
        return WatchScope(
            (), f"client side only: the REDIS_URL server on loopback says pid {pid}, no Redis process here"
        )
    return WatchScope((pid,), f"client and the REDIS_URL redis-server (pid {pid}), on this machine")
