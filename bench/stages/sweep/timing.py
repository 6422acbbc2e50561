"""Inside pyperf's run: time the sweep calls alone (each from a scenario restored untimed), and
write what pyperf does not measure (round trips, Redis µs, the hold, the probe, the check) to a
side file a timed value.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import redis

from bench.errors import BenchError
from bench.protocol.commandstats import CommandStats, client_side
from bench.protocol.connection import Client, RedisSettings, node_client
from bench.protocol.lua_gc import collect_lua_garbage
from bench.protocol.queue import Queue
from bench.protocol.refusal import refusal
from bench.protocol.slowlog import SlowlogWatch
from bench.protocol.sweep import DEFAULT_SLICE, DEFAULT_SLICE_BUDGET_US, Sweeper, SweepResult, make_sweeper
from bench.results.files import write_json
from bench.results.hdr import encode
from bench.stages.sweep.plan import SweepCase
from bench.stages.sweep.probe import DEFAULT_RATE_HZ, Probe, ProbeWindow
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, ScenarioQueue, stalled_share

# No sweep call may time out and so be cut short; the client never re-sends one.
# 10 minutes is beyond the largest capped point (the protocol sweep at 30,000 stalled ids).
SWEEP_TIMEOUT_S = 600.0
UNREACHABLE_S = 5.0  # refused connections this long after a failed sweep: the server is gone


def sweep_server_us(delta: CommandStats) -> int:
    """Redis µs of the sweep's own commands: its EVALSHAs when it used scripts (the
    commands inside are counted in them), else every command; never the probe's PINGs."""
    scripted = client_side(delta, ("evalsha", "eval"))
    if scripted.total_calls:
        return scripted.total_usec
    return delta.total_usec - delta.usec.get("ping", 0)


@dataclass
class ValueRecord:
    """What one pyperf value (``loops`` sweeps) measured beside the time."""

    sweep_s: list[float] = field(default_factory=list)
    round_trips: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    server_us: list[int] = field(default_factory=list)
    reclaimed: list[int] = field(default_factory=list)  # jobs each sweep moved to wait or failed
    hold_s: float = 0.0
    # Redis's own longest call (SLOWLOG), or an upper bound; None once a sweep could not tell
    redis_hold_us: int | None = 0
    # each sweep's calls over the slowlog threshold (None: SLOWLOG could not tell)
    redis_slow_calls: list[int | None] = field(default_factory=list)
    probe: ProbeWindow = field(default_factory=ProbeWindow)
    errors: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        probe = self.probe
        return {
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "probe"},
            "probe_hdr": encode(probe.histogram),
            "probe_busy": probe.busy,
            "probe_errors": probe.errors,
            "probe_sent": probe.sent,
        }


@dataclass
class Connected:
    """What every point of this process shares: one connection, one snapshot, one probe."""

    client: Client
    scenario: ScenarioQueue
    probe: Probe
    node: redis.Redis  # the swept queue's server (on a cluster, its master): its SLOWLOG and Lua VM
    slowlog: SlowlogWatch


@dataclass
class PointBench:
    """The time function pyperf calls, for any point of one size."""

    settings: RedisSettings  # its socket timeout raised to SWEEP_TIMEOUT_S (__post_init__)
    queue_name: str
    side_dir: Path
    _: KW_ONLY
    slice_size: int = DEFAULT_SLICE
    slice_budget_us: int = DEFAULT_SLICE_BUDGET_US
    probe_rate_hz: float = DEFAULT_RATE_HZ
    warmups: int = 0  # pyperf's warm-up values: timed, but not side-recorded
    protocol: str = "echomq"
    connected: Connected | None = field(default=None, init=False)
    sweepers: dict[str, Sweeper] = field(default_factory=dict, init=False)
    current: SweepCase | None = field(default=None, init=False)  # the point whose locks are in place
    calls: Counter[SweepCase] = field(default_factory=Counter, init=False)
    records: dict[SweepCase, list[dict[str, Any]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.settings = replace(self.settings, socket_timeout_s=SWEEP_TIMEOUT_S)

    def _connect(self) -> Connected:
        if self.connected is None:
            # Forked before any connection; on the swept queue's master.
            probe = Probe(self.settings, self.probe_rate_hz, self.queue_name).start()
            client = self.settings.connect()
            scenario = ScenarioQueue.attach(Queue.open(client, self.queue_name, protocol=self.protocol))
            node = node_client(client, scenario.queue.keys.active)
            self.connected = Connected(client, scenario, probe, node, SlowlogWatch(node))
        return self.connected

    def time_point(self, loops: int, point: SweepCase) -> float:
        """pyperf's time function: ``loops`` sweeps, each from a fresh restore; only the sweeps are timed."""
        connected = self._connect()
        if len(connected.scenario.ids) != point.size:
            raise BenchError(f"the snapshot holds {len(connected.scenario.ids)} jobs, not {point.size}")
        if point.variant not in self.sweepers:
            # The restore before each sweep clears a throttle key untimed: the sweep does not.
            self.sweepers[point.variant] = make_sweeper(
                point.variant,
                connected.scenario.queue,
                max_stalled=BENCH_MAX_STALLED,
                slice_size=self.slice_size,
                budget_us=self.slice_budget_us,
                clear_throttle=False,
            )
        stalled = stalled_share(connected.scenario.ids, point.scenario)
        record = ValueRecord()
        total = sum(self._one_sweep(connected, point, stalled, record) for _ in range(loops))
        self.calls[point] += 1
        if self.calls[point] > self.warmups:
            values = self.records.setdefault(point, [])
            values.append(record.as_json())
            path = self.side_dir / f"{point.slug}.{os.getpid()}.json"
            write_json(path, {"point": point.name, "loops": loops, "values": values})
        return total

    def _one_sweep(
        self, connected: Connected, point: SweepCase, stalled: list[str], record: ValueRecord
    ) -> float:
        """Restore (untimed), sweep (timed), measure and check (untimed); returns the sweep's time."""
        client, probe = connected.client, connected.probe
        connected.scenario.restore(stalled, locks=self.current != point)
        self.current = point
        # the previous sweep's Lua garbage is collected now, not inside this one's calls
        collect_lua_garbage(connected.node)
        before = CommandStats.read(client)
        probe.begin()
        connected.slowlog.start()
        result: SweepResult | None = None
        started = time.perf_counter()
        try:
            result = self.sweepers[point.variant].sweep()
        except redis.TimeoutError:
            record.errors.append(f"a sweep call timed out after {SWEEP_TIMEOUT_S:g} s (not re-sent)")
        except redis.RedisError as exc:
            if refusal(exc) is not None:
                raise  # every later sweep would be refused too: the worker ends (pyperf_program.py)
            record.errors.append(f"the sweep failed: {str(exc).splitlines()[0]}")
        elapsed = time.perf_counter() - started
        record.probe.add(probe.end())
        if result is None:
            wait_for_redis(client)
            self.current = None  # restore everything next time
            return elapsed
        record.sweep_s.append(elapsed)
        record.round_trips.append(result.round_trips)
        record.calls.append(result.calls)
        record.server_us.append(sweep_server_us(CommandStats.read(client).since(before)))
        record.reclaimed.append(len(result.moved) + len(result.failed))
        record.hold_s = max(record.hold_s, result.longest_call_s)
        span = connected.slowlog.stop()
        bound = span.bound_us()
        record.redis_slow_calls.append(span.slow_count())
        record.redis_hold_us = (
            None if bound is None or record.redis_hold_us is None else max(record.redis_hold_us, bound)
        )
        if problem := connected.scenario.check(stalled, result):
            record.errors.append(f"check failed: {problem}")
        return elapsed

    def close(self) -> None:
        if self.connected is not None:
            self.connected.probe.close()
            self.connected.client.close()
            self.connected = None


def wait_for_redis(client: Client, poll_s: float = 0.1) -> None:
    """After a failed or long sweep: wait until Redis answers again (a script may still be running);
    refused connections for UNREACHABLE_S are a server gone, not busy: give up at once."""
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    refused_since: float | None = None
    while time.monotonic() < deadline:
        try:
            client.ping()
            return
        except (redis.TimeoutError, redis.BusyLoadingError, redis.ResponseError):
            refused_since = None  # there, but busy
        except redis.ConnectionError as exc:
            now = time.monotonic()
            refused_since = now if refused_since is None else refused_since
            if now - refused_since >= UNREACHABLE_S:
                raise BenchError(
                    f"Redis unreachable for {UNREACHABLE_S:g}s after a failed sweep: "
                    f"{str(exc).splitlines()[0]}"
                ) from None
        time.sleep(poll_s)
    raise BenchError(f"Redis did not answer for {SWEEP_TIMEOUT_S:.0f}s after a failed sweep")
