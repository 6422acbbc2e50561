"""The closed-loop law: the jobs/s a finish-then-fetch row should do, from its own measured parts.

Each worker connection is one customer of a closed loop. An exchange carries
``b = 1 / round_trips_per_job`` jobs. It waits the rtt the row paid (a delay every
connection pays at once), then queues for the client's CPU (one queue a Locust process)
and for Redis (one queue). Mean-value analysis of that loop, customer by customer, gives
the exchanges a second; times ``b``, the jobs a second. Near no ceiling it is
``workers x b / (rtt + b x (client + Redis))``; near one it tends to ``1e6 / µs per job``
of the busier side, so both ceilings are inside it.

The parts are the row's columns, nothing fitted: slots (workers x concurrency), round trips
a job, the rtt paid, the client's CPU per job (over its processes), and Redis's µs per job (commandstats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from bench.report.columns import clean, regime, rtt_paid_ms
from bench.results.meta import RunMeta

# A point the model misses by more than this share is named with the term that disagrees.
MISS = 0.20
TERMS = {"wait": "the rtt paid", "client": "the client's CPU", "redis": "Redis's CPU"}


@dataclass(frozen=True)
class Parts:
    """What one row measured, the model's inputs."""

    workers: int  # worker connections: the loop's customers
    concurrency: float  # jobs in flight a connection
    jobs_per_exchange: float  # 1 / round trips per job
    rtt_ms: float  # the rtt a round trip paid
    job_ms: float  # a job's hold
    client_us: float  # the load generator's CPU per job
    processes: int  # Locust processes sharing the client work
    redis_us: float  # Redis's CPU per job


@dataclass(frozen=True)
class Prediction:
    jobs_per_s: float
    # shares of a predicted exchange's time: waiting the rtt, at the client, at Redis
    shares: dict[str, float]

    @property
    def term(self) -> str:
        """The term that takes the most of an exchange's time: the one a miss points at."""
        return max(self.shares, key=lambda k: self.shares[k])


def predict(parts: Parts) -> Prediction:
    """Exact mean-value analysis of the closed loop, one customer added at a time."""
    b = parts.jobs_per_exchange
    processes = max(1, parts.processes)
    # a held job delays its own slot; a connection's slots overlap, so an exchange waits b/c of it
    delay = (parts.rtt_ms + parts.job_ms * b / max(parts.concurrency, 1.0)) / 1e3
    client = b * parts.client_us / 1e6 / processes  # each process sees 1/processes of the exchanges
    redis = b * parts.redis_us / 1e6
    queued_client = queued_redis = 0.0
    rate = at_client = at_redis = 0.0
    for customers in range(1, max(1, parts.workers) + 1):
        at_client = client * (1 + queued_client)
        at_redis = redis * (1 + queued_redis)
        rate = customers / (delay + processes * at_client + at_redis)
        queued_client, queued_redis = rate * at_client, rate * at_redis
    total = delay + processes * at_client + at_redis
    shares = {"wait": delay / total, "client": processes * at_client / total, "redis": at_redis / total}
    return Prediction(rate * b, shares)


def _number(row: pd.Series, name: str, default: float = math.nan) -> float:
    value = row.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def redis_us_per_job(row: pd.Series) -> float:
    """Redis's µs per job: commandstats' time inside the commands (the Redis ceiling's term), else
    its CPU share over the jobs (an older run without commandstats)."""
    inside = _number(row, "server_us_per_job")
    if inside > 0:
        return inside
    cpu, jobs = _number(row, "redis_cpu_pct"), _number(row, "jobs_per_s")
    return cpu / 100 * 1e6 / jobs if cpu > 0 and jobs > 0 else math.nan


def row_parts(row: pd.Series, rtt_paid: float, processes: int = 1) -> Parts | None:
    """A row's parts, or None when one is missing (an older run without the column)."""
    trips = _number(row, "round_trips_per_job")
    client = _number(row, "loadgen_cpu_us_per_job")
    redis = redis_us_per_job(row)
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
    )


def processes_of(meta: RunMeta) -> int:
    """The run's Locust processes (loadgen-processes), 1 when the run does not say."""
    stage = meta.profile_resolved.get("finish_fetch")
    value = stage.get("loadgen-processes") if isinstance(stage, dict) else None
    return int(value) if isinstance(value, int | float) and value >= 1 else 1


def modelled(frame: pd.DataFrame, processes: int = 1) -> pd.DataFrame:
    """The frame with each row's prediction, its error (predicted / measured - 1), the term that
    takes most of a predicted exchange, whether the row is clean, and its regime."""
    out = frame.copy()
    paid = rtt_paid_ms(frame)
    predicted, error, term = [], [], []
    for position, (_, row) in enumerate(frame.iterrows()):
        parts = row_parts(row, float(paid.iloc[position]), processes)
        guess = predict(parts) if parts else None
        measured = _number(row, "jobs_per_s")
        predicted.append(guess.jobs_per_s if guess else math.nan)
        error.append(guess.jobs_per_s / measured - 1 if guess and measured > 0 else math.nan)
        term.append(guess.term if guess else "")
    out["predicted_jobs_per_s"] = predicted
    out["model_error"] = error
    out["model_term"] = term
    out["clean"] = clean(frame)
    out["regime"] = regime(frame)
    out["rtt_paid_ms"] = paid
    return out


def misses(table: pd.DataFrame) -> pd.DataFrame:
    """The clean rows the model misses by more than MISS."""
    return table[table["clean"] & (table["model_error"].abs() > MISS)]
