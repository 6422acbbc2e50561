"""The queue audit: every job produced is in exactly one of wait, active, completed, failed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import redis

from bench.errors import first_line
from bench.protocol.connection import primaries
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
    # A cluster master gone or restarted: why, by master; its queues are not audited
    lost_shards: dict[str, str] = field(default_factory=dict)
    queues: int = 1  # queues audited (those on lost shards left out)
    refused: str = ""  # the verdict on queues of a server that refused the run's calls: not audited

    @property
    def ok(self) -> bool:
        lost = self.server_restarted or self.server_unreachable or self.lost_shards or self.refused
        return not (self.missing or self.duplicated or self.unknown or lost)

    @property
    def verdict(self) -> str:
        if self.refused:
            return self.refused
        if self.lost_shards:
            lost = "; ".join(f"shard {m}: {why}" for m, why in sorted(self.lost_shards.items()))
            rest = replace(self, lost_shards={})
            others = f"the other {self.queues} queue(s): {rest.verdict}"
            return f"not audited where data is gone ({lost}); {others}"
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
    found: Counter[tuple[str, str]] = Counter()
    for place in PLACES:  # wait and active are lists, completed and failed sorted sets
        read = queue.client.lrange if place in ("wait", "active") else queue.client.zrange
        found.update((place, _text(job_id)) for job_id in read(queue.keys.key(place), 0, -1))
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


def master_run_ids(client: object) -> dict[str, str]:
    """Each master's run_id (host:port -> run_id); a master that does not answer is left out."""
    found: dict[str, str] = {}
    for name, node in primaries(client):  # type: ignore[arg-type]
        try:
            found[name] = str(node.info("server")["run_id"])
        except redis.RedisError:
            continue
    return found


GONE = ": its data is gone from view"
RESTARTED = "restarted (new run_id): without persistence its data is gone"


def _shard_lost(node: redis.Redis, expected: str | None) -> str:
    """Why a master's data cannot be audited, or "" when it can."""
    try:
        run_id = str(node.info("server")["run_id"])
    except redis.RedisError as exc:
        return f"unreachable ({first_line(exc)}){GONE}"
    if expected is not None and run_id != expected:
        return RESTARTED
    return ""


def audit_queues(
    queues: Sequence[Queue],
    produced: Callable[[Queue], Iterable[str]],
    run_ids: Mapping[str, str],
    home: Mapping[str, str],
) -> AuditResult:
    """Audit every queue of a run, each on its master; the results as one (ids named
    ``<queue>/<id>``). A master that is gone or restarted since ``run_ids`` were read is a
    lost shard: its queues are not audited (their jobs are neither lost nor kept), the others are."""
    nodes = dict(primaries(queues[0].client)) if queues else {}
    lost: dict[str, str] = {}
    for master in sorted({home[q.keys.name] for q in queues}):
        node = nodes.get(master)
        why = _shard_lost(node, run_ids.get(master)) if node is not None else "no longer a master"
        if why:
            lost[master] = why
    if lost and len(nodes) == 1:  # one server: lost as a whole, in the words it always had
        ((where, why),) = lost.items()
        if why == RESTARTED:
            return AuditResult(0, {}, server_restarted=True)
        return AuditResult(0, {}, server_unreachable=f"Redis at {where} {why.removesuffix(GONE)}")
    whole = AuditResult(0, dict.fromkeys(PLACES, 0), lost_shards=lost, queues=0)
    for queue in queues:
        if home[queue.keys.name] in lost:
            continue
        try:
            part = audit(queue, produced(queue))
        except redis.RedisError as exc:  # lost between the check and the read
            lost[home[queue.keys.name]] = f"unreachable ({first_line(exc)}){GONE}"
            continue
        name = queue.keys.name
        whole.produced += part.produced
        whole.queues += 1
        for place, n in part.counts.items():
            whole.counts[place] += n
        for mine, theirs in ((whole.missing, part.missing), (whole.duplicated, part.duplicated),
                             (whole.unknown, part.unknown)):  # fmt: skip
            mine.extend(f"{name}/{job}" for job in theirs)
    return whole
