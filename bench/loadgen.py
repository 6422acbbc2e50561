"""The Locust side of finish-then-fetch: options, the Redis user, the measured window.

Imported by bench/locustfile.py only (importing Locust monkey-patches the
process with gevent, so nothing else in the suite imports this module).

- Options: every profile key (bench/profile.py's dataclasses) is a Locust
  option, so ``locust --config profiles/<name>.conf`` accepts the whole file;
  the keys of other stages are hidden from the help and the web UI.
- ``RedisUser``: Locust's custom-client pattern. It holds one connection per
  user, simulates the network round trip, times each call with
  ``perf_counter``, fires ``events.request`` and records µs into our own
  HdrHistograms (Locust's buckets are too coarse for ~100 µs calls).
- The window: the process that runs the test (the master, or the only
  process) resets everything after the warm-up, tells every process by a
  message with a new epoch, and at the end asks each for its final delta.
  Periodic deltas ride on ``report_to_master`` / ``worker_report``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_type_hints

import configargparse
import gevent
from locust import User, constant, events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from bench.connection import CountingRedis, RedisSettings
from bench.errors import BenchError
from bench.loadstats import (
    Aggregate,
    Recorder,
    RunSettings,
    build_summary,
    issued_job_ids,
    redis_cpu_seconds,
)
from bench.metrics import CommandStats
from bench.profile import FinishFetchOptions, known_keys, option_key, parse_value
from bench.queue import STRATEGIES, Queue
from bench.results import write_json

T = TypeVar("T")
log = logging.getLogger("echomq")

DEFAULT_QUEUE = "emq-locust"
FINAL_REPORT_WAIT_S = 10.0  # how long the master waits for each process's last delta

# Profile keys this locustfile uses, shown in Locust's web UI; the rest are accepted but hidden.
SHOWN_KEYS = frozenset(
    {
        "workers", "producers", "batch-size", "payload-bytes", "target-rate",
        "warmup-s", "measure-s", "rtt-ms",
    }
)  # fmt: skip

# Each process's measurements (one Recorder a process; users write to it).
RECORDER = Recorder()


# --- options -------------------------------------------------------------------------------


def _format_default(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(_format_default(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _checked(key: str, kind: Any, minimum: float | None) -> Callable[[str], str]:
    """An argparse type that checks a value as the profile loader does, and keeps it as text.

    Text, because Locust's web UI sends custom options back as text: the values
    are converted when a test starts (``run_settings``).
    """

    def check(raw: str) -> str:
        try:
            parse_value(key, kind, str(raw), minimum)
        except BenchError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return str(raw)

    return check


def add_options(parser: Any) -> None:
    """Register every profile key, and the locustfile's own options, with Locust's parser."""
    for key, (section, f) in known_keys().items():
        kind = get_type_hints(section)[f.name]
        shown = section is FinishFetchOptions and key in SHOWN_KEYS
        parser.add_argument(
            f"--{key}",
            type=_checked(key, kind, f.metadata.get("min")),
            default=_format_default(f.default),
            help=f"profile key {key} (a list takes the first value here)"
            if shown
            else configargparse.SUPPRESS,
            include_in_web_ui=shown,
        )
    parser.add_argument("--stages", default="", help=configargparse.SUPPRESS, include_in_web_ui=False)
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=None,
        help="finish-then-fetch strategy (default: the first of --strategies)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL", ""),
        help="Redis to load (default: $REDIS_URL, else --host when it is redis://..., else localhost:6379)",
        is_secret=True,
    )
    parser.add_argument("--queue", default=DEFAULT_QUEUE, help="queue name (its keys share the hash tag)")
    parser.add_argument(
        "--summary-json",
        default="",
        help="where the run's summary goes (default: <--csv prefix>_summary.json, when --csv is set)",
        include_in_web_ui=False,
    )


def run_settings(options: Any) -> RunSettings:
    """The run's single-valued settings from Locust's parsed options (lists take their first value)."""
    values: dict[str, Any] = {}
    hints = get_type_hints(FinishFetchOptions)
    for f in fields(FinishFetchOptions):
        raw = getattr(options, f.name, None)
        if raw is None:
            continue
        values[f.name] = parse_value(option_key(f.name), hints[f.name], str(raw), f.metadata.get("min"))
    profile = FinishFetchOptions(**values)
    return RunSettings(
        strategy=getattr(options, "strategy", None) or profile.strategies[0],
        workers=profile.workers[0],
        producers=profile.producers,
        batch_size=profile.batch_size,
        payload_bytes=profile.payload_bytes,
        target_rate=profile.target_rate,
        warmup_s=profile.warmup_s,
        measure_s=profile.measure_s,
        rtt_ms=profile.rtt_ms[0],
        queue=getattr(options, "queue", None) or DEFAULT_QUEUE,
    )


def redis_settings(environment: Environment) -> RedisSettings:
    options = environment.parsed_options
    url = getattr(options, "redis_url", "") or ""
    host = environment.host or ""
    if not url and host.startswith(("redis://", "rediss://", "unix://")):
        url = host
    return RedisSettings.from_url(url) if url else RedisSettings()


def summary_path(options: Any) -> Path | None:
    explicit = getattr(options, "summary_json", "")
    if explicit:
        return Path(explicit)
    prefix = getattr(options, "csv_prefix", None)
    return Path(f"{prefix}_summary.json") if prefix else None


# --- the user ------------------------------------------------------------------------------


class Current:
    """What every user of this process reads when it starts: set at each test start."""

    run: RunSettings | None = None
    redis: RedisSettings = RedisSettings()


class RedisUser(User):
    """Locust's custom-client pattern for Redis: one connection a user, every call timed.

    Concrete users set ``role`` ("producer" or "worker") and declare tasks.
    """

    abstract = True
    wait_time = constant(0)
    role: ClassVar[str] = ""

    client: CountingRedis
    queue: Queue
    load: RunSettings

    def on_start(self) -> None:
        if Current.run is None:
            raise BenchError("the test started before its settings were read")
        self.load = Current.run
        self.client = Current.redis.connect()
        self.queue = Queue.open(self.client, self.load.queue)  # SCRIPT LOADs before any timed call
        self._rtt_s = self.load.rtt_ms / 1000.0

    def on_stop(self) -> None:
        self.client.close()

    def simulate_rtt(self) -> None:
        """The simulated network: wait ``rtt_ms`` before a round trip (gevent.sleep, so others run)."""
        if self._rtt_s > 0:
            before = time.perf_counter()
            gevent.sleep(self._rtt_s)
            RECORDER.count("rtt_slept_us", int((time.perf_counter() - before) * 1e6))
            RECORDER.count("rtt_sleeps")

    def timed(
        self, request_type: str, name: str, call: Callable[..., T], *args: Any, size: int = 0, **kwargs: Any
    ) -> T:
        """One timed exchange with Redis: simulated RTT, the call, Locust's event and our µs."""
        started = time.perf_counter()
        trips = self.client.round_trips
        exception: Exception | None = None
        try:
            self.simulate_rtt()
            return call(*args, **kwargs)
        except Exception as exc:
            exception = exc
            RECORDER.count("errors")
            raise
        finally:
            elapsed = time.perf_counter() - started
            RECORDER.count(f"{self.role}_round_trips", self.client.round_trips - trips)
            if exception is None:
                RECORDER.record(f"call:{name}", elapsed * 1e6)
            self.environment.events.request.fire(
                request_type=request_type,
                name=name,
                response_time=elapsed * 1000.0,
                response_length=size,
                exception=exception,
                context={},
            )


# --- the measured window -------------------------------------------------------------------


def _role(environment: Environment) -> str:
    if isinstance(environment.runner, MasterRunner):
        return "master"
    if isinstance(environment.runner, WorkerRunner):
        return "worker"
    return "local"


def _process_id(environment: Environment) -> str:
    return str(getattr(environment.runner, "client_id", None) or f"pid{os.getpid()}")


class Controller:
    """Runs the window on the master (or the only process): warm-up, reset, end, summary."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.distributed = isinstance(environment.runner, MasterRunner)
        self.aggregate = Aggregate()
        self.own = Recorder()  # the master's own CPU, part of the load generator's
        self.epoch = 0
        self.window: tuple[float, float] | None = None
        self.started_at = 0.0
        self.stats_before: CommandStats | None = None
        self.stats_after: CommandStats | None = None
        self.redis_cpu: tuple[float, float] | None = None
        self.expected: set[str] = set()
        self.timers: list[gevent.Greenlet] = []
        self.client: CountingRedis | None = None

        events_ = environment.events
        events_.test_start.add_listener(self.on_test_start)
        events_.test_stopping.add_listener(self.on_test_stopping)
        events_.test_stop.add_listener(self.on_test_stop)
        events_.reset_stats.add_listener(self.reset)
        events_.worker_report.add_listener(self.on_worker_report)
        assert environment.runner is not None
        environment.runner.register_message("emq_final_report", self.on_final_report)

    def on_test_start(self, environment: Environment, **_: Any) -> None:
        run = Current.run
        assert run is not None
        self.window = None
        self.started_at = time.perf_counter()
        if self.client is not None:  # a second test from the web UI
            self.client.close()
        self.client = Current.redis.connect()
        self.timers = [gevent.spawn_later(run.warmup_s, self.reset)]
        options = environment.parsed_options
        if options is not None and options.headless and not options.run_time:
            # With no --run-time, a headless run ends itself after warm-up + measure.
            self.timers.append(gevent.spawn_later(run.warmup_s + run.measure_s, self._quit))
        log.info("echomq: %s, warm-up %gs then measuring", run.strategy, run.warmup_s)

    def _quit(self) -> None:
        assert self.environment.runner is not None
        self.environment.runner.quit()

    def reset(self, **_: Any) -> None:
        """Start a new window: every process drops what it has and counts from now."""
        runner = self.environment.runner
        if runner is None or self.client is None:
            return  # the web UI's reset button before any test: nothing to reset
        self.epoch += 1
        self.aggregate.reset(self.epoch)
        self.own.reset(self.epoch)
        self.stats_before = CommandStats.read(self.client)
        self.redis_cpu = (redis_cpu_seconds(self.client.info("cpu")), 0.0)
        runner.stats.reset_all()
        self.window = (time.perf_counter(), 0.0)
        runner.send_message("emq_reset", {"epoch": self.epoch})
        log.info("echomq: warm-up over, window %d opened", self.epoch)

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        delta = data.get("emq")
        if delta is not None:
            self.aggregate.absorb(client_id, "worker", delta)

    def on_final_report(self, environment: Environment, msg: Any, **_: Any) -> None:
        data = msg.data
        self.aggregate.absorb(data["process"], data["role"], data["delta"], final=True)

    def on_test_stopping(self, environment: Environment, **_: Any) -> None:
        for timer in self.timers:
            if timer is not gevent.getcurrent():  # the quit timer may be the one stopping the test
                timer.kill(block=False)
        if self.window is None or self.client is None:
            return
        self.window = (self.window[0], time.perf_counter())
        self.stats_after = CommandStats.read(self.client)
        assert self.redis_cpu is not None
        self.redis_cpu = (self.redis_cpu[0], redis_cpu_seconds(self.client.info("cpu")))
        self.own.freeze()
        runner = environment.runner
        assert runner is not None
        if self.distributed:
            assert isinstance(runner, MasterRunner)
            self.expected = {c.id for c in runner.clients.all}
        else:
            self.expected = {_process_id(environment)}
        runner.send_message("emq_final", {"epoch": self.epoch})

    def _missing(self) -> list[str]:
        final = {pid for pid, t in self.aggregate.processes.items() if t.final}
        return sorted(self.expected - final)

    def on_test_stop(self, environment: Environment, **_: Any) -> None:
        if self.window is None:
            log.warning("echomq: the test stopped during warm-up; nothing was measured")
            return
        deadline = time.monotonic() + FINAL_REPORT_WAIT_S
        while self._missing() and time.monotonic() < deadline:
            gevent.sleep(0.02)
        if self.distributed:
            self.aggregate.absorb(_process_id(environment), "master", self.own.take(), final=True)
        self.write_summary(environment)
        self.window = None

    def write_summary(self, environment: Environment) -> None:
        run = Current.run
        assert run is not None and self.window is not None and self.client is not None
        window_s = self.window[1] - self.window[0]
        server = None
        if self.stats_before is not None and self.stats_after is not None:
            server = self.stats_after.since(self.stats_before)
        redis_cpu_s = self.redis_cpu[1] - self.redis_cpu[0] if self.redis_cpu else None
        summary = build_summary(
            run,
            self.aggregate,
            window_s,
            server,
            redis_cpu_s,
            mode="distributed" if self.distributed else "local",
            missing_processes=self._missing(),
        )
        if not self.distributed:
            # Every user of this process has stopped: the queue is still, so the audit is exact.
            result = self.audit()
            summary["audit"] = {"ok": result.ok, "verdict": result.verdict, "counts": result.counts}
        d = summary["derived"]
        log.info(
            "echomq: %s: %d jobs in %.1fs = %.0f jobs/s, %.2f round trips/job, cycle p50 %s µs%s",
            run.strategy,
            d["jobs"],
            window_s,
            d["jobs_per_s"],
            d["round_trips_per_job"],
            summary["percentiles_us"].get("cycle", {}).get("p50", "-"),
            ", SATURATED: " + "; ".join(d["saturated_because"]) if d["saturated"] else "",
        )
        path = summary_path(environment.parsed_options)
        if path is not None:
            write_json(path, summary)

    def audit(self) -> Any:
        from bench.audit import audit

        assert self.client is not None and Current.run is not None
        queue = Queue.open(self.client, Current.run.queue)
        return audit(queue, issued_job_ids(queue))


def install_load_side(environment: Environment) -> None:
    """In each process that runs users: answer the window's messages, send deltas."""
    runner = environment.runner
    assert runner is not None
    role = _role(environment)

    def on_reset(environment: Environment, msg: Any, **_: Any) -> None:
        RECORDER.reset(int(msg.data["epoch"]))
        if role == "worker":
            runner.stats.reset_all()

    def on_final(environment: Environment, msg: Any, **_: Any) -> None:
        RECORDER.freeze()
        delta = RECORDER.take()
        runner.send_message(
            "emq_final_report", {"process": _process_id(environment), "role": role, "delta": delta}
        )

    runner.register_message("emq_reset", on_reset)
    runner.register_message("emq_final", on_final)
    if role == "worker":

        def on_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
            data["emq"] = RECORDER.take()

        environment.events.report_to_master.add_listener(on_report)


def apply_user_counts(environment: Environment, run: RunSettings) -> None:
    """Producers and workers as Locust fixed counts; with no -u given, exactly that many users."""
    for user_class in environment.user_classes:
        if issubclass(user_class, RedisUser):
            user_class.fixed_count = run.producers if user_class.role == "producer" else run.workers
    options = environment.parsed_options
    if options is not None and not getattr(options, "worker", False):
        if options.num_users is None:
            options.num_users = run.producers + run.workers
        if options.spawn_rate is None:
            options.spawn_rate = options.num_users  # all within a second, inside the warm-up


def read_settings(environment: Environment) -> RunSettings:
    """Read the options (again: the web UI may have changed them) for this process's users."""
    run = run_settings(environment.parsed_options)
    Current.run = run
    Current.redis = redis_settings(environment)
    return run


@events.init_command_line_parser.add_listener
def _on_parser(parser: Any, **_: Any) -> None:
    add_options(parser)


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    if environment.parsed_options is None:
        return  # a library user without our options: nothing to wire
    apply_user_counts(environment, read_settings(environment))

    def on_test_start(environment: Environment, **_: Any) -> None:
        apply_user_counts(environment, read_settings(environment))

    # Added first, so the settings are read before the Controller's test_start listener runs.
    environment.events.test_start.add_listener(on_test_start)
    role = _role(environment)
    if role != "worker":
        Controller(environment)
    if role != "master":
        install_load_side(environment)
