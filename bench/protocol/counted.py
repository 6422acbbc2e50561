"""The calls the instructions stage counts beside the phases: two baselines, and one sweep of
an active list whose every lock lapsed; and the state a queue's phases are counted in.

Each is measured by the caller's ``meter(action, calls)``; with fixed inputs (Inputs.fixed) the
same calls carry the same bytes and cost the same instructions run after run.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, replace
from typing import TypeVar

from bench.errors import BenchError
from bench.protocol.base import STAGE_CHUNK, QueueProtocol, protocol_named
from bench.protocol.connection import Client
from bench.protocol.keys import QueueKeys
from bench.protocol.phases import FIXED_START_MS, Inputs, Meter, keys_added
from bench.protocol.queue import Producer, Queue, Worker, WorkerOptions
from bench.protocol.sweep import AtomicSweeper, SweepResult, make_sweeper

T = TypeVar("T")

PING = "PING"
RETURN_ONE = "EVALSHA return 1"
# The same script call with ten redis.call's in it: against RETURN_ONE, the price of one redis.call.
# EXISTS of a missing key, its key named in the script (no KEYS to pass), so little else differs.
TEN_CALLS = "EVALSHA 10 redis.call EXISTS"
TEN_CALLS_N = 10
TEN_CALLS_SCRIPT = "\n".join(["redis.call('EXISTS', 'emq-price-of-a-call')"] * TEN_CALLS_N) + "\nreturn 1"
BASELINES = (PING, RETURN_ONE, TEN_CALLS)
# High, so every reclaim takes the same path (to wait), as in the sweep stage.
SWEEP_MAX_STALLED = 1_000_000_000
LOCK_MS = 24 * 3600 * 1000  # no lock lapses by itself while a sweep is staged


def baselines(client: Client, calls: int, meter: Meter[T]) -> list[tuple[str, T]]:
    """A PING, an EVALSHA of a script that only returns, and one that runs ten redis.call's
    first: what any command and any script call cost Redis before their own work, and what a
    redis.call adds to a script."""
    sha = client.script_load("return 1")
    ten = client.script_load(TEN_CALLS_SCRIPT)
    return [
        (PING, meter(client.ping, calls)),
        (RETURN_ONE, meter(lambda: client.evalsha(sha, 0), calls)),
        (TEN_CALLS, meter(lambda: client.evalsha(ten, 0), calls)),
    ]


def stalled_sweep(
    client: Client, protocol: str | QueueProtocol, variant: str, size: int, meter: Meter[T], inputs: Inputs
) -> T:
    """One sweep by ``variant`` of ``size`` active jobs whose locks all lapsed after the previous
    sweep marked them, measured by ``meter(sweep, 1)``; a sliced sweep calls until its pass is
    done, with no time budget (a budget would end its calls by the clock, not by the ids).
    Every id must come back reclaimed."""
    queue = Queue.open(client, inputs.queue_name, protocol=protocol, clock=inputs.clock)
    try:
        Producer(queue, name="sweep").add_batch(size, enqueued_us=inputs.clock() * 1000)
        worker = Worker(queue, "two_call", options=WorkerOptions(lock_ms=LOCK_MS), worker_id=inputs.worker_id)
        ids = [job.id for job in worker.fetch_batch(size)]  # the oldest fetch first
        if len(ids) != size:
            raise BenchError(f"fetched {len(ids)} of {size} jobs while staging a sweep")
        AtomicSweeper(queue, max_stalled=SWEEP_MAX_STALLED).sweep()  # the mark pass: every lock alive
        pipe = client.pipeline(transaction=False)
        pipe.unlink(*(queue.keys.lock(job_id) for job_id in ids))
        queue.protocol.leave_stalled(pipe, queue.keys, ids, inputs.clock() - 1)
        queue.protocol.reset_sweep_throttles(pipe, queue.keys)
        pipe.execute()
        sweeper = make_sweeper(variant, queue, max_stalled=SWEEP_MAX_STALLED, budget_us=0)
        swept: list[SweepResult] = []
        measured = meter(lambda: swept.append(sweeper.sweep()), 1)
        reclaimed = sum(len(result.moved) + len(result.failed) for result in swept)
        if reclaimed != size:
            raise BenchError(f"the {variant} sweep reclaimed {reclaimed} of {size} stalled jobs")
        return measured
    finally:
        queue.delete()


# The state a queue's phases are counted in. Each size sits inside one size class of every table
# the phases grow, so a call costs the same whether a step is counted over N calls or 2N: measured
# on a queue that starts empty, a fused job's count over 100 calls was 5.3% above its count over
# 200 (the completed set a listpack, each insert a scan of it, until it turned a skiplist at 128).
COMPLETED = 10_000  # a skiplist, its table sized for 16,384: room for the phases' finishes, 2 x (lead + 2N)
EVENTS = 10_000  # the events stream at its cap (the scripts' XADD MAXLEN ~ 10000): trimmed as it grows
LAST_ID = 1_000_000  # the id counter and the last event's sequence: every id the phases make has 7 digits
FILLER_TTL_MS = LOCK_MS  # the other keys' TTL, past any count (the counted server's clock stands still)


@dataclass(frozen=True)
class QueueState:
    """What a queue holds as its counted phases begin: nothing waiting or active (each phase brings
    its own jobs), ``completed`` finished jobs in the completed set (their hashes left out: no phase
    reads them), the events stream at ``events`` entries, job ids and event sequences past
    ``last_id``, and ``other_keys`` keys with a TTL beside it."""

    completed: int = COMPLETED
    events: int = EVENTS
    last_id: int = LAST_ID
    other_keys: int = 0

    @classmethod
    def for_phases(cls, calls: int, lead: int) -> QueueState:
        """The state for phases of up to ``calls`` calls after ``lead`` unmetered ones: the other
        keys size Redis's key tables (the keyspace's and the expiry times') for every key those
        phases hold at once without their doubling: a power of two at least twice as many, and
        one: the last of them doubles the tables once, before the count."""
        size = 1
        while size < 2 * keys_added(calls, lead):
            size *= 2
        return cls(other_keys=size + 1)

    def sizes(self) -> dict[str, int]:
        """The state's sizes, by name: meta.json's record of it."""
        return {"wait": 0, "active": 0, **asdict(self)}


def _keys(protocol: str | QueueProtocol, queue_name: str) -> QueueKeys:
    return (protocol_named(protocol) if isinstance(protocol, str) else protocol).keys(queue_name)


@dataclass
class QueueStaging:
    """Brings queues to a QueueState. The completed set and the events stream are built once a
    size (by ZADD and XADD on a scratch key) and copied into each queue by RESTORE, on any server
    of the same binary; RESTORE sizes a sorted set's table for its members, so no table is halfway
    through a resize as a count begins."""

    state: QueueState
    _dumps: dict[tuple[str, int], bytes] = field(default_factory=dict)
    # servers counting at once (the instructions stage's scopes) build each dump once between them
    _building: threading.Lock = field(default_factory=threading.Lock)

    def at(self, completed: int) -> QueueStaging:
        """The same staging with ``completed`` jobs in the completed set, sharing what is built."""
        return QueueStaging(replace(self.state, completed=completed), self._dumps, self._building)

    def prepare(self, client: Client, protocol: str | QueueProtocol, queue_name: str) -> None:
        """The completed set and the events stream built, if they are not yet (on scratch keys
        of the queue, removed): a caller that counts from a server's start builds them first."""
        keys = _keys(protocol, queue_name)
        self._dump(client, "completed", keys)
        self._dump(client, "events", keys)

    def stage(self, client: Client, protocol: str | QueueProtocol, queue_name: str) -> None:
        """``queue_name``'s keys brought to the state; the queue must hold no keys yet."""
        keys = _keys(protocol, queue_name)
        fillers = [keys.key(f"filler:{i}") for i in range(self.state.other_keys)]
        pipe = client.pipeline(transaction=False)
        for what, key in (("completed", keys.completed), ("events", keys.events)):
            dump = self._dump(client, what, keys)  # built on its own pipeline, at first use
            if dump is not None:  # None: the state has none
                pipe.restore(key, 0, dump)
        pipe.set(keys.id_counter, self.state.last_id)
        for filler in fillers:
            pipe.set(filler, 1, px=FILLER_TTL_MS)
        # The last filler doubled the key tables; each lookup moves their rehash a step on.
        for start in range(0, len(fillers), STAGE_CHUNK):
            pipe.exists(*fillers[start : start + STAGE_CHUNK])
        pipe.execute()

    def _dump(self, client: Client, what: str, keys: QueueKeys) -> bytes | None:
        """The DUMP of the state's completed set or events stream, built on first use; None when
        the state holds none."""
        size = self.state.completed if what == "completed" else self.state.events
        if not size:
            return None
        with self._building:
            if (what, size) not in self._dumps:
                scratch = keys.key(f"state-{what}")
                first = self.state.last_id - size + 1
                pipe = client.pipeline(transaction=False)
                if what == "completed":  # each finished a millisecond apart, before the fixed clock starts
                    for start in range(0, size, STAGE_CHUNK):
                        chunk = range(start, min(size, start + STAGE_CHUNK))
                        pipe.zadd(scratch, {str(first + i): FIXED_START_MS - size + i for i in chunk})
                else:  # ids at the fixed clock's instant, as the counted server's stand-still clock makes
                    for seq in range(first, self.state.last_id + 1):
                        pipe.xadd(
                            scratch, {"event": "completed", "jobId": str(seq)}, id=f"{FIXED_START_MS}-{seq}"
                        )
                pipe.dump(scratch)
                pipe.delete(scratch)
                self._dumps[what, size] = pipe.execute()[-2]
        return self._dumps[what, size]
