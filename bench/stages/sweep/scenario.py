"""Sweep scenarios: N jobs in active, a share of them with its lock gone since before
the previous sweep, which marked them: the sweep timed is the one that reclaims them.

The state is built once through the protocol client (addJob, moveToActive, the protocol's sweep
as the mark pass) and kept on the server as a snapshot of the protocol's ``sweep_state_keys``.
Each timed sweep starts from a restore of it (a COPY a key, the locks put back and the stalled
share's removed, ``leave_stalled``'s marks, the throttles reset): milliseconds, where a rebuild
through the protocol costs about 50 µs a job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench.errors import BenchError
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions, _text, now_ms
from bench.protocol.sweep import SLICED_PASS_KEYS, AtomicSweeper, SweepResult

MIXED_EVERY = 10  # mixed: every 10th job of active, 10%, has lost its lock
# Each scenario's stalled ids, as a slice of active's: none, all, or every 10th
SHARES = {"healthy": slice(0), "all_stalled": slice(None), "mixed": slice(None, None, MIXED_EVERY)}
SCENARIOS = tuple(SHARES)
LOCK_MS = 24 * 3600 * 1000  # no lock lapses during a run by itself
LOCK_TOKEN = "sweep-bench"
BUILD_CHUNK = 10_000  # jobs a pipeline while building
KEY_CHUNK = 5_000  # ids a multi-key command while restoring
# The bench's max stalled count: high, so every reclaim takes the same path (to wait),
# however many restores have raised a job's attempts.
BENCH_MAX_STALLED = 1_000_000_000


def stalled_share(ids: Sequence[str], scenario: str) -> list[str]:
    """The ids whose lock is gone in ``scenario``: none, all, or every 10th."""
    if scenario in SHARES:
        return list(ids[SHARES[scenario]])
    raise BenchError(f"unknown sweep scenario {scenario!r}; use one of {', '.join(SCENARIOS)}")


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class ScenarioQueue:
    """A queue holding the snapshot: ``ids`` is active at the snapshot, left to right."""

    queue: Queue
    ids: list[str]

    def _snapshot_of(self, key: str) -> str:
        """Where the snapshot of one of the protocol's sweep state keys is kept."""
        keys = self.queue.keys
        return keys.key("bench:snapshot:" + key.removeprefix(keys.prefix))

    @property
    def _state_keys(self) -> list[str]:
        return self.queue.protocol.sweep_state_keys(self.queue.keys)

    @classmethod
    def attach(cls, queue: Queue) -> ScenarioQueue:
        """The snapshot another process built on this queue."""
        found = cls(queue, [])
        found.ids = [_text(i) for i in queue.client.lrange(found._snapshot_of(queue.keys.active), 0, -1)]
        if not found.ids:
            raise BenchError(f"queue {queue.keys.name} holds no sweep snapshot; build it first")
        return found

    def grow(self, size: int) -> ScenarioQueue:
        """Bring active to ``size`` jobs (adding to what is there), mark them, snapshot."""
        if size < len(self.ids):
            raise BenchError(f"cannot shrink the sweep snapshot from {len(self.ids)} to {size} jobs")
        if self.ids:
            self.restore([], locks=True)
        added = size - len(self.ids)
        for start in range(0, added, BUILD_CHUNK):
            count = min(BUILD_CHUNK, added - start)
            Producer(self.queue, name="sweep").add_batch(count)
            # moveToActive in one pipeline, under a lock that outlives the run
            taken = Worker(self.queue, options=WorkerOptions(lock_ms=LOCK_MS)).fetch_batch(count)
            if len(taken) != count:
                raise BenchError(f"fetched {len(taken)} of {count} jobs while building the sweep snapshot")
        # The mark pass, by the protocol's own sweep: every lock is alive, nothing moves.
        marked = AtomicSweeper(self.queue, max_stalled=BENCH_MAX_STALLED).sweep()
        if marked.moved or marked.failed:
            raise BenchError("the marking sweep reclaimed jobs whose lock should be alive")
        client, keys = self.queue.client, self.queue.keys
        pipe = client.pipeline(transaction=False)
        for key in self._state_keys:
            pipe.delete(self._snapshot_of(key))  # COPY of a missing key leaves the target as it was
            pipe.copy(key, self._snapshot_of(key), replace=True)
        pipe.execute()
        self.ids = [_text(i) for i in client.lrange(keys.active, 0, -1)]
        if len(self.ids) != size:
            raise BenchError(f"built {len(self.ids)} active jobs where {size} were asked")
        return self

    def restore(self, stalled: Sequence[str], locks: bool = True) -> None:
        """Back to the snapshot: wait and failed empty, the sweep state as built, ``stalled`` as a
        crash before the previous (marking) sweep leaves them, no throttle in the way; with
        ``locks``, every lock put back and those of ``stalled`` removed."""
        client, keys, protocol = self.queue.client, self.queue.keys, self.queue.protocol
        pipe = client.pipeline(transaction=False)
        pass_keys = [keys.key(suffix) for suffix in SLICED_PASS_KEYS]
        pipe.delete(keys.wait, keys.failed, keys.paused, *pass_keys)
        for key in self._state_keys:
            pipe.unlink(key)  # an empty snapshot (nothing marked) copies nothing
            pipe.copy(self._snapshot_of(key), key, replace=True)
        if locks:
            for chunk in _chunks(self.ids, KEY_CHUNK):
                pipe.mset({keys.lock(job_id): LOCK_TOKEN for job_id in chunk})
            for chunk in _chunks(stalled, KEY_CHUNK):
                pipe.unlink(*(keys.lock(job_id) for job_id in chunk))
        # Oldest first: active holds the newest fetch on the left, so locks lapse right to left.
        protocol.leave_stalled(pipe, keys, list(reversed(stalled)), now_ms() - 1)
        protocol.reset_sweep_throttles(pipe, keys)
        pipe.execute()

    def check(self, stalled: Sequence[str], result: SweepResult) -> str | None:
        """None when every stalled job is in wait or failed once and out of active, every other job
        in active once and nowhere else, and the reply named the stalled jobs; else what went wrong."""
        client, keys = self.queue.client, self.queue.keys
        placed = Counter(_text(i) for i in client.lrange(keys.wait, 0, -1))
        placed.update(_text(i) for i in client.zrange(keys.failed, 0, -1))
        in_active = Counter(_text(i) for i in client.lrange(keys.active, 0, -1))
        stalled_set = set(stalled)
        problems = {
            "stalled jobs not reclaimed": sum(1 for j in stalled if placed[j] == 0),
            "stalled jobs reclaimed twice": sum(1 for j in stalled if placed[j] > 1),
            "stalled jobs still in active": sum(1 for j in stalled if in_active[j]),
            "live jobs moved or lost": sum(
                1 for j in self.ids if j not in stalled_set and (placed[j] or in_active[j] != 1)
            ),
        }
        if Counter([*result.moved, *result.failed]) != Counter(stalled):
            problems["reply differs from the stalled jobs"] = 1
        found = [f"{count} {what}" for what, count in problems.items() if count]
        return "; ".join(found) if found else None


def stalled_count(size: int, scenario: str) -> int:
    """How many of ``size`` jobs ``scenario`` stalls (stalled_share's length)."""
    return len(stalled_share([""] * size, scenario))
