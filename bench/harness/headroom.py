"""Before a run: does the server have room for what the run keeps? From INFO, no CONFIG.

Every finished job is kept (the protocols' default, BullMQ's too) until the run deletes its queue.
The need is the most jobs any one step holds at once (each step has a queue of its own, deleted
after it) times the bytes a job costs on this server, with a margin; it is checked against the
room under ``maxmemory``, else the machine's available memory when the server runs here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import psutil
import redis

from bench.errors import BenchError
from bench.harness.profile import Profile
from bench.harness.watch_scope import is_loopback
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Producer, Queue, Worker

CALIBRATION_JOBS = 300
# A closed-loop producer keeps a backlog at whatever pace the workers set: the estimate assumes
# this many jobs a second, above one Redis's pace for a job's calls (an upper bound, not a guess).
CLOSED_LOOP_JOBS_PER_S = 20_000.0
STOP_ALLOWANCE_S = 1.0  # producers go on adding while a Locust run starts and stops
MARGIN = 2.0  # allocator overhead, the sweep's snapshot beside its list, a skewed calibration


@dataclass(frozen=True)
class MemoryNeed:
    """The run's estimated need against the server's room, as meta.json records it."""

    bytes_per_job: float
    jobs: int  # the most jobs one step of the run holds at once
    need_bytes: int  # jobs x bytes_per_job x MARGIN
    used_bytes: int  # the server's used_memory before the run
    maxmemory_bytes: int  # 0: none set
    limit_bytes: int | None  # maxmemory, else this machine's available memory, else None: unchecked
    limit: str  # what limit_bytes is: "maxmemory", "available memory (psutil)" or why none

    def as_meta(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.limit_bytes is None else self.limit_bytes - self.used_bytes


def jobs_held(profile: Profile, stages: Sequence[str]) -> int:
    """The most jobs any one step of ``stages`` holds on the server at once. A finish_fetch run's:
    its producers' pace over warm-up, window and stop, and the backlog regime's pre-fill, which
    stays in the wait list."""
    opts = profile.finish_fetch
    rate = opts.target_rate if opts.target_rate > 0 else CLOSED_LOOP_JOBS_PER_S
    prefill = opts.backlog_jobs if opts.regime == "backlog" and opts.target_rate <= 0 else 0
    held = {
        "finish_fetch": [int(rate * (opts.warmup_s + opts.measure_s + STOP_ALLOWANCE_S)) + prefill],
        "bullmq_worker": [profile.bullmq_worker.bullmq_worker_jobs],
        "sweep": [*profile.sweep.sweep_sizes, *profile.sweep.sweep_hazard_sizes],
        "race": [profile.race.race_jobs],
    }
    return max((jobs for stage in stages for jobs in held.get(stage, ())), default=0)


def bytes_per_job(client: Client, payload_bytes: int, protocol: str) -> float:
    """used_memory growth a job, over CALIBRATION_JOBS added, finished and kept on a fresh queue of
    the run's protocol (deleted after)."""
    queue = Queue.open(client, fresh_queue_name("calib"), protocol=protocol)
    try:
        before = int(client.info("memory")["used_memory"])
        Producer(queue).add_batch(CALIBRATION_JOBS, payload_bytes)
        Worker(queue).run(CALIBRATION_JOBS)
        grown = int(client.info("memory")["used_memory"]) - before
    finally:
        queue.delete()
    return max(grown, 0) / CALIBRATION_JOBS


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


def measure_need(
    client: Client, settings: RedisSettings, profile: Profile, stages: Sequence[str], embedded: bool
) -> MemoryNeed:
    """The run's need and the server's room (one server: a cluster's masters are not summed)."""
    # the costliest protocol's job: each protocol's keys and fields differ
    per_job = max(bytes_per_job(client, profile.finish_fetch.payload_bytes, p) for p in profile.protocols)
    jobs = jobs_held(profile, stages)
    memory = client.info("memory")
    used, maxmemory = int(memory["used_memory"]), int(memory.get("maxmemory", 0))
    limit: int | None = maxmemory
    what = "maxmemory"
    if not maxmemory and (embedded or is_loopback(settings)):
        limit, what = used + psutil.virtual_memory().available, "available memory (psutil)"
    elif not maxmemory:
        limit, what = None, "unchecked: no maxmemory on a server of another machine"
    return MemoryNeed(per_job, jobs, int(jobs * per_job * MARGIN), used, maxmemory, limit, what)


def check_headroom(need: MemoryNeed) -> None:
    """One line when the run cannot fit: the figures, and what to do."""
    room = need.headroom_bytes
    if room is None or need.need_bytes <= room:
        return
    if need.maxmemory_bytes:
        room_text = f"maxmemory {_mb(need.maxmemory_bytes)} leaves {_mb(max(room, 0))}: raise it"
    else:
        room_text = f"this machine has {_mb(max(room, 0))} available: free some"
    raise BenchError(f"run needs ~{_mb(need.need_bytes)}, {room_text} or shrink the run")


def memory_now(client: redis.Redis) -> dict[str, int]:
    """The server's used_memory and its peak now (meta.json's memory around each stage)."""
    memory = client.info("memory")
    return {"used_memory": int(memory["used_memory"]), "used_memory_peak": int(memory["used_memory_peak"])}
