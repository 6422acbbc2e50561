"""The closed-loop law (docs/method.md#the-model): the jobs/s a finish-then-fetch row should do,
from its own measured parts. Nothing is fitted: every part is the row's column or meta.json's.

Each worker connection is a customer of a closed loop. An exchange carries
``b = 1 / round_trips_per_job`` jobs; it waits the rtt paid and ``b / c`` of a job's time (a
connection's ``c`` slots hold theirs at once), then queues for the client's CPU and for Redis's.
The client runs on ``m = min(processes, cores - Redis's share)`` cores, one a process at most: a
station of ``m`` servers taken by Seidmann's approximation, a queue of ``D / m`` and a delay of
``D (1 - 1/m)`` (below one core, one slower server: ``D / m``, no delay). Redis is one queue whose
demand is its CPU per job (INFO cpu; on a cluster, where INFO cpu is one node's, or an older run,
commandstats' time inside the commands). Redis's share is the predicted jobs/s times that demand,
and the jobs/s fall as it rises: bisection finds the one share that agrees. Near no ceiling the
jobs/s are ``workers x b / (rtt + job + b x (client + Redis))``; near one, the busier side's.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from urllib.parse import urlsplit

import pandas as pd

from bench.report.columns import clean, load_processes, regime, rtt_paid_ms
from bench.results.meta import RunMeta

# A point the model misses by more than this share is named with the term that disagrees.
MISS = 0.20
TERMS = {"wait": "the rtt paid", "job": "the job time", "client": "the client's CPU", "redis": "Redis's CPU"}
SHARE_TOLERANCE = 1e-9  # bisection stops when Redis's share is known this closely
LEAST_SERVERS = 1e-6  # the client's cores never reach 0: a division stays finite


@dataclass(frozen=True)
class Parts:
    """What one row measured, the model's inputs."""

    workers: int  # worker connections: the loop's customers
    concurrency: float  # jobs in flight a connection
    jobs_per_exchange: float  # 1 / round trips per job
    rtt_ms: float  # the rtt a round trip paid
    job_ms: float  # a job's hold
    client_us: float  # the load generator's CPU per job, all its processes
    processes: int  # Locust processes sharing the client work, one core each at most
    redis_us: float  # Redis's CPU per job
    cores: float = math.inf  # the machine's cores, which the processes share with Redis
    redis_beside: bool = True  # Redis runs on those cores


@dataclass(frozen=True)
class Prediction:
    jobs_per_s: float
    # shares of a predicted exchange's time: the rtt, the job time, at the client, at Redis
    shares: dict[str, float]
    client_cores: float  # the cores the client's processes could use beside Redis

    @property
    def term(self) -> str:
        """The term that takes the most of an exchange's time: the one a miss points at."""
        return max(self.shares, key=lambda k: self.shares[k])


def client_cores(parts: Parts, redis_share: float) -> float:
    """The cores the client's processes can use: one a process, less what Redis takes beside them."""
    left = parts.cores - (redis_share if parts.redis_beside else 0.0)
    return max(LEAST_SERVERS, min(float(max(1, parts.processes)), left))


def _mva(parts: Parts, cores: float) -> Prediction:
    """Mean-value analysis of the loop, one customer added at a time: exact for the delays and
    Redis's queue; the client's ``cores`` servers by Seidmann (a queue of D/m, a delay of D(1 - 1/m))."""
    b = parts.jobs_per_exchange
    rtt = parts.rtt_ms / 1e3
    job = parts.job_ms * b / max(parts.concurrency, 1.0) / 1e3
    client = b * parts.client_us / 1e6
    queued_part = client / cores
    parallel_part = client * max(0.0, 1.0 - 1.0 / cores)  # the other servers: no queue of their own
    redis = b * parts.redis_us / 1e6
    queued_client = queued_redis = 0.0
    rate = at_client = at_redis = cycle = 0.0
    for customers in range(1, max(1, parts.workers) + 1):
        at_client = queued_part * (1 + queued_client)
        at_redis = redis * (1 + queued_redis)
        cycle = rtt + job + parallel_part + at_client + at_redis
        rate = customers / cycle
        queued_client, queued_redis = rate * at_client, rate * at_redis
    shares = {
        "wait": rtt / cycle,
        "job": job / cycle,
        "client": (parallel_part + at_client) / cycle,
        "redis": at_redis / cycle,
    }
    return Prediction(rate * b, shares, cores)


def predict(parts: Parts) -> Prediction:
    """The loop's jobs/s at the one Redis share that agrees with them (bisection on the share)."""
    low, high = 0.0, 1.0  # Redis is one thread: its share of a core is below 1
    while high - low > SHARE_TOLERANCE:
        share = (low + high) / 2
        jobs = _mva(parts, client_cores(parts, share)).jobs_per_s
        if jobs * parts.redis_us / 1e6 > share:
            low = share  # Redis takes more than assumed: the answer lies above
        else:
            high = share
    return _mva(parts, client_cores(parts, (low + high) / 2))


def _number(row: pd.Series, name: str, default: float = math.nan) -> float:
    value = row.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def redis_us_per_job(row: pd.Series, whole_cpu: bool = True) -> float:
    """Redis's µs per job: its CPU over the jobs (INFO cpu, the whole thread's work), else
    commandstats' time inside the commands (a cluster, where INFO cpu is one node's; an older run)."""
    cpu, jobs = _number(row, "redis_cpu_pct"), _number(row, "jobs_per_s")
    if whole_cpu and cpu > 0 and jobs > 0:
        return cpu / 100 * 1e6 / jobs
    inside = _number(row, "server_us_per_job")
    return inside if inside > 0 else math.nan


@dataclass(frozen=True)
class Machine:
    """Where a run's load ran, from meta.json: what a row's parts do not say themselves."""

    processes: int = 1  # the profile's load processes, for a row without its own column
    cores: float = math.inf  # the machine's cores (unknown: no limit but a core a process)
    redis_beside: bool = True  # Redis ran on those cores (the suite's own server, or a loopback URL)
    cluster: bool = False  # several Redis masters: INFO cpu is one node's


def on_this_machine(url: str | None) -> bool:
    """A Redis URL that names this machine (loopback), or none: the suite's own server."""
    host = urlsplit(url).hostname if url else None
    if host is None or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: another machine, as far as the run can tell


def machine_of(meta: RunMeta) -> Machine:
    stage = meta.profile_resolved.get("finish_fetch")  # its loadgen-processes: 1 when the run does not say
    processes = stage.get("loadgen-processes") if isinstance(stage, dict) else None
    return Machine(
        processes=int(processes) if isinstance(processes, int | float) and processes >= 1 else 1,
        cores=float(meta.cores) if meta.cores else math.inf,
        redis_beside=on_this_machine(meta.redis_url),
        cluster=bool(meta.redis_cluster),
    )


def row_parts(row: pd.Series, rtt_paid: float, processes: int, machine: Machine) -> Parts | None:
    """A row's parts, or None when one is missing (an older run without the column)."""
    trips = _number(row, "round_trips_per_job")
    client = _number(row, "loadgen_cpu_us_per_job")
    redis = redis_us_per_job(row, whole_cpu=not machine.cluster)
    if not (trips > 0 and client > 0 and redis > 0 and math.isfinite(rtt_paid)):
        return None
    return Parts(
        workers=int(_number(row, "workers", 1)),
        concurrency=_number(row, "concurrency", 1.0),
        jobs_per_exchange=1 / trips,
        rtt_ms=rtt_paid,
        job_ms=_number(row, "job_ms", 0.0),
        client_us=client,
        processes=processes,
        redis_us=redis,
        cores=machine.cores,
        redis_beside=machine.redis_beside,
    )


def modelled(frame: pd.DataFrame, machine: Machine) -> pd.DataFrame:
    """The frame with each row's prediction, its error (predicted / measured - 1), the term that
    takes most of a predicted exchange, the client's cores beside Redis, the row's load
    processes, whether the row is clean, and its regime."""
    paid = rtt_paid_ms(frame)
    processes = load_processes(frame, machine.processes)
    rows = [row for _, row in frame.iterrows()]
    parts = [row_parts(r, float(t), int(n), machine) for r, t, n in zip(rows, paid, processes, strict=True)]
    guesses = [predict(p) if p else None for p in parts]
    measured = [_number(row, "jobs_per_s") for row in rows]
    return frame.assign(
        predicted_jobs_per_s=[g.jobs_per_s if g else math.nan for g in guesses],
        model_error=[
            g.jobs_per_s / m - 1 if g and m > 0 else math.nan for g, m in zip(guesses, measured, strict=True)
        ],
        model_term=[g.term if g else "" for g in guesses],
        client_cores=[g.client_cores if g else math.nan for g in guesses],
        load_processes=processes,
        redis_us=[redis_us_per_job(r, whole_cpu=not machine.cluster) for r in rows],
        clean=clean(frame),
        regime=regime(frame),
        rtt_paid_ms=paid,
    )


def misses(table: pd.DataFrame) -> pd.DataFrame:
    """The clean rows the model misses by more than MISS."""
    return table[table["clean"] & (table["model_error"].abs() > MISS)]
