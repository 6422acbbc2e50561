"""A producer as both drivers run it: pipelined batches, closed loop (a bounded backlog) or open
loop at target-rate. No Locust or gevent import here."""

from __future__ import annotations

import time
from collections.abc import Callable

from bench.finish_fetch.loadstats import RunSettings
from bench.finish_fetch.timed import NO_HOOKS, LoadHooks, Meter
from bench.protocol.queue import Command, Producer, Queue, now_us

BACKLOG_BATCHES = 10  # closed loop: producers keep the wait list below this many batches
BACKLOG_POLL_S = 0.002


class ProducerLoop:
    """One producer on its own connection (an AutoPipeline, so the simulated wait is paid as a
    worker's is: once an exchange)."""

    def __init__(
        self,
        queue: Queue,
        run: RunSettings,
        meter: Meter,
        hooks: LoadHooks = NO_HOOKS,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.queue = queue
        self.stopping = stopping  # the closed loop's wait for room gives up when told to stop
        self.run = run
        self.meter = meter
        self.timer = hooks.timer(hooks.pipe(queue, run.rtt_ms, meter, "producer"), meter)
        self.producer = Producer(queue, sender=self.timer)
        per_user_rate = run.target_rate / run.producers
        self.interval_s = run.batch_size / per_user_rate if per_user_rate > 0 else 0.0
        self.next_slot = time.perf_counter()

    def step(self) -> None:
        """One batch: at its slot (open loop), or once the backlog has room (closed loop)."""
        if self.interval_s > 0:
            slot = self.wait_for_slot()
        else:
            if not self.wait_for_room():
                return
            slot = time.perf_counter()
        # The jobs carry the slot's time: when the producer is behind schedule,
        # end-to-end latency includes the time it spent behind.
        slot_us = now_us() - int((time.perf_counter() - slot) * 1e6)
        n = self.run.batch_size
        ids = self.producer.add_batch(n, self.run.payload_bytes, enqueued_us=slot_us)
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

    def wait_for_room(self) -> bool:
        """Closed loop: add as fast as possible, but keep the backlog bounded. False: told to stop
        (with the workers stopped the backlog never drains)."""
        limit = BACKLOG_BATCHES * self.run.batch_size
        check = [Command(("LLEN", self.queue.keys.wait))]
        while self._raised(self.timer.send(check, "backlog check")[0]) >= limit:
            if self.stopping():
                return False
            time.sleep(BACKLOG_POLL_S)
        return True

    @staticmethod
    def _raised(reply: object) -> int:
        if isinstance(reply, Exception):
            raise reply
        return int(reply)  # type: ignore[call-overload]
