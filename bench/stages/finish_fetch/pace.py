"""Which side set a run's pace: the client's CPU, the (simulated) network, the jobs' own processing
time, Redis, or (closed loop) the producers. A pure module: figures in, shares and a name out.

Each side gets the share of its capacity the run used:

- client: the busiest load process's CPU, as a share of the one core it can use;
- network: the share of each worker connection's time its exchanges spent on the simulated wire
  (round trips a job x jobs/s x rtt, per connection; the rtt as the waits measured it, which a busy
  event loop stretches);
- job time: the share of the slots' time spent holding jobs (jobs/s x job-ms per slot);
- redis: Redis's own CPU share (INFO cpu), or, without it, jobs/s over its ceiling;
- producer (closed loop only): the share of the producers' time they did not wait for room in the
  wait list; near 1 they never got ahead, and the workers went as fast as jobs came.

The side with the largest share is named the limit; when no side used even ``SATURATED_SHARE`` of
its capacity, the limit is ``latency``: each connection waits for its exchanges one at a time, and
more jobs in flight would help (on a shared machine, also what other processes take from the run).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaceInputs:
    jobs_per_s: float
    workers: int
    concurrency: int
    job_ms: float
    rtt_ms: float
    round_trips_per_job: float
    busiest_cpu_pct: float
    redis_cpu_pct: float | None
    redis_us_per_job: float | None
    producer_share: float | None = None  # closed loop: pace.producer_share; open loop: None


def redis_ceiling(redis_us_per_job: float | None) -> float | None:
    """The jobs/s Redis could do were its time per job the only cost: 1e6 / its µs per job."""
    return 1e6 / redis_us_per_job if redis_us_per_job else None


def shares(p: PaceInputs) -> dict[str, float]:
    """Each side's used share of its capacity (0 .. about 1)."""
    ceiling = redis_ceiling(p.redis_us_per_job)
    redis = p.redis_cpu_pct / 100.0 if p.redis_cpu_pct is not None else None
    if redis is None:
        redis = p.jobs_per_s / ceiling if ceiling else 0.0
    return {
        "client": p.busiest_cpu_pct / 100.0,
        "network": p.jobs_per_s * p.round_trips_per_job * p.rtt_ms / 1000.0 / max(p.workers, 1),
        "job time": p.jobs_per_s * p.job_ms / 1000.0 / max(p.workers * p.concurrency, 1),
        "redis": redis,
        **({"producer": p.producer_share} if p.producer_share is not None else {}),
    }


def producer_share(wait_us: float, producers: int, window_us: float) -> float:
    """The share of the closed-loop producers' time not spent waiting for room in the wait list."""
    if producers <= 0 or window_us <= 0:
        return 0.0
    return max(0.0, 1.0 - wait_us / (producers * window_us))


SATURATED_SHARE = 0.7  # a side using less than this of its capacity did not set the pace
LATENCY = "latency"


def limit(used: dict[str, float]) -> tuple[str, float]:
    """The side with the largest share (or ``latency`` when none is near its capacity), and
    the largest share."""
    name = max(used, key=lambda side: used[side])
    return (name if used[name] >= SATURATED_SHARE else LATENCY), used[name]


PRODUCER = "producer"
STARVED_FETCHES_PER_JOB = 0.02  # fetches alone a job past which the workers waited for jobs


def closed_limit(used: dict[str, float], fetches_alone_per_job: float) -> tuple[str, float]:
    """``limit``, and in a closed loop the producers first when they set the pace: they hardly
    waited for room (their share at SATURATED_SHARE or more) while the workers' fetches found the
    wait list empty (more than STARVED_FETCHES_PER_JOB alone a job). A starved worker's empty
    fetches keep its connection busy too, so its network share alone would misname the side."""
    share = used.get(PRODUCER)
    if share is not None and share >= SATURATED_SHARE and fetches_alone_per_job > STARVED_FETCHES_PER_JOB:
        return PRODUCER, share
    return limit(used)
