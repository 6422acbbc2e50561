"""BullMQ as a protocol under test: the bullmq package's own Lua, KEYS and ARGV, read from the package.

Nothing of BullMQ is copied here. The scripts are the installed package's, and each
call is built by BullMQ's own synchronous ``Scripts`` methods (addStandardJob,
moveToCompletedArgs / moveToFailedArgs, extendLock, moveStalledJobsToWait), whose
registered script is a stand-in that hands the call back instead of sending it: the
suite sends it on its own counted, never-retrying client. ``moveToActive`` is async-only
in the package, so its KEYS come from ``Scripts.getKeys`` and its ARGV are packed as the
package packs them (a test checks them against its coroutine).

The hot calls (add, fetch, finish) are built from templates (``template.py``), keyed on
everything that enters them besides their slots, so a call costs the client about what
echomq's does and its bytes are the builder's (tests build hundreds both ways).
The options are a BullMQ Worker's defaults; keys are ``bull:{q}:...``, one cluster slot a queue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, ClassVar

import msgpack

from bench.errors import BenchError
from bench.protocol.base import Added, Job, QueueProtocol, ScriptCall, WorkerOptions, text
from bench.protocol.bullmq_package import require_bullmq
from bench.protocol.keys import BULLMQ_NAMESPACE, FETCH_SUFFIXES, QueueKeys
from bench.protocol.template import CallTemplate, derive

VERSION = require_bullmq()  # before importing the package: a wrong version is one line, not a traceback

from bullmq.job import Job as BullJob  # noqa: E402
from bullmq.redis_connection import SCRIPT_DEFINITIONS, loadScript  # noqa: E402
from bullmq.scripts import Scripts  # noqa: E402

NAMESPACE = BULLMQ_NAMESPACE
# A BullMQ Worker's stalledInterval default: the PX of its sweep's throttle key.
STALLED_INTERVAL_MS = 30_000

# Each protocol step, by the name BullMQ's Scripts registers its script under.
BULLMQ_SCRIPTS: dict[str, str] = {
    "add_job": "addStandardJob",
    "move_to_active": "moveToActive",
    "move_to_finished": "moveToFinished",
    "sweep": "moveStalledJobsToWait",
    "extend_lock": "extendLock",
}


# The job hash fields BullJob.fromJSON turns into what moveToFinishedArgs packs besides the
# token (attempts and the parent options from opts, attemptsMade from atm): a finish
# template is keyed on their values; every other field (data, times, counters) enters no call.
FINISH_JOB_FIELDS = ("opts", "attemptsMade", "atm")
TEMPLATES_MAX = 1024  # templates kept a protocol, at most: past it, all are built again

# Each slot's two sentinels (template.derive): the second set longer, so a length header that
# moves with a value (a str past 31 bytes) is caught. None collides with a queue's constants.
SENTINEL_IDS = ("tmpl-id-1", "tmpl-id-second-sentinel-longer-than-31-bytes")
SENTINEL_TOKENS = ("tmpl-token-1", "tmpl-token-second-sentinel-longer-than-31-bytes:7")
SENTINEL_STAMPS = (0x5EED_0000_0001, 0x7EED_0000_0000_0002)
SENTINEL_DATA = ('{"tmpl":"data-1"}', '{"tmpl":"data-second-sentinel-longer-than-31-bytes"}')
# The slots of each call shape, in the order a fill's values come.
ADD_ID, ADD_STAMP, ADD_DATA = 0, 1, 2
FETCH_TOKEN, FETCH_STAMP = 0, 1
FINISH_ID, FINISH_TOKEN, FINISH_STAMP = 0, 1, 2
# moveToFinished's ARGV[2], the timestamp its builder reads from the clock itself.
FINISH_STAMP_ARG = 1


def _capture(step: str) -> Callable[..., ScriptCall]:
    def call(keys: Any = None, args: Any = None, client: Any = None) -> ScriptCall:
        return ScriptCall(step, list(keys), list(args))

    return call


class _Captured(dict[str, Callable[..., ScriptCall]]):
    """Stands in for the scripts a Scripts object calls: each returns the ScriptCall it was given."""

    def __missing__(self, name: str) -> Callable[..., ScriptCall]:
        raise BenchError(f"the bullmq protocol does not send BullMQ's {name} script")


def _limiter(limiter_max: int, limiter_ms: int) -> dict[str, int] | None:
    return {"max": limiter_max, "duration": limiter_ms} if limiter_max else None


def keep_jobs(keep: int) -> bool | int:
    """WorkerOptions.keep as BullMQ's removeOnComplete: -1 keep all (unset), 0 remove, N keep N."""
    if keep < 0:
        return False
    return True if keep == 0 else keep


class BullMQ(QueueProtocol):
    name = "bullmq"
    attempts_field = "stc"  # the sweep counts stalls in stc; a finish counts attempts in atm
    finish_attempts_field = "atm"
    sweep_throttled = True  # every sweep sets stalled-check with PX; an interval of 0 is an error
    sweep_variants: ClassVar[tuple[str, ...] | None] = ("atomic",)  # BullMQ has one sweep

    def __init__(self) -> None:
        self._commands = _Captured({name: _capture(step) for step, name in BULLMQ_SCRIPTS.items()})
        self._scripts: dict[str, Any] = {}
        self._workers: dict[tuple[Any, ...], SimpleNamespace] = {}
        self._templates: dict[tuple[Any, ...], CallTemplate] = {}
        self._compact: tuple[str | None, str] = (None, "")  # the last job data, and the package's JSON of it

    def version(self) -> str:
        return VERSION

    def keys(self, queue_name: str) -> QueueKeys:
        return QueueKeys(queue_name, namespace=NAMESPACE)

    def script_files(self) -> Mapping[str, str]:
        return {step: SCRIPT_DEFINITIONS[name] for step, name in BULLMQ_SCRIPTS.items()}

    def script_sources(self) -> Mapping[str, str]:
        return {step: loadScript(file) for step, file in self.script_files().items()}

    def scripts_for(self, keys: QueueKeys) -> Any:
        """BullMQ's Scripts for the queue, on the capturing stand-in (one per queue, kept)."""
        if (found := self._scripts.get(keys.prefix)) is None:
            found = Scripts(NAMESPACE, keys.tag, SimpleNamespace(conn=None, commands=self._commands))
            if found.keys[""] != keys.prefix:
                raise BenchError(f"BullMQ names the queue's keys {found.keys['']}..., not {keys.prefix}...")
            self._scripts[keys.prefix] = found
        return found

    def _worker(self, keys: QueueKeys, options: WorkerOptions) -> SimpleNamespace:
        """A stand-in for the Worker a fetched job belongs to: moveToFinishedArgs reads its opts."""
        key = (keys.tag, options.lock_ms, options.limiter_max, options.limiter_ms, options.metrics_minutes)
        if (found := self._workers.get(key)) is None:
            opts: dict[str, Any] = {"lockDuration": options.lock_ms}
            opts["limiter"] = _limiter(options.limiter_max, options.limiter_ms)
            if options.metrics_minutes:
                opts["metrics"] = {"maxDataPoints": options.metrics_minutes}
            found = SimpleNamespace(backend=None, qualifiedName=keys.prefix[:-1], opts=opts)
            self._workers[key] = found
        return found

    # The package's own builders, one call each: what a template is derived from and checked
    # against (tests build hundreds both ways). ``stamp`` replaces the job's own timestamp.

    def package_add_job(
        self, keys: QueueKeys, *, name: str, data: str, job_id: str, stamp: int | None = None
    ) -> ScriptCall:
        """addStandardJob as the package builds it: the job made as Queue.add makes it."""
        opts = {"jobId": job_id} if job_id else {}
        # what a Job reads of its queue when it is made: no backend is used by the builders
        producer = SimpleNamespace(backend=None, qualifiedName=keys.prefix[:-1], opts={})
        job = BullJob(producer, name, json.loads(data), opts)
        if stamp is not None:
            job.timestamp = stamp
        call: ScriptCall = self.scripts_for(keys).addStandardJob(job, job.timestamp)
        return call

    def package_move_to_active(
        self, keys: QueueKeys, *, token: str, options: WorkerOptions, now_ms: int
    ) -> ScriptCall:
        """moveToActive's KEYS from the package, its ARGV packed as Scripts.moveToActive packs them."""
        scripts = self.scripts_for(keys)
        opts: dict[str, Any] = {"token": token, "lockDuration": options.lock_ms}
        opts["limiter"] = _limiter(options.limiter_max, options.limiter_ms)
        packed = msgpack.packb(opts, use_bin_type=True)
        return ScriptCall(
            "move_to_active", scripts.getKeys(list(FETCH_SUFFIXES)), [scripts.keys[""], now_ms, packed]
        )

    def package_move_to_finished(
        self, keys: QueueKeys, job: Job, *, fetch_next: bool, failed: bool, value: str, options: WorkerOptions
    ) -> ScriptCall:
        """moveToCompletedArgs / moveToFailedArgs of the job as BullMQ's Worker makes it from the
        fetched hash; the builder stamps the finish time itself."""
        native = BullJob.fromJSON(self._worker(keys, options), job.fields, job.id)
        scripts = self.scripts_for(keys)
        build = scripts.moveToFailedArgs if failed else scripts.moveToCompletedArgs
        finish_keys, args = build(native, value, keep_jobs(options.keep), job.token, fetchNext=fetch_next)
        return ScriptCall("move_to_finished", list(finish_keys), list(args))

    # The templates: each derived on first use from the package's builder, then kept. The
    # lookup runs once a call; the derivation (two builds) once a key.

    def _kept(self, key: tuple[Any, ...], template: CallTemplate) -> CallTemplate:
        if len(self._templates) >= TEMPLATES_MAX:  # read here, so a test may lower it
            self._templates.clear()  # a caller with ever new values: never a stale one, never a leak
        self._templates[key] = template
        return template

    def add_template(self, keys: QueueKeys, name: str, with_id: bool) -> CallTemplate:
        """addStandardJob's template for jobs named ``name`` (with an id of their own, or not)."""
        key = ("add", keys.prefix, name, with_id)
        if (found := self._templates.get(key)) is not None:
            return found

        def build(values: Sequence[Any]) -> tuple[list[Any], list[Any]]:
            job_id = values[ADD_ID] or ""  # None: the shape without an id of its own
            call = self.package_add_job(
                keys, name=name, data=values[ADD_DATA], job_id=job_id, stamp=values[ADD_STAMP]
            )
            return call.keys, call.args

        def sentinels(i: int) -> tuple[str | None, int, str]:
            return (SENTINEL_IDS[i] if with_id else None, SENTINEL_STAMPS[i], SENTINEL_DATA[i])

        return self._kept(key, derive(build, sentinels(0), sentinels(1), what="BullMQ's addStandardJob"))

    def fetch_template(self, keys: QueueKeys, options: WorkerOptions) -> CallTemplate:
        key = ("fetch", keys.prefix, options.lock_ms, options.limiter_max, options.limiter_ms)
        if (found := self._templates.get(key)) is not None:
            return found

        def build(values: Sequence[Any]) -> tuple[list[Any], list[Any]]:
            call = self.package_move_to_active(
                keys, token=values[FETCH_TOKEN], options=options, now_ms=values[FETCH_STAMP]
            )
            return call.keys, call.args

        first, second = ((SENTINEL_TOKENS[i], SENTINEL_STAMPS[i]) for i in (0, 1))
        return self._kept(key, derive(build, first, second, what="BullMQ's moveToActive"))

    def finish_template(
        self, keys: QueueKeys, job: Job, *, fetch_next: bool, failed: bool, value: str, options: WorkerOptions
    ) -> CallTemplate:
        """moveToFinished's template for jobs like ``job`` (its FINISH_JOB_FIELDS) under ``options``."""
        fields = job.fields
        key = (
            "finish",
            keys.prefix,
            fetch_next,
            failed,
            value,
            options.lock_ms,
            options.keep,
            options.metrics_minutes,
            options.limiter_max,
            options.limiter_ms,
            fields.get("opts"),  # FINISH_JOB_FIELDS, spelled out: this runs once a job
            fields.get("attemptsMade"),
            fields.get("atm"),
        )
        if (found := self._templates.get(key)) is not None:
            return found

        def build(values: Sequence[Any]) -> tuple[list[Any], list[Any]]:
            like = type(job)(values[FINISH_ID], fields, values[FINISH_TOKEN])
            call = self.package_move_to_finished(
                keys, like, fetch_next=fetch_next, failed=failed, value=value, options=options
            )
            return call.keys, call.args

        first, second = ((SENTINEL_IDS[i], SENTINEL_TOKENS[i], SENTINEL_STAMPS[i]) for i in (0, 1))
        fixed = {FINISH_STAMP_ARG: FINISH_STAMP}
        return self._kept(
            key, derive(build, first, second, fixed_args=fixed, what="BullMQ's moveToFinishedArgs")
        )

    # The protocol's steps: a template filled per call.

    def add_job(
        self, keys: QueueKeys, *, name: str, data: str, job_id: str, priority: int, delay_ms: int, now_ms: int
    ) -> ScriptCall:
        # BullMQ's builder stamps the job with the wall clock; the template takes the queue's clock
        # (the wall clock too, but for a fixed one where the same calls must cost the same)
        if priority or delay_ms:
            raise BenchError("the bullmq protocol adds standard jobs only (no priority, no delay)")
        template = self.add_template(keys, name, bool(job_id))
        compact = self._compact
        if compact[0] != data:
            # the package's own JSON of the data, once a payload (a batch shares one)
            made = self.package_add_job(keys, name=name, data=data, job_id=job_id)
            compact = self._compact = (data, made.args[template.arg_of(ADD_DATA)])
        add_keys, args = template.fill((job_id, now_ms, compact[1]))
        return ScriptCall("add_job", add_keys, args)

    def read_added(self, reply: Any, job_id: str) -> Added:
        # An id that exists is returned as itself (a "duplicated" event); negatives are parent errors.
        if isinstance(reply, int) and reply < 0:
            return Added(job_id, reply)
        return Added(text(reply))

    def move_to_active(
        self, keys: QueueKeys, *, token: str, options: WorkerOptions, now_ms: int
    ) -> ScriptCall:
        fetch_keys, args = self.fetch_template(keys, options).fill((token, now_ms))
        return ScriptCall("move_to_active", fetch_keys, args)

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
        # the finish time from the queue's clock, as add_job's stamp
        template = self.finish_template(
            keys, job, fetch_next=fetch_next, failed=failed, value=value, options=options
        )
        finish_keys, args = template.fill((job.id, job.token, now_ms))
        return ScriptCall("move_to_finished", finish_keys, args)

    def extend_lock(self, keys: QueueKeys, job: Job, *, options: WorkerOptions, now_ms: int) -> ScriptCall:
        call: ScriptCall = self.scripts_for(keys).extendLock(job.id, job.token, options.lock_ms)
        return call

    def sweep(self, keys: QueueKeys, *, max_stalled: int, now_ms: int, interval_ms: int) -> ScriptCall:
        # BullMQ stamps the sweep itself; an interval of 0 would make its SET PX fail, so 0 means
        # the Worker's default (callers that want every call to sweep clear the throttle first).
        call: ScriptCall = self.scripts_for(keys).moveStalledJobsToWait(
            max_stalled, interval_ms or STALLED_INTERVAL_MS
        )
        return call

    def read_swept(self, reply: Any) -> tuple[list[str], list[str]]:
        # One flat list of the ids moved to wait; past maxStalledCount a job still goes to wait,
        # marked with defa for the worker that fetches it to fail. Throttled: an empty list.
        return [], [text(i) for i in reply or []]

    def deferred_failure(self, fields: Mapping[str, str]) -> str | None:
        return fields.get("defa") or None
