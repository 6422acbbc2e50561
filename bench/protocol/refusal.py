"""Replies that mean every later call will fail too: the one classifier every stage asks.

A server out of memory, read-only, whose last snapshot failed, still loading, a user
without the rights, or a cluster that is down refuses the next call as it refused this
one. A run that went on would report refusals as a slow queue, so such a reply ends the
run with one line saying what to do. Every other failed call is the caller's to count.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import redis
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
)

from bench.errors import BenchError, first_line
from bench.protocol.connection import Client

LOADING_WAIT_S = 5.0  # a server still loading its data is waited for this long, then refused

# Each kind: redis-py's exception for it (None: none), and its code anywhere in a reply's text
# (a script's redis.call() wraps it in "Error running script").
_KINDS: dict[str, tuple[type[Exception] | None, re.Pattern[str]]] = {
    "oom": (OutOfMemoryError, re.compile(r"\bOOM\b|used memory > 'maxmemory'")),
    "readonly": (ReadOnlyError, re.compile(r"\bREADONLY\b|read only replica")),
    "misconf": (None, re.compile(r"\bMISCONF\b")),
    # Redis 6.2 words a script's ACL refusal without the code
    "noperm": (
        NoPermissionError,
        re.compile(r"\bNOPERM\b|no permissions to|user executing the script can't"),
    ),
    "loading": (BusyLoadingError, re.compile(r"\bLOADING\b|loading the dataset")),
    "clusterdown": (ClusterDownError, re.compile(r"\bCLUSTERDOWN\b|cluster is down")),
}


@dataclass(frozen=True)
class Refusal:
    """A reply that every later call would get too: its kind and the server's own words."""

    kind: str  # oom, readonly, misconf, noperm, loading, clusterdown
    said: str


def refusal(exc: BaseException) -> Refusal | None:
    """The refusal ``exc`` is, or None for a failure the caller counts and goes on from."""
    if not isinstance(exc, redis.RedisError):
        return None
    said = first_line(exc, when_empty="")
    for kind, (cls, _) in _KINDS.items():  # before ConnectionError: BusyLoadingError is one
        if cls is not None and isinstance(exc, cls):
            return Refusal(kind, said)
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return None  # a lost server has its own path (the server watch, the audit)
    for kind, (_, pattern) in _KINDS.items():
        if pattern.search(said):
            return Refusal(kind, said)
    return None


class ServerRefused(BenchError):
    """A run ended by a refusal: the line says what is wrong and what to do (exit 2)."""

    def __init__(self, line: str, kind: str) -> None:
        super().__init__(line)
        self.kind = kind


def _maxmemory(client: Client | None) -> str:
    """'maxmemory 3.1 MB' as the server says it now, or 'its maxmemory' when it will not."""
    if client is not None:
        with contextlib.suppress(redis.RedisError, KeyError, ValueError):
            return f"maxmemory {int(client.info('memory')['maxmemory']) / 1e6:.1f} MB"
    return "its maxmemory"


def _master_of(client: Client | None) -> str:
    if client is not None:
        with contextlib.suppress(redis.RedisError, KeyError):
            replication = client.info("replication")
            return f"{replication['master_host']}:{replication['master_port']}"
    return "its master"


def replica_line(master: str) -> str:
    return f"REDIS_URL names a read-only replica of {master}; point it at the master"


def refusal_line(found: Refusal, where: str, client: Client | None = None) -> str:
    """The one line a user reads: what the server refused and what to do. ``client`` (on the refusing
    server, any connection) adds the figures INFO gives: memory, a replica's master."""
    if found.kind == "oom":
        return f"Redis {where} hit {_maxmemory(client)} (OOM); raise it or shrink the run"
    if found.kind == "readonly":
        return replica_line(_master_of(client))
    if found.kind == "misconf":
        return f"Redis {where} refuses writes (MISCONF: an RDB save failed); see its log"
    if found.kind == "noperm":
        return "REDIS_URL's user may not write queue keys (NOPERM); allow it with ACL SETUSER"
    if found.kind == "loading":
        return f"Redis {where} still loading after {LOADING_WAIT_S:g}s (LOADING); run again once loaded"
    return f"Redis Cluster {where} is down (CLUSTERDOWN); bring its masters back"


def refused(exc: BaseException, where: str, client: Client | None = None) -> ServerRefused | None:
    """The error a run ends with when ``exc`` is a refusal; None when it is not one."""
    found = refusal(exc)
    return None if found is None else ServerRefused(refusal_line(found, where, client), found.kind)
