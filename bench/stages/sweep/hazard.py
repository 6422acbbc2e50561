"""The client-default hazard: BullMQ's sweep held past its client's socket timeout, and sent again.

BullMQ's Python client keeps redis-py's 5 s socket timeout and retries on timeouts (the first
re-send 2 s after it). The copy of a sweep held longer waits behind it and finds the sweep's
throttle key set, so the caller gets no ids although every job moved; or, past Redis's busy
threshold, it is refused with BUSY and the call raises while the first sweep still runs. Each size
is one all-stalled sweep of a bullmq queue, sent once by each client from the same restored state:
BullMQ's own connection (bench/protocol/bullmq_client.py), and the suite's, which never re-sends.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import redis

from bench.harness.machine import watch_run
from bench.harness.terminal import plural
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Queue, _text
from bench.protocol.sweep import AtomicSweeper
from bench.results.sweep import SweepHazardRow
from bench.stages.sweep.probe import Probe, ProbeWindow
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, ScenarioQueue
from bench.stages.sweep.timing import wait_for_redis

CLIENTS = ("bullmq", "suite")
HAZARD_PROTOCOL = "bullmq"
# Both clients sweep with BullMQ's Worker default interval: its re-send meets the throttle key.
INTERVAL_MS = 30_000


@dataclass
class HazardCase:
    """A bullmq queue and the stalled jobs a sweep must move; ``prepare`` puts that state back."""

    queue: Queue
    stalled: list[str]
    prepare: Callable[[], None]


def scenario_case(scenario: ScenarioQueue) -> HazardCase:
    """Every job of the snapshot stalled: in active, marked, its lock gone."""
    ids = list(scenario.ids)
    return HazardCase(scenario.queue, ids, lambda: scenario.restore(ids, locks=True))


@dataclass
class CallResult:
    reply: list[str] | None
    error: str
    elapsed_s: float


def _bullmq_call(settings: RedisSettings, case: HazardCase, timeout_s: float | None) -> CallResult:
    from bench.protocol.bullmq_client import connection_url, sweep_once  # the bullmq package, here only

    started = time.perf_counter()
    called = sweep_once(
        connection_url(settings.url, timeout_s), case.queue.keys, BENCH_MAX_STALLED, INTERVAL_MS
    )
    return CallResult(called.reply, called.error, time.perf_counter() - started)


def _suite_call(settings: RedisSettings, case: HazardCase, timeout_s: float) -> CallResult:
    client = replace(settings, socket_timeout_s=timeout_s).connect()
    try:
        queue = case.queue.with_client(client)  # loads the scripts: before the clock starts
        sweeper = AtomicSweeper(queue, BENCH_MAX_STALLED, check_interval_ms=INTERVAL_MS)
        started = time.perf_counter()
        try:
            return CallResult(sweeper.sweep().moved, "", time.perf_counter() - started)
        except redis.RedisError as exc:
            message = str(exc).splitlines()[0] if str(exc) else ""
            return CallResult(None, f"{type(exc).__name__}: {message}", time.perf_counter() - started)
    finally:
        client.close()


def moved_ids(queue: Queue, stalled: Sequence[str]) -> int:
    """Stalled jobs now in wait (once) and out of active."""
    client, keys = queue.client, queue.keys
    waiting = Counter(_text(i) for i in client.lrange(keys.wait, 0, -1))
    active = {_text(i) for i in client.lrange(keys.active, 0, -1)}
    return sum(1 for j in stalled if waiting[j] == 1 and j not in active)


def measure(
    client_name: str,
    settings: RedisSettings,
    case: HazardCase,
    timeout_s: float,
    probe: Probe,
    *,
    bullmq_timeout_s: float | None = None,
    watch_pids: Iterable[int] = (),
) -> SweepHazardRow:
    """One call of ``client_name`` from the prepared state, with the server's and the probe's counts
    and the machine watch around it; ``bullmq_timeout_s`` None leaves BullMQ's at redis-py's default."""
    case.prepare()
    admin = case.queue.client
    before = CommandStats.read(admin)
    probe.begin()
    with watch_run(watch_pids) as watch:
        if client_name == "bullmq":
            result = _bullmq_call(settings, case, bullmq_timeout_s)
        else:
            result = _suite_call(settings, case, timeout_s)
        wait_for_redis(admin)  # the sweep (and any copy of it) has ended
        seen: ProbeWindow = probe.end()  # before the watch's stop, which lasts a second at least
    delta = CommandStats.read(admin).since(before)
    moved = moved_ids(case.queue, case.stalled)
    matches = (
        result.reply is not None
        and Counter(result.reply) == Counter(case.stalled)
        and moved == len(case.stalled)
    )
    return SweepHazardRow(
        protocol=HAZARD_PROTOCOL,
        client=client_name,
        stalled_jobs=len(case.stalled),
        socket_timeout_s=timeout_s,
        elapsed_s=round(result.elapsed_s, 4),
        server_executions=delta.calls.get("evalsha", 0),
        server_rejected=delta.rejected.get("evalsha", 0),
        probe_busy=seen.busy,
        probe_max_us=int(seen.histogram.get_max_value()) if seen.sent else None,
        reply_ids=len(result.reply) if result.reply is not None else None,
        moved_ids=moved,
        reply_matches=matches,
        error=result.error,
        **watch.within(None).row_fields(),
    )


def effective_timeout_s(configured: float) -> tuple[float, float | None]:
    """(the timeout both clients use, what BullMQ's connection is given: None keeps its default)."""
    if configured > 0:
        return configured, configured
    from bench.protocol.bullmq_client import default_socket_timeout_s

    # a redis-py without a default (None): no timeout, so no re-send either
    return default_socket_timeout_s() or 0.0, None


def run_hazard(
    settings: RedisSettings,
    case: HazardCase,
    configured_timeout_s: float,
    probe_rate_hz: float,
    watch_pids: Sequence[int] = (),
) -> list[SweepHazardRow]:
    """Both clients, one call each, from the same state; the probe watching throughout."""
    timeout_s, bullmq_timeout_s = effective_timeout_s(configured_timeout_s)
    with Probe(settings, probe_rate_hz, case.queue.keys.name) as probe:
        return [
            measure(name, settings, case, timeout_s, probe,
                    bullmq_timeout_s=bullmq_timeout_s, watch_pids=watch_pids)
            for name in CLIENTS
        ]  # fmt: skip


def hazard_line(row: SweepHazardRow) -> str:
    reply = "raised" if row.reply_ids is None else f"{row.reply_ids:,} ids"
    note = f"; {row.error}" if row.error else ""
    note += f"; CONTENDED (foreign CPU {row.foreign_cpu_pct:.0f}% of a core)" if row.contended else ""
    return (
        f"hazard {row.client} {row.stalled_jobs:,} stalled, timeout {row.socket_timeout_s:g} s: "
        f"{row.elapsed_s:.2f} s, {plural(row.server_executions, 'execution')}, "
        f"{row.server_rejected} refused, "
        f"probe BUSY {row.probe_busy}, reply {reply} for {row.moved_ids:,} moved "
        f"({'matches' if row.reply_matches else 'does not match'}){note}"
    )
