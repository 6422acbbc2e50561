"""A queue protocol: where its scripts come from, its key layout, and how each step's call is built.

The stages never build KEYS or ARGV: a Producer, Worker or Sweeper asks its queue's
protocol for a ``ScriptCall`` and for the meaning of the reply, so adding a protocol
is one class, registered in ``PROTOCOLS``.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.errors import BenchError
from bench.protocol.keys import QueueKeys
from bench.protocol.scripts import SCRIPT_FILES, script_source

JOB_EXISTS = -5  # addJob's refusal of an id that exists (protocol.md)

# The five steps every protocol provides, by the name its Scripts object uses.
STEPS = ("add_job", "move_to_active", "move_to_finished", "sweep", "extend_lock")
# Ids a multi-key or multi-member command takes while a scenario is staged.
STAGE_CHUNK = 5_000


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Job:
    """A job a worker holds: its id, its hash at fetch time, and the token of its lock."""

    id: str
    fields: dict[str, str]
    token: str

    @property
    def enqueued_us(self) -> int | None:
        """The enqueue time the producer put in the job's data, in µs."""
        data = self.fields.get("data", "{}")
        if data.startswith(T_US_HEAD):  # job_payload's own layout: read without parsing the padding
            digits = data[len(T_US_HEAD) : data.find(",", len(T_US_HEAD))].lstrip(" ")
            if digits.isdigit():
                return int(digits)
        try:
            value = json.loads(data).get("t_us")
        except (ValueError, AttributeError):
            return None
        return int(value) if isinstance(value, int | float) else None


# How job_payload's JSON begins (and BullMQ's compact JSON of it): the enqueue time's digits follow.
T_US_HEAD = '{"t_us":'


@dataclass
class WorkerOptions:
    lock_ms: int = 30_000
    keep: int = -1  # -1 every finished job, 0 none, N the newest N
    metrics_minutes: int = 0
    limiter_max: int = 0
    limiter_ms: int = 0


@dataclass(frozen=True)
class ScriptCall:
    """One EVALSHA to send: the step's script, its KEYS and its ARGV."""

    script: str  # one of STEPS, or an extra script's file name
    keys: list[str]
    args: list[Any]


@dataclass(frozen=True)
class SweepSlice:
    """Where a call of a sweep spread over calls stops: ``size`` ids at most, and no further
    chunk of them once it has run ``budget_us`` inside Redis (0: no budget)."""

    size: int
    budget_us: int


@dataclass(frozen=True)
class Added:
    """addJob's reply read: the id, or a refusal code."""

    job_id: str
    code: int = 0


class QueueProtocol(ABC):
    """One protocol's scripts, keys, argument builders and reply readers."""

    name: ClassVar[str]
    attempts_field: ClassVar[str] = "atm"  # the hash field a sweep's reclaim increments (race counters)
    finish_attempts_field: ClassVar[str] = "atm"  # the hash field a finish increments
    # Every sweep call sets the throttle key (an interval of 0 is refused): a caller that wants
    # each call to sweep deletes ``keys.stalled_check`` before it.
    sweep_throttled: ClassVar[bool] = False
    sweep_variants: ClassVar[tuple[str, ...] | None] = None  # the sweep.py variants it has; None: all
    # The protocol's own sweep step also spreads a pass over calls (sliced_sweep); else the
    # sliced script of lua/ is its sliced sweep.
    sliced_sweep_own: ClassVar[bool] = False

    @abstractmethod
    def keys(self, queue_name: str) -> QueueKeys:
        """The queue's key names (one hash tag, so one cluster slot)."""

    @abstractmethod
    def script_files(self) -> Mapping[str, str]:
        """The file each of STEPS comes from, by step (for meta.json and the report)."""

    def script_sources(self) -> Mapping[str, str]:
        """The full source Redis runs for each of STEPS (lua/'s files, includes expanded)."""
        return {step: script_source(file) for step, file in self.script_files().items()}

    def version(self) -> str | None:
        """The version of the code the scripts come from (None: this repository's)."""
        return None

    def supports_sweep(self, variant: str) -> bool:
        return self.sweep_variants is None or variant in self.sweep_variants

    def deferred_failure(self, fields: Mapping[str, str]) -> str | None:
        """The reason a fetched job must be failed instead of processed (a sweep marked it), or None."""
        return None

    @abstractmethod
    def add_job(
        self, keys: QueueKeys, *, name: str, data: str, job_id: str, priority: int, delay_ms: int, now_ms: int
    ) -> ScriptCall: ...

    @abstractmethod
    def read_added(self, reply: Any, job_id: str) -> Added: ...

    @abstractmethod
    def move_to_active(
        self, keys: QueueKeys, *, token: str, options: WorkerOptions, now_ms: int
    ) -> ScriptCall: ...

    @abstractmethod
    def move_to_finished(
        self,
        keys: QueueKeys,
        job: Job,
        *,
        fetch_next: bool,
        failed: bool,
        value: str,
        options: WorkerOptions,
        now_ms: int,
    ) -> ScriptCall: ...

    def read_fetched(self, reply: Any) -> tuple[str, dict[str, str]] | None:
        """A fetch-step reply ``{fields, id, 0, 0}`` as (id, job fields); None when no job was taken
        (``{0, 0, ...}``, 0 or a code)."""
        if not isinstance(reply, Sequence) or len(reply) < 2 or not isinstance(reply[0], list):
            return None
        flat = [text(v) for v in reply[0]]
        return text(reply[1]), dict(zip(flat[::2], flat[1::2], strict=True))

    @abstractmethod
    def extend_lock(
        self, keys: QueueKeys, job: Job, *, options: WorkerOptions, now_ms: int
    ) -> ScriptCall: ...

    @abstractmethod
    def sweep(self, keys: QueueKeys, *, max_stalled: int, now_ms: int, interval_ms: int) -> ScriptCall: ...

    def sliced_sweep(
        self, keys: QueueKeys, *, max_stalled: int, now_ms: int, interval_ms: int, cut: SweepSlice
    ) -> ScriptCall:
        """One call of the protocol's own sweep spread over calls (``sliced_sweep_own``); a reply
        of three elements means the pass goes on."""
        raise NotImplementedError(f"{self.name} has no sweep of its own spread over calls")

    @abstractmethod
    def read_swept(self, reply: Any) -> tuple[list[str], list[str]]:
        """A sweep's reply as (ids moved to failed, ids moved to wait)."""

    # Staging a sweep's state without running the workers that would make it (the
    # sweep-cost scenarios): what each protocol keeps besides locks and job hashes.

    def sweep_state_keys(self, keys: QueueKeys) -> list[str]:
        """The keys a scenario snapshots once and puts back before every timed sweep."""
        return [keys.active, keys.stalled]

    def reset_sweep_throttles(self, pipe: Any, keys: QueueKeys) -> None:
        """Queue on ``pipe`` the throttle state every timed sweep starts from: none (no throttled no-op)."""
        pipe.delete(keys.stalled_check)

    def leave_stalled(self, pipe: Any, keys: QueueKeys, job_ids: Sequence[str], at_ms: int) -> None:
        """Queue on ``pipe`` what jobs whose locks lapsed (the caller deletes those) before the
        previous sweep left: its marks, and any index the protocol keeps, so the next sweep
        reclaims them. ``job_ids`` oldest lapse first, the last at ``at_ms``."""
        for start in range(0, len(job_ids), STAGE_CHUNK):
            pipe.sadd(keys.stalled, *job_ids[start : start + STAGE_CHUNK])


class EchoMQ(QueueProtocol):
    """The clean-room scripts in lua/, as protocol.md specifies them."""

    name = "echomq"

    def keys(self, queue_name: str) -> QueueKeys:
        return QueueKeys(queue_name)

    def script_files(self) -> Mapping[str, str]:
        return dict(SCRIPT_FILES)

    def add_job(
        self, keys: QueueKeys, *, name: str, data: str, job_id: str, priority: int, delay_ms: int, now_ms: int
    ) -> ScriptCall:
        return ScriptCall(
            "add_job", keys.add_job_keys(), [keys.prefix, job_id, name, data, now_ms, priority, delay_ms]
        )

    def read_added(self, reply: Any, job_id: str) -> Added:
        if isinstance(reply, int) and reply == JOB_EXISTS:
            return Added(job_id, reply)
        return Added(text(reply))

    def move_to_active(
        self, keys: QueueKeys, *, token: str, options: WorkerOptions, now_ms: int
    ) -> ScriptCall:
        return ScriptCall(
            "move_to_active",
            keys.move_to_active_keys(),
            [keys.prefix, now_ms, token, options.lock_ms, options.limiter_max, options.limiter_ms],
        )

    def move_to_finished(
        self,
        keys: QueueKeys,
        job: Job,
        *,
        fetch_next: bool,
        failed: bool,
        value: str,
        options: WorkerOptions,
        now_ms: int,
    ) -> ScriptCall:
        target = "failed" if failed else "completed"
        return ScriptCall(
            "move_to_finished",
            keys.move_to_finished_keys(job.id, target),
            [
                job.id,
                now_ms,
                "failedReason" if failed else "returnvalue",
                value,
                target,
                1 if fetch_next else 0,
                keys.prefix,
                job.token,
                options.lock_ms,
                options.keep,
                options.metrics_minutes,
                options.limiter_max,
                options.limiter_ms,
            ],
        )

    def extend_lock(self, keys: QueueKeys, job: Job, *, options: WorkerOptions, now_ms: int) -> ScriptCall:
        return ScriptCall("extend_lock", keys.extend_lock_keys(job.id), [job.token, options.lock_ms, job.id])

    def sweep(self, keys: QueueKeys, *, max_stalled: int, now_ms: int, interval_ms: int) -> ScriptCall:
        return ScriptCall("sweep", keys.sweep_keys(), [max_stalled, keys.prefix, now_ms, interval_ms])

    def read_swept(self, reply: Any) -> tuple[list[str], list[str]]:
        return [text(i) for i in reply[0]], [text(i) for i in reply[1]]


# Every protocol by name: "module:class", imported on first use: the bullmq package is needed
# only where its protocol runs, and a protocol built on EchoMQ brings no import cycle.
PROTOCOLS: dict[str, str] = {
    "echomq": "bench.protocol.base:EchoMQ",
    "bullmq": "bench.protocol.bullmq:BullMQ",
    "echomq-deadline": "bench.protocol.deadline:EchoMQDeadline",
}
_LOADED: dict[str, QueueProtocol] = {}


def check_protocol_names(names: Sequence[str]) -> None:
    """Every name is a registered protocol; a one-line error naming the choices otherwise."""
    for name in names:
        if name not in PROTOCOLS:
            raise BenchError(f"unknown protocol {name!r}; use one of {', '.join(PROTOCOLS)}")


def protocol_named(name: str) -> QueueProtocol:
    """The protocol ``name``, imported on first use; its package is checked as it loads."""
    if name in _LOADED:
        return _LOADED[name]
    check_protocol_names([name])
    module_name, class_name = PROTOCOLS[name].split(":")
    protocol: QueueProtocol = getattr(importlib.import_module(module_name), class_name)()
    _LOADED[name] = protocol
    return protocol
