"""The race audit's counting: the final queue state read, and the anomalies in it and in the threads' logs."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from bench.protocol.audit import AuditResult, placements
from bench.protocol.queue import Queue


@dataclass
class Anomalies:
    """The counts of one run, or of several summed."""

    double_recoveries: int = 0
    lost_attempt_updates: int = 0
    requeued_after_finish: int = 0
    audit_violations: int = 0
    # How they were found, and what happened: for the notes, not race.csv.
    double_by_returns: int = 0
    double_by_state: int = 0
    unrecovered: int = 0
    errors: int = 0
    reclaimed: int = 0  # distinct stalled jobs reclaimed
    finished: int = 0  # successful finishes by the workers
    sweeps: int = 0

    def __add__(self, other: Anomalies) -> Anomalies:
        return Anomalies(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self)}
        )

    @property
    def total(self) -> int:
        return (
            self.double_recoveries
            + self.lost_attempt_updates
            + self.requeued_after_finish
            + self.audit_violations
        )


@dataclass
class QueueState:
    """The final state: how often each (place, id) occurs, and each job's attempt counters: ``atm``
    the one a reclaim increments, ``finish_atm`` the one a finish does (None in echomq, where both
    are ``atm``; BullMQ's sweep counts ``stc``, its finish ``atm``)."""

    places: Counter[tuple[str, str]]
    atm: dict[str, int]
    finish_atm: dict[str, int] | None = None


def read_state(queue: Queue, job_ids: Iterable[str]) -> QueueState:
    ids = list(job_ids)
    protocol = queue.protocol
    fields = list(dict.fromkeys([protocol.attempts_field, protocol.finish_attempts_field]))
    pipe = queue.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(queue.keys.job(job_id), fields)
    values = pipe.execute() if ids else []
    counters = [{j: int(v[i] or 0) for j, v in zip(ids, values, strict=True)} for i in range(len(fields))]
    return QueueState(placements(queue), counters[0], counters[1] if len(fields) > 1 else None)


def count_anomalies(
    state: QueueState,
    audited: AuditResult,
    reclaims: Counter[str],
    finishes: Counter[str],
    fetched_finished: int = 0,
) -> Anomalies:
    """The four counts of race.csv from what the threads saw and what the queue holds: ``reclaims``,
    times each id came back from a sweep (moved or failed); ``finishes``, successful worker finishes
    per id; ``fetched_finished``, fetches of a job that already had ``finishedOn``."""
    wait = Counter({job_id: times for (place, job_id), times in state.places.items() if place == "wait"})
    failed = {job_id for place, job_id in state.places if place == "failed"}
    completed = {job_id for place, job_id in state.places if place == "completed"}

    def state_doubles(job_id: str) -> int:
        return max(0, wait[job_id] + (job_id in failed) - 1)

    def requeued(job_id: str) -> int:
        return wait[job_id] if job_id in completed else 0

    seen = set(wait) | failed | completed | set(reclaims)
    by_returns = sum(n - 1 for n in reclaims.values() if n > 1)
    by_state = sum(state_doubles(j) for j in seen)
    touched = set(reclaims) | set(finishes)
    if state.finish_atm is None:  # one counter for both
        lost = sum(max(0, reclaims[j] + finishes[j] - state.atm.get(j, 0)) for j in touched)
    else:
        lost = sum(
            max(0, reclaims[j] - state.atm.get(j, 0)) + max(0, finishes[j] - state.finish_atm.get(j, 0))
            for j in touched
        )
    unexplained = [
        j for j in audited.duplicated if state_doubles(j) == 0 and requeued(j) == 0 and reclaims[j] < 2
    ]
    return Anomalies(
        double_recoveries=max(by_returns, by_state),
        lost_attempt_updates=lost,
        requeued_after_finish=sum(requeued(j) for j in completed) + fetched_finished,
        audit_violations=len(audited.missing) + len(audited.unknown) + len(unexplained),
        double_by_returns=by_returns,
        double_by_state=by_state,
        finished=sum(finishes.values()),
    )
