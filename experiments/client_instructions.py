"""What does the client execute a job, per protocol? Instructions, which a neighbour cannot move.

A worker's loop (fetch, then finish and take the next, one job in flight) runs in a Python
process of its own under valgrind's callgrind, against an embedded server that is not under it.
The jobs are added beforehand by this process, so only the worker's side is counted: the
protocol's call builders, redis-py's packing and parsing, the reading of the fetched job. The
whole process is counted for N and for 2N jobs; the difference over N is a job's cost, with the
start (imports, connecting) taken out. Python's hash seed is fixed (PYTHONHASHSEED=0).
The kernel, the network and Redis are outside the count.
Usage: .venv/bin/python experiments/client_instructions.py [jobs] [protocols] [strategies]
(defaults: 2000 echomq,bullmq fused,two_call; diagnosis, not a benchmark)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness.callgrind import instructions_in, valgrind_missing
from bench.harness.experiment import experiment_run
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings
from bench.protocol.phases import Inputs
from bench.protocol.queue import Producer, Queue, Worker
from bench.stages.instructions.rows import fresh

QUEUE = "client-instr"
WORKER_ID = "client-instr-w0"


def _worker(url: str, protocol: str, strategy: str, jobs: int) -> None:
    """The counted side: take ``jobs`` jobs from the queue the parent filled."""
    client = RedisSettings.from_url(url).connect()
    queue = Queue.open(client, QUEUE, protocol=protocol, clock=Inputs.fixed(QUEUE).clock)
    worker = Worker(queue, strategy, worker_id=WORKER_ID)  # type: ignore[arg-type]
    job = worker.fetch()
    for _ in range(jobs):
        assert job is not None
        job = worker.complete_and_next(job)


def _count(url: str, protocol: str, strategy: str, jobs: int, folder: Path) -> int:
    """Instructions of the whole worker process taking ``jobs`` jobs."""
    out = folder / f"{protocol}-{strategy}-{jobs}.out"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
               "--worker", url, protocol, strategy, str(jobs)]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, check=True, env=env, capture_output=True, text=True)
    return instructions_in(out)


def _fill(url: str, protocol: str, jobs: int) -> None:
    client = RedisSettings.from_url(url).connect()
    fresh(client)
    queue = Queue.open(client, QUEUE, protocol=protocol, clock=Inputs.fixed(QUEUE).clock)
    Producer(queue).add_batch(jobs + 2, payload_bytes=100, enqueued_us=1)


if len(sys.argv) > 1 and sys.argv[1] == "--worker":
    _worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    sys.exit(0)

missing = valgrind_missing()
if missing:
    sys.exit(f"client_instructions: {missing}")
with experiment_run("client_instructions", sys.argv[1:]) as exp, EmbeddedRedis() as srv:
    jobs = int(exp.args[0]) if exp.args else 2000
    protocols = (exp.args[1] if len(exp.args) > 1 else "echomq,bullmq").split(",")
    strategies = (exp.args[2] if len(exp.args) > 2 else "fused,two_call").split(",")
    exp.record_server(RedisSettings.from_url(srv.url).connect())
    per_job: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="client-instr-") as tmp:
        for strategy in strategies:
            for protocol in protocols:
                counts = []
                for n in (jobs, 2 * jobs):
                    _fill(srv.url, protocol, n)
                    counts.append(_count(srv.url, protocol, strategy, n, Path(tmp)))
                per_job[protocol, strategy] = (counts[1] - counts[0]) / jobs
                print(f"{protocol} {strategy}: {per_job[protocol, strategy]:,.0f} instructions a job "
                      f"(process: {counts[0]:,} for {jobs} jobs, {counts[1]:,} for {2 * jobs})")  # fmt: skip
                exp.row(protocol=protocol, strategy=strategy, jobs=jobs, process_n=counts[0],
                        process_2n=counts[1],
                        instructions_per_job=round(per_job[protocol, strategy]))  # fmt: skip
    base = protocols[0]
    for strategy in strategies:
        for protocol in protocols[1:]:
            ratio = per_job[protocol, strategy] / per_job[base, strategy]
            print(f"{strategy}: {protocol} over {base}: {ratio:.2f}x")
