"""Key names of one queue, ``<namespace>:{<queue>}:...``: the only place the hash tag is built.

The tag is the queue name, never the namespace, so each queue is one cluster slot.
The KEYS-order helpers at the end are echomq's script contract (protocol.md).
"""

from __future__ import annotations

import os
import re
import secrets
import uuid
from dataclasses import dataclass
from functools import cached_property

from bench.errors import BenchError

# Letters, digits and . _ - only: no braces (they would break the hash tag) and
# no glob characters (the queue's keys are found with SCAN MATCH <prefix>*).
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]{1,20}$")
ECHOMQ_NAMESPACE = "emq"
BULLMQ_NAMESPACE = "bull"  # BullMQ's default key prefix
NAMESPACES = (ECHOMQ_NAMESPACE, BULLMQ_NAMESPACE)
# moveToActive's KEYS by suffix, in protocol.md's order (BullMQ's Scripts.moveToActive names them alike).
FETCH_SUFFIXES = (
    "wait", "active", "prioritized", "events", "stalled", "limiter",
    "delayed", "paused", "meta", "pc", "marker",
)  # fmt: skip

# A run's key scope: every queue it names starts with it, so every key it writes starts with one of
# scope_prefixes(scope), which the run records in its folder before its first key (a fault that
# leaves keys behind is then cleaned by `echomq-bench clean`). In the environment, so the run's
# children (Locust, pyperf's workers, BullMQ's Node workers) name their queues in it too.
KEY_SCOPE_ENV = "EMQ_KEY_SCOPE"


def new_scope() -> str:
    """A scope no other run has: ``r`` and 8 hex digits, then a dot (no glob character)."""
    return f"r{secrets.token_hex(4)}."


def fresh_queue_name(kind: str) -> str:
    """A queue name no other queue has, in this process's run scope: ``<scope><kind>-<10 hex>``."""
    return f"{os.environ.get(KEY_SCOPE_ENV, '')}{kind}-{uuid.uuid4().hex[:10]}"


def scope_prefixes(scope: str) -> list[str]:
    """The key prefixes of every queue named in ``scope``, one a protocol's namespace."""
    return [f"{namespace}:{{{scope}" for namespace in NAMESPACES]


class _Key:
    """A queue's key by its suffix (the attribute's name unless given), read as ``keys.wait``."""

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix

    def __set_name__(self, owner: type, name: str) -> None:
        self.suffix = self.suffix or name

    def __get__(self, keys: QueueKeys, owner: type | None = None) -> str:
        return keys.key(self.suffix)


@dataclass(frozen=True)
class QueueKeys:
    """Every key of the queue ``name``; all share the hash tag ``{name}``."""

    name: str
    namespace: str = ECHOMQ_NAMESPACE

    def __post_init__(self) -> None:
        if not _QUEUE_NAME.match(self.name):
            raise BenchError(
                f"queue name {self.name!r} is not allowed; use 1-100 letters, digits, '.', '_' or '-'"
            )
        if not _NAMESPACE.match(self.namespace):
            raise BenchError(f"key namespace {self.namespace!r} is not allowed; use 1-20 letters or digits")

    # Built once a queue: a load generator asks for them on every call it builds.
    @cached_property
    def tag(self) -> str:
        return f"{{{self.name}}}"

    @cached_property
    def prefix(self) -> str:
        """``<namespace>:{name}:``, with the trailing colon scripts append ids and suffixes to."""
        return f"{self.namespace}:{self.tag}:"

    def key(self, suffix: str) -> str:
        return self.prefix + suffix

    def job(self, job_id: str) -> str:
        return self.prefix + job_id

    def lock(self, job_id: str) -> str:
        return f"{self.prefix}{job_id}:lock"

    # the job lists and sets, by state
    wait, active, prioritized, delayed = _Key(), _Key(), _Key(), _Key()
    stalled, completed, failed = _Key(), _Key(), _Key()
    # the queue's own: its events stream, counters, flags and throttles
    events, limiter, paused, meta, pc, marker = _Key(), _Key(), _Key(), _Key(), _Key(), _Key()
    stalled_check, id_counter = _Key("stalled-check"), _Key("id")

    def metrics(self, target: str) -> str:
        return self.key(f"metrics:{target}")

    # KEYS lists in the order protocol.md gives each script.

    def add_job_keys(self) -> list[str]:
        return list(self._add_job_keys)

    def move_to_active_keys(self) -> list[str]:
        return list(self._move_to_active_keys)

    def move_to_finished_keys(self, job_id: str, target: str) -> list[str]:
        return [*self._fetch_keys, self.key(target), self.job(job_id), self.metrics(target), self.marker]

    @cached_property
    def _add_job_keys(self) -> tuple[str, ...]:
        return (self.wait, self.paused, self.meta, self.id_counter, self.events, self.marker)

    @cached_property
    def _move_to_active_keys(self) -> tuple[str, ...]:
        return (*self._fetch_keys, self.marker)

    def sweep_keys(self) -> list[str]:
        return [
            self.key(n)
            for n in ("stalled", "wait", "active", "failed", "stalled-check", "meta", "paused", "marker")
        ]

    def extend_lock_keys(self, job_id: str) -> list[str]:
        return [self.lock(job_id), self.stalled]

    @cached_property
    def _fetch_keys(self) -> tuple[str, ...]:
        return tuple(self.key(n) for n in FETCH_SUFFIXES[:-1])
