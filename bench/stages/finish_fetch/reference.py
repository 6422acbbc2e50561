"""The reference: the least client work the suite's builders allow, measured beside Locust and the raw loops.

One flow of control, no threads, greenlets or Locust: the queue is pre-filled with pipelined
addJob batches, then each round sends every in-flight job's calls in one redis-py pipeline, each
worker connection in turn. Its CPU a job (the adds counted too) is what Locust's and the raw loops' are judged
against: what they cost beyond it is the harness. Always at rtt 0 and job-ms 0 (a wait costs no
CPU); it drains for at most the point's measure-s, and the jobs it never fetched stay in wait,
where the audit counts them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from bench.protocol.audit import audit_queues, master_run_ids
from bench.protocol.commandstats import redis_cpu_seconds
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import FinishRefused, Job, Producer, Queue, Worker, raised
from bench.protocol.spread import homes
from bench.stages.finish_fetch.loadstats import issued_job_ids
from bench.stages.finish_fetch.trial_settings import TrialSettings

# Jobs a reference point adds, a second of measure-s: a fast point drains them within the window,
# a slow one stops at its end. Adding and auditing cost time too, so a short window adds fewer.
REFERENCE_JOBS_PER_S = 3000
REFERENCE_MIN_JOBS = 100
REFERENCE_S = 0.5  # a reference point's adds and audit beyond its drain, about (the run's ETA)


@dataclass(frozen=True)
class Reference:
    """One reference point: what it drained, in how long, at what client and Redis CPU."""

    jobs: int  # jobs drained (finished)
    jobs_per_s: float  # jobs / the drain's wall time (the adds before it not counted)
    cpu_us_per_job: float  # this process's CPU a job: its adds and its drain
    fill_cpu_us_per_job: float  # of which the adds (their CPU over the jobs added)
    round_trips_per_job: float  # the workers' pipelines a job
    redis_cpu_pct: float  # Redis's CPU over the drain, % of one core
    audit_ok: bool
    audit_verdict: str


class Lockstep:
    """One worker connection's jobs in flight, a pipeline a round."""

    def __init__(self, queue: Queue, strategy: str, concurrency: int) -> None:
        self.queue = queue
        self.worker = Worker(queue, strategy)  # type: ignore[arg-type]
        self.strategy = strategy
        self.free = concurrency  # slots that ask for a job this round
        self.held: list[Job] = []
        self.rounds = 0
        self.closing = False  # past the deadline: finish what is held, fetch nothing more

    def round(self) -> int:
        """One pipeline: finish what is held, fetch for the free slots. Returns jobs finished."""
        worker, fetching = self.worker, not self.closing
        fused = self.strategy == "fused" and fetching
        pipelined = self.strategy == "two_call_pipelined" and fetching
        if self.closing:
            self.free = 0
        pipe = self.queue.client.pipeline(transaction=False)
        tokens: list[str] = []
        for job in self.held:
            self.queue.queue_on(pipe, worker.finish_call(job, fetch_next=fused))
            if pipelined:
                tokens.append(worker.new_token())
                self.queue.queue_on(pipe, worker.fetch_call(tokens[-1]))
        for _ in range(self.free):
            tokens.append(worker.new_token())
            self.queue.queue_on(pipe, worker.fetch_call(tokens[-1]))
        replies = iter(pipe.execute(raise_on_error=False))
        self.rounds += 1
        finished, held = len(self.held), self.held
        taken: list[Job | None] = []
        for job in held:
            outcome = worker.read_finish(raised(next(replies)), job)
            if outcome.code < 0:
                raise FinishRefused(outcome.code, job.id)
            if fused and outcome.next_job is not None:
                taken.append(outcome.next_job)
            if pipelined:
                taken.append(worker.read_job(raised(next(replies)), tokens.pop(0)))
        taken += [worker.read_job(raised(next(replies)), token) for token in tokens]
        self.held = [job for job in taken if job is not None]
        # a slot whose job two_call finished asks next round; one that found no job stops
        self.free = finished if self.strategy == "two_call" and fetching else 0
        return finished


def reference_jobs(measure_s: float) -> int:
    """The jobs a reference point with a window of ``measure_s`` adds."""
    return max(REFERENCE_MIN_JOBS, math.ceil(measure_s * REFERENCE_JOBS_PER_S))


def run_reference(settings: RedisSettings, trial: TrialSettings, jobs: int | None = None) -> Reference:
    """The reference at ``run``'s workers, concurrency and strategy, on a fresh queue deleted after;
    ``jobs`` added (by default, as many as its window calls for)."""
    jobs = reference_jobs(trial.measure_s) if jobs is None else jobs
    name = fresh_queue_name(f"ffref-{trial.strategy}")
    clients: list[Client] = [settings.connect() for _ in range(trial.workers + 1)]
    control = Queue.open(clients[0], name, protocol=trial.protocol)
    try:
        producer = Producer(control)
        cpu = time.process_time()
        for start in range(0, jobs, trial.batch_size):
            producer.add_batch(min(trial.batch_size, jobs - start), trial.payload_bytes)
        fill_cpu = time.process_time() - cpu
        loops = [Lockstep(control.with_client(c), trial.strategy, trial.concurrency) for c in clients[1:]]
        run_ids = master_run_ids(control.client)
        redis_before = redis_cpu_seconds(control.client.info("cpu"))
        cpu, wall = time.process_time(), time.perf_counter()
        deadline = wall + trial.measure_s
        done, moving = 0, True
        while moving:
            moving = False
            closing = time.perf_counter() >= deadline
            for loop in loops:
                loop.closing = closing
                if loop.held or loop.free:
                    done += loop.round()
                    moving = True
        wall = time.perf_counter() - wall
        drain_cpu = time.process_time() - cpu
        redis_s = redis_cpu_seconds(control.client.info("cpu")) - redis_before
        checked = audit_queues([control], issued_job_ids, run_ids, homes(control.client, [name]))
        # every job added is finished or, never fetched, still waiting; none held, none twice
        accounted = checked.counts.get("completed") == done and done + checked.counts.get("wait", 0) == jobs
        fill_us = fill_cpu * 1e6 / jobs if jobs else 0.0
        return Reference(
            jobs=done,
            jobs_per_s=done / wall if wall else 0.0,
            cpu_us_per_job=fill_us + drain_cpu * 1e6 / done if done else 0.0,
            fill_cpu_us_per_job=fill_us,
            round_trips_per_job=sum(loop.rounds for loop in loops) / done if done else 0.0,
            redis_cpu_pct=100.0 * redis_s / wall if wall else 0.0,
            audit_ok=checked.ok and accounted,
            audit_verdict=checked.verdict,
        )
    finally:
        control.delete()
        for client in clients:
            client.close()
