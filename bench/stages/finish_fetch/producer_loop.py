"""A producer as Locust and the raw loops run it: pipelined batches, closed loop (a bounded backlog) or open
loop at target-rate. No Locust or gevent import here.

The closed loop keeps the wait list below a bound: in the steady regime 10 batches (producers and
workers at one pace); in the backlog regime ``backlog_jobs``, which the producers also add at once
in their first exchange, so the wait list is full before the window opens and never runs dry."""

from __future__ import annotations

import math
import time

from bench.protocol.queue import Call, Command, Producer, Queue, now_us, raised
from bench.results.finish_fetch import Regime
from bench.stages.finish_fetch.summary import PRODUCER_WAIT_US
from bench.stages.finish_fetch.timed import NO_HOOKS, LoadHooks, Meter
from bench.stages.finish_fetch.trial_settings import TrialSettings

BACKLOG_BATCHES = 10  # steady: producers keep the wait list below this many batches
# A full wait list is looked at again after 2 ms. In the backlog regime the wait doubles while it
# stays full, up to a fifth of the time the backlog lasts at DRAIN_MAX (16 ms at 4,000 jobs): at a
# fixed 2 ms three producers sent 1,500 checks a second, client CPU that is no job's but was divided
# over the jobs (the more so, the fewer jobs a second: a slower protocol's). The steady regime's
# bound is a few batches, so it keeps 2 ms.
BACKLOG_POLL_S = 0.002
BACKLOG_POLL_MAX_S = 0.016
DRAIN_MAX = 50_000  # jobs/s: more than this machine's Redis drains


class ProducerLoop:
    """One producer on its own connection (an AutoPipeline, so the simulated wait is paid as a
    worker's is: once an exchange)."""

    def __init__(self, queue: Queue, trial: TrialSettings, meter: Meter, hooks: LoadHooks = NO_HOOKS) -> None:
        self.queue = queue
        self.run = trial
        self.meter = meter
        self.timer = hooks.timer(hooks.pipe(queue, trial.rtt_ms, meter, "producer"), meter)
        self.producer = Producer(queue, sender=self.timer)
        per_user_rate = trial.target_rate / trial.producers
        self.interval_s = trial.batch_size / per_user_rate if per_user_rate > 0 else 0.0
        self.next_slot = time.perf_counter()
        self.check: list[Call] = [Command(("LLEN", queue.keys.wait))]
        self.backlog = 0  # the wait list's length after the last exchange (closed loop)
        self.poll_s = BACKLOG_POLL_S  # the wait before the next look at a full wait list
        backlog = trial.regime == Regime.BACKLOG and trial.backlog_jobs > 0
        self.bound = trial.backlog_jobs if backlog else BACKLOG_BATCHES * trial.batch_size
        lasts_s = trial.backlog_jobs / DRAIN_MAX / 5
        self.poll_max_s = min(BACKLOG_POLL_MAX_S, max(BACKLOG_POLL_S, lasts_s)) if backlog else BACKLOG_POLL_S
        # backlog: this producer's share of the pre-fill, sent as its first exchange
        self.prefill = (
            math.ceil(trial.backlog_jobs / trial.producers) if backlog and not self.interval_s else 0
        )

    def fill(self) -> None:
        """The backlog regime's pre-fill, done before the window can open: when the window opened
        on a busy machine while the 4,000 adds were still on the wire, the client counted them
        and the server's snapshot had not, and a worker's commands a job read -0.7 (Locust's
        users count as started after it; the raw loops reach the window's edge after it)."""
        if self.prefill:
            self.step()

    def step(self) -> None:
        """One batch: at its slot (open loop), or once the backlog has room (closed loop). The
        closed loop's backlog check rides in the batch's own exchange (LLEN after the adds), so a
        batch costs one round trip while there is room."""
        closed = self.interval_s <= 0
        if closed:
            if self.backlog >= self.bound:
                waited = time.perf_counter()
                time.sleep(self.poll_s)  # full: look again a little later (run_steps sees a stop)
                self.poll_s = min(2 * self.poll_s, self.poll_max_s)
                self.backlog = int(raised(self.timer.send(self.check, "backlog check")[0]))
                self.meter.count(PRODUCER_WAIT_US, int((time.perf_counter() - waited) * 1e6))
                return
            self.poll_s = BACKLOG_POLL_S
            slot = time.perf_counter()
        else:
            slot = self.wait_for_slot()
        # The jobs carry the slot's time: when the producer is behind schedule,
        # end-to-end latency includes the time it spent behind.
        slot_us = now_us() - int((time.perf_counter() - slot) * 1e6)
        n, self.prefill = max(self.run.batch_size, self.prefill), 0
        calls: list[Call] = [*self.producer.batch_calls(n, self.run.payload_bytes, slot_us)]
        replies = self.timer.send(calls + self.check if closed else calls, f"addJob x{n}")
        ids = self.producer.read_ids(replies[:n])
        if closed:
            self.backlog = int(raised(replies[n]))
        self.meter.record("enqueue", (time.perf_counter() - slot) * 1e6)
        self.meter.count("jobs_added", len(ids))
        self.meter.count("producer_calls", n)

    def wait_for_slot(self) -> float:
        """Open loop: the batch's intended start time; sleeps until it when ahead."""
        slot = self.next_slot
        self.next_slot += self.interval_s
        delay = slot - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        return slot
