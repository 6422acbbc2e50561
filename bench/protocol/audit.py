"""The queue audit: every job produced is in exactly one of wait, active, completed, failed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from bench.protocol.queue import Queue, _text

PLACES = ("wait", "active", "completed", "failed")


def server_run_id(queue: Queue) -> str:
    """The server's run_id: it changes when the server restarts (and, without persistence, loses data)."""
    return str(queue.client.info("server")["run_id"])


@dataclass
class AuditResult:
    produced: int
    counts: dict[str, int]  # ids found in each place (a duplicate counts each time)
    missing: list[str] = field(default_factory=list)  # produced, found nowhere
    duplicated: list[str] = field(default_factory=list)  # in two places, or twice in one list
    unknown: list[str] = field(default_factory=list)  # found, never produced
    server_restarted: bool = False
    server_unreachable: str = ""  # why the queue could not be read at all (the server is gone)

    @property
    def ok(self) -> bool:
        lost_server = self.server_restarted or bool(self.server_unreachable)
        return not (self.missing or self.duplicated or self.unknown or lost_server)

    @property
    def verdict(self) -> str:
        if self.server_unreachable:
            return f"not audited: {self.server_unreachable}"
        if self.server_restarted:
            return "server restarted: its data is gone, so jobs cannot be counted lost or kept"
        if self.ok:
            return f"ok: {self.produced} jobs, each in exactly one place"
        return (
            f"violations: {len(self.missing)} missing, {len(self.duplicated)} duplicated, "
            f"{len(self.unknown)} unknown of {self.produced} produced"
        )


def placements(queue: Queue) -> Counter[tuple[str, str]]:
    """How many times each (place, id) occurs now."""
    client, keys = queue.client, queue.keys
    found: Counter[tuple[str, str]] = Counter()
    for place, key in (("wait", keys.wait), ("active", keys.active)):
        for job_id in client.lrange(key, 0, -1):
            found[(place, _text(job_id))] += 1
    for place, key in (("completed", keys.completed), ("failed", keys.failed)):
        for member in client.zrange(key, 0, -1):
            found[(place, _text(member))] += 1
    return found


def audit(queue: Queue, produced: Iterable[str], expected_run_id: str | None = None) -> AuditResult:
    """Check every produced id sits in exactly one place. With ``expected_run_id``, a
    server that restarted since is reported as such instead of as lost jobs."""
    produced_ids = set(produced)
    if expected_run_id is not None and server_run_id(queue) != expected_run_id:
        return AuditResult(len(produced_ids), {}, server_restarted=True)
    found = placements(queue)
    per_id: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for (place, job_id), times in found.items():
        per_id[job_id] += times
        counts[place] += times
    return AuditResult(
        produced=len(produced_ids),
        counts={place: counts.get(place, 0) for place in PLACES},
        missing=sorted(produced_ids - set(per_id)),
        duplicated=sorted(j for j, n in per_id.items() if n > 1),
        unknown=sorted(set(per_id) - produced_ids),
    )
