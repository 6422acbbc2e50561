"""The auto-pipelined connection and the three strategies over it, with plain threads against the real
redis-server: counts and order, never times."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import redis

from bench.protocol.autopipe import AutoPipeline, Flush
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import STRATEGIES, Command, Producer, Queue, Worker
from tests.helpers import wait_until

pytestmark = pytest.mark.protocol

JOBS_PER_SLOT = 40


def work(queue: Queue, strategy: str, slots: int, pipe: AutoPipeline) -> int:
    """``slots`` threads, each a worker on the one pipeline, finishing JOBS_PER_SLOT jobs."""
    done = [0] * slots
    start = threading.Barrier(slots)

    def slot(i: int) -> None:
        worker = Worker(queue, strategy, sender=pipe)
        start.wait()
        job = worker.fetch()
        while job is not None and done[i] < JOBS_PER_SLOT:
            job = worker.complete_and_next(job, want_next=done[i] + 1 < JOBS_PER_SLOT)
            done[i] += 1

    threads = [threading.Thread(target=slot, args=(i,)) for i in range(slots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return sum(done)


class Held:
    """An rtt 'sleep' that holds the first exchange on the wire until released, and counts sleeps."""

    def __init__(self) -> None:
        self.sleeps = 0
        self.in_flight = threading.Event()
        self.release = threading.Event()

    def __call__(self, seconds: float) -> None:
        if seconds == 0:
            return  # the yield before an exchange, not a simulated wait
        self.sleeps += 1
        if self.sleeps == 1:
            self.in_flight.set()
            assert self.release.wait(30)


def behind_a_held_exchange(
    pipe: AutoPipeline, held: Held, first: Callable[[], None], others: list[Callable[[], None]]
) -> None:
    """``first`` sends alone and its exchange is held on the (simulated) wire; ``others`` send
    meanwhile and wait behind it; then it is let go and every caller runs to its end."""
    lead = threading.Thread(target=first)
    lead.start()
    assert held.in_flight.wait(30)
    behind = [threading.Thread(target=call) for call in others]
    for thread in behind:
        thread.start()
    wait_until(
        lambda: len(pipe._waiting) == len(others), 30, "the callers waiting behind the exchange in flight"
    )
    held.release.set()
    for thread in [lead, *behind]:
        thread.join(30)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_eight_jobs_in_flight_share_exchanges_and_commands_stay_exact(
    queue: Queue, settings: RedisSettings, strategy: str
) -> None:
    Producer(queue).add_batch(8 * JOBS_PER_SLOT)
    flushes: list[Flush] = []
    client = settings.connect()
    try:
        pipe = AutoPipeline(queue.with_client(client), on_flush=flushes.append)
        trips = client.round_trips  # the scripts' SCRIPT LOADs on this connection are set-up
        before = CommandStats.read(queue.client)
        jobs = work(pipe.queue, strategy, 8, pipe)
        server = CommandStats.read(queue.client).since(before)
    finally:
        client.close()
    assert jobs == 8 * JOBS_PER_SLOT
    per_job = 1 if strategy == "fused" else 2
    # a slot: its first fetch, then per_job calls a job but for its last (a finish alone)
    commands = sum(f.script_calls for f in flushes)
    assert commands == 8 * (per_job * (JOBS_PER_SLOT - 1) + 2)
    assert server.calls["evalsha"] == commands  # the server counted every call, once
    assert pipe.flushes == len(flushes) == client.round_trips - trips
    assert pipe.flushes < commands and max(f.calls for f in flushes) > 1  # flushes carried several calls
    assert sum(f.calls for f in flushes) == commands  # every call a script call, each one command


def test_two_call_pipelined_alone_is_one_exchange_and_two_commands_a_job(queue: Queue) -> None:
    Producer(queue).add_batch(JOBS_PER_SLOT + 1)
    flushes: list[Flush] = []
    pipe = AutoPipeline(queue, on_flush=flushes.append)
    worker = Worker(queue, "two_call_pipelined", sender=pipe)
    job = worker.fetch()
    flushes.clear()
    for _ in range(JOBS_PER_SLOT):
        assert job is not None
        job = worker.complete_and_next(job)
    assert [(f.calls, f.script_calls) for f in flushes] == [(2, 2)] * JOBS_PER_SLOT
    assert queue.client.zcard(queue.keys.completed) == JOBS_PER_SLOT


def test_calls_issued_while_an_exchange_is_in_flight_go_out_together_paying_the_rtt_once(
    queue: Queue,
) -> None:
    held = Held()
    flushes: list[Flush] = []
    pipe = AutoPipeline(queue, rtt_s=0.001, sleep=held, on_flush=flushes.append)
    replies: dict[int, list[object]] = {}

    def echo(i: int) -> Callable[[], None]:
        def call() -> None:
            replies[i] = pipe.send([Command(("ECHO", f"c{i}")), Command(("ECHO", f"d{i}"))], f"echo {i}")

        return call

    behind_a_held_exchange(pipe, held, echo(0), [echo(i) for i in range(1, 8)])
    assert [f.calls for f in flushes] == [2, 14]  # the seven callers' calls in one exchange
    assert held.sleeps == 2  # the simulated rtt paid once an exchange, not once a call
    assert all(f.slept_us >= 0 for f in flushes)
    for i in range(8):  # each caller got its own replies, in its order
        assert replies[i] == [f"c{i}".encode(), f"d{i}".encode()]


def test_a_failed_exchange_fails_every_call_in_it_and_resends_none(
    queue: Queue, client: Client, settings: RedisSettings
) -> None:
    own = settings.connect()
    try:
        pipe = AutoPipeline(queue.with_client(own))
        assert pipe.send([Command(("PING",))]) == [b"PONG"]
        name = f"victim-{id(pipe)}"
        pipe.send([Command(("CLIENT", "SETNAME", name))])
        (victim,) = [c for c in client.client_list() if c["name"] == name]
        client.client_kill_filter(_id=victim["id"])
        counter = f"{queue.keys.prefix}n"
        with pytest.raises(redis.ConnectionError):
            pipe.send([Command(("INCR", counter)), Command(("INCR", counter))])
        assert client.get(counter) is None  # neither ran, and neither was sent again
        assert pipe.send([Command(("INCR", counter))]) == [1]  # on a new connection
    finally:
        own.close()


def test_a_refused_call_comes_back_as_its_error_and_the_others_keep_their_replies(queue: Queue) -> None:
    pipe = AutoPipeline(queue)
    ok, refused, after = pipe.send([Command(("PING",)), Command(("NOSUCHCOMMAND",)), Command(("ECHO", "x"))])
    assert ok == b"PONG" and isinstance(refused, redis.ResponseError) and after == b"x"


def test_after_script_flush_the_calls_load_again_and_are_sent_once_more(queue: Queue, client: Client) -> None:
    Producer(queue).add_batch(3)
    flushes: list[Flush] = []
    pipe = AutoPipeline(queue, on_flush=flushes.append)
    worker = Worker(queue, "fused", sender=pipe)
    job = worker.fetch()
    assert job is not None
    client.script_flush()
    assert worker.complete_and_next(job) is not None  # NOSCRIPT: it had not run; loaded and sent again
    assert [(f.noscript, f.resent) for f in flushes[-2:]] == [(1, False), (0, True)]
    assert client.zcard(queue.keys.completed) == 1


def test_the_pause_runs_before_every_exchange_and_hears_when_the_last_one_woke_others(
    queue: Queue,
) -> None:
    held = Held()
    pauses: list[bool] = []
    pipe = AutoPipeline(queue, rtt_s=0.001, sleep=held, pause=pauses.append)

    def echo() -> None:
        pipe.send([Command(("ECHO", "e"))])

    behind_a_held_exchange(pipe, held, echo, [echo] * 3)
    pipe.send([Command(("ECHO", "c"))])
    # the first exchange woke no one but its sender; the second carried three callers, so its
    # leader woke the other two, and the exchange after it is told to let them go first
    assert pauses == [False, False, True]
    assert pipe.flushes == 3
