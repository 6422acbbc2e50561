"""A test's queues under Locust, on the master (or the only process): a fresh set at its start,
their audit when it ends, deleted after its summary is written."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Any

import redis
from locust.env import Environment

from bench.errors import first_line
from bench.harness.run_keys import left_line
from bench.protocol.audit import audit_queues, master_run_ids
from bench.protocol.connection import Client, redact_url
from bench.protocol.queue import Queue
from bench.protocol.spread import homes, queue_names
from bench.results.files import write_meta
from bench.results.meta import KeyRecord, KeysLeft, RunMeta, read_meta
from bench.stages.finish_fetch.in_locust.current import Current
from bench.stages.finish_fetch.in_locust.options import default_summary, keep_queue, summary_path
from bench.stages.finish_fetch.loadstats import issued_job_ids
from bench.stages.finish_fetch.seats import reset_started
from bench.stages.finish_fetch.summary import SummaryAudit, refused_verdict
from bench.stages.finish_fetch.trial_settings import TrialSettings

log = logging.getLogger(__name__)

FRESH_QUEUE_TRIES = 100  # <queue>, <queue>-2, ... <queue>-100: the names a test may start on


def _own_folder(options: Any) -> Path | None:
    """The test's run folder when it is one of its own (a direct Locust run that named no summary
    place), else None: a trial of `echomq-bench run` names its summary, in the run's folder."""
    own = default_summary()
    return own.parent if own is not None and summary_path(options) == own else None


def _candidates(queue: str) -> list[str]:
    return [queue, *(f"{queue}-{n}" for n in range(2, FRESH_QUEUE_TRIES + 1))]


class TrialQueues:
    """The queues of the test running now, their masters and the masters' run ids."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.client: Client | None = None
        self.home: dict[str, str] = {}  # each of the test's queues: its master
        self.run_ids: dict[str, str] = {}  # each master's at the test's start, for the audit
        self.queues: list[Queue] = []  # the test's queues, opened at its start

    def open(self, client: Client, trial: TrialSettings) -> TrialSettings:
        """The test's queues, on a fresh name, opened (scripts loaded on every master: after a
        master is lost, the rest audit); the settings with that name. A server away leaves them
        unopened: the users' start says why."""
        self.client = client
        self.home, self.run_ids, self.queues = {}, {}, []
        with contextlib.suppress(redis.RedisError):
            trial = self._on_fresh_queue(trial)
            names = queue_names(client, trial.queue, trial.queues)
            self.home = homes(client, names)
            self.run_ids = master_run_ids(client)
            self.queues = [Queue.open(client, n, protocol=trial.protocol) for n in names]
            self._record_keys()
            reset_started(self.queues[0])  # the test's first key
        return trial

    def _record_keys(self) -> None:
        """A direct Locust test records its queues' key prefixes in its own run folder before the
        first key is written, so `echomq-bench clean` finds them if they outlive it. Under
        `echomq-bench run` the run recorded its scope, which every queue name here starts with."""
        if (folder := _own_folder(self.environment.parsed_options)) is not None:
            prefixes = [queue.keys.prefix for queue in self.queues]
            record = KeyRecord(url=redact_url(Current.redis.url), own_server=False, prefixes=prefixes)
            write_meta(folder, RunMeta, run_id=folder.name, profile="locust", complete=False, keys=record)

    def _on_fresh_queue(self, trial: TrialSettings) -> TrialSettings:
        """The test on the first of <queue>, <queue>-2, ... none of whose queues holds a key, so its
        audit counts its own jobs only. Every process's users read the name: this one's from
        Current, a worker's from the options the spawn message carries (sent after test_start)."""
        assert self.client is not None
        name = next((n for n in _candidates(trial.queue) if not self._holds_keys(n, trial)), None)
        if name is None:
            last = _candidates(trial.queue)[-1]
            log.error("echomq: queues %s to %s all hold keys: the audit counts theirs too; name another "
                      "with --queue, or delete them", trial.queue, last)  # fmt: skip
        elif name != trial.queue:
            log.info(
                "echomq: queue %s holds keys of an earlier test: this test runs on %s", trial.queue, name
            )
            trial = dataclasses.replace(trial, queue=name)
            Current.trial = trial
            if (options := self.environment.parsed_options) is not None:
                options.Queue = name
        return trial

    def _holds_keys(self, name: str, trial: TrialSettings) -> bool:
        assert self.client is not None
        queues = (
            Queue.open(self.client, q, protocol=trial.protocol)
            for q in queue_names(self.client, name, trial.queues)
        )
        return any(next(queue.key_names(), None) is not None for queue in queues)

    def delete(self) -> None:
        """The test's queue keys deleted once its summary is written, unless --keep-queue (in
        distributed mode the workers' users have stopped: the master waited for their reports)."""
        if keep_queue(self.environment.parsed_options) or not self.queues:
            return
        try:
            deleted = sum(queue.delete() for queue in self.queues)
        except redis.RedisError as exc:
            log.error("echomq: the test's queue keys could not be deleted: %s", first_line(exc))
            folder = _own_folder(self.environment.parsed_options)
            record = read_meta(folder).keys if folder is not None else None
            if folder is not None and record is not None:
                line = left_line(folder, record, None)
                write_meta(folder, RunMeta, keys_left=KeysLeft(keys=None, line=line))
                log.error("echomq: %s", line)
            return
        names = ", ".join(q.keys.name for q in self.queues)
        log.info("echomq: deleted the test's %d keys (queue %s); --keep-queue keeps them", deleted, names)

    def audit(self, refused: str | None) -> SummaryAudit:
        """The audit of every queue as the summary holds it; a restart or an absent server (or
        master) says so, and a test a refusal ended (``refused``, its kind) is not audited."""
        assert self.client is not None and Current.trial is not None
        if refused is not None:
            return SummaryAudit(False, refused_verdict(refused))
        try:
            if not self.queues:
                raise redis.ConnectionError("the queues were never opened")
            result = audit_queues(self.queues, issued_job_ids, self.run_ids, self.home)
        except redis.RedisError as exc:
            return SummaryAudit(False, f"not audited: Redis unreachable ({first_line(exc)})")
        return SummaryAudit(result.ok, result.verdict, result.counts)
