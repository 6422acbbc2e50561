"""The worker driver (bench/stages/finish_fetch/worker_loop.py): a worker's jobs in flight driven in rounds,
each round one exchange carrying exactly the calls of the jobs that are ready. Counts and
timestamps only, against the real redis-server."""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.protocol.base import ScriptCall
from bench.protocol.queue import STRATEGIES, Call, Producer, Queue, Sender
from bench.stages.finish_fetch.loadstats import Recorder
from bench.stages.finish_fetch.timed import TIMER_SLACK_NS, run_steps
from bench.stages.finish_fetch.trial_settings import TrialSettings
from bench.stages.finish_fetch.worker_loop import WorkerLoop

IN_FLIGHT = 4
JOBS = 40


@dataclass
class Round:
    """One exchange the driver sent: its calls, its replies, when it went and came back."""

    calls: list[Call]
    replies: list[Any]
    sent: float
    back: float


@dataclass
class Watch:
    """A Sender in front of the driver's own connection that keeps every exchange."""

    inner: Sender
    rounds: list[Round] = field(default_factory=list)

    def send(self, calls: Sequence[Call], label: str = "") -> list[Any]:
        sent = time.perf_counter()
        replies = self.inner.send(calls, label)
        self.rounds.append(Round(list(calls), replies, sent, time.perf_counter()))
        return replies


def _driver(queue: Queue, strategy: str, job_ms: float = 0.0) -> tuple[WorkerLoop, Watch, Recorder]:
    run = TrialSettings(
        strategy=strategy, workers=1, producers=1, batch_size=JOBS, payload_bytes=10, target_rate=0,
        warmup_s=0, measure_s=1, rtt_ms=0, queue=queue.keys.name, concurrency=IN_FLIGHT, job_ms=job_ms,
    )  # fmt: skip
    recorder = Recorder()
    recorder.reset(1)
    driver = WorkerLoop(queue, run, recorder)
    watch = Watch(driver.pipe)
    driver.sender = driver.worker.sender = watch  # in front of its connection
    return driver, watch, recorder


def _drain(driver: WorkerLoop, recorder: Recorder, jobs: int) -> None:
    """Rounds until ``jobs`` are finished (a deadline, not a count of rounds)."""
    deadline = time.monotonic() + 20
    while recorder.peek()[1]["jobs"] < jobs:
        assert time.monotonic() < deadline, "the driver did not finish the jobs in time"
        driver.step()


def _scripts(calls: list[Call], script: str) -> list[ScriptCall]:
    return [c for c in calls if isinstance(c, ScriptCall) and c.script == script]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_round_sends_exactly_the_calls_of_the_jobs_that_are_ready(queue: Queue, strategy: str):
    Producer(queue).add_batch(JOBS, 10)
    driver, watch, recorder = _driver(queue, strategy)
    _drain(driver, recorder, JOBS)
    protocol = queue.protocol
    held: set[str] = set()  # jobs the worker holds after the last round
    fetches_due = 0  # two_call: the fetches owed by finishes of the last round
    finished: list[str] = []
    for n, round_ in enumerate(watch.rounds):
        finishes = [c.args[0] for c in _scripts(round_.calls, "move_to_finished")]
        fetches = _scripts(round_.calls, "move_to_active")
        assert len(round_.calls) == len(finishes) + len(fetches), round_.calls  # nothing else
        if n == 0:
            assert (finishes, len(fetches)) == ([], IN_FLIGHT)  # every slot asks for its first job
        elif strategy == "two_call" and fetches_due:
            assert (finishes, len(fetches)) == ([], fetches_due)
        else:
            # job-ms 0: every held job is ready, and each is finished once, with nothing else
            assert sorted(finishes) == sorted(held), (n, finishes, held)
            per_job = 1 if strategy == "two_call_pipelined" else 0
            assert len(fetches) == per_job * len(finishes)
        finished += finishes
        fetches_due = len(finishes) if strategy == "two_call" else 0
        taken = [protocol.read_fetched(r) for r in round_.replies]
        if strategy == "two_call_pipelined":
            taken = taken[1::2] if finishes else taken
        held = (held - set(finishes)) | {t[0] for t in taken if t is not None}
    assert len(watch.rounds) >= JOBS // IN_FLIGHT  # several jobs' calls a round
    assert sorted(finished, key=int) == [str(i) for i in range(1, JOBS + 1)]  # each job once
    assert not held


def test_job_ms_holds_each_job_at_least_that_long_while_the_others_are_held_too(queue: Queue):
    jobs, job_ms = 12, 20.0
    Producer(queue).add_batch(jobs, 10)
    driver, watch, recorder = _driver(queue, "fused", job_ms=job_ms)
    _drain(driver, recorder, jobs)
    taken_at: dict[str, float] = {}
    held_for: dict[str, float] = {}
    for round_ in watch.rounds:
        for call in _scripts(round_.calls, "move_to_finished"):
            held_for[call.args[0]] = round_.sent - taken_at[call.args[0]]
        for reply in round_.replies:
            fetched = queue.protocol.read_fetched(reply)
            if fetched is not None:
                taken_at[fetched[0]] = round_.back
    assert len(held_for) == jobs
    assert min(held_for.values()) >= job_ms / 1000, held_for
    # the slots hold their jobs side by side: a round finishes several of them
    assert max(len(_scripts(r.calls, "move_to_finished")) for r in watch.rounds) > 1


def test_the_simulated_rtt_is_paid_once_an_exchange_however_many_calls_it_carries(queue: Queue):
    rtt_ms = 2.0
    Producer(queue).add_batch(JOBS, 10)
    driver, watch, recorder = _driver(queue, "two_call_pipelined")
    driver.pipe.rtt_s = rtt_ms / 1000
    waits: list[float] = []

    def counted(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    driver.pipe._sleep = counted
    _drain(driver, recorder, JOBS)
    assert len(waits) == driver.pipe.flushes == len(watch.rounds)  # one wait an exchange
    assert set(waits) == {rtt_ms / 1000}
    assert max(len(r.calls) for r in watch.rounds) == 2 * IN_FLIGHT  # one wait for eight calls
    counters = recorder.peek()[1]
    assert counters["rtt_sleeps"] == counters["worker_round_trips"] == len(watch.rounds)
    assert counters["rtt_slept_us"] >= 0.99 * rtt_ms * 1000 * counters["rtt_sleeps"]  # never short


PR_GET_TIMERSLACK = 30


def test_a_loop_s_thread_sleeps_without_linux_s_timer_slack() -> None:
    # Linux's default 50 µs slack would add 5% to each simulated 1 ms round trip.
    slack: list[int] = []

    def loop() -> None:
        run_steps(lambda: None, Recorder(), lambda: True)  # stops before its first step
        slack.append(ctypes.CDLL(None).prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0))

    thread = threading.Thread(target=loop)
    thread.start()
    thread.join()
    assert slack == [TIMER_SLACK_NS]
