"""A bullmq_worker run as its CSV row (bullmq_worker.csv)."""

from __future__ import annotations

from bench.errors import BenchError
from bench.harness.machine import is_saturated
from bench.results.bullmq_worker import BullmqWorkerRow
from bench.stages.bullmq_worker.plan import Point
from bench.stages.bullmq_worker.worker_process import WorkerProcessResult

PROTOCOL = "bullmq"


def row_of(
    run: Point, rep: int, result: WorkerProcessResult, job_ms: float, audit_ok: bool, prefilled: int
) -> BullmqWorkerRow:
    jobs = result.jobs
    if jobs <= 0 or result.duration_s <= 0:  # a window of one job the last completions overtook
        raise BenchError(
            f"{run.label}: its window counted {jobs} jobs in {result.duration_s:.3f}s; raise "
            "bullmq-worker-jobs so the window holds more than the last few"
        )
    return BullmqWorkerRow(
        protocol=PROTOCOL,
        driver=run.driver,
        concurrency=run.concurrency,
        job_ms=job_ms,
        rep=rep,
        jobs=jobs,
        duration_s=round(result.duration_s, 4),
        jobs_per_s=round(jobs / result.duration_s, 1),
        client_cpu_us_per_job=round(result.cpu_s * 1e6 / jobs, 1),
        redis_calls_per_job=round(sum(result.calls.values()) / jobs, 4),
        redis_us_per_job=round(sum(result.usec.values()) / jobs, 2),
        audit_ok=audit_ok,
        prefilled_jobs=prefilled,
        saturated=is_saturated(100.0 * result.cpu_s / result.duration_s),
        redis_cpu_pct=round(100.0 * result.redis_cpu_s / result.duration_s, 1),
    )
