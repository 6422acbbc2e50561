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
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_type_hints

import configargparse
import gevent
import redis
from locust import User, constant, events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from bench.errors import BenchError
from bench.finish_fetch.loadstats import (
    ERROR_PREFIX,
    Aggregate,
    Recorder,
    RunSettings,
    build_summary,
    error_kind,
    issued_job_ids,
    redis_cpu_seconds,
)
from bench.harness.profile import FinishFetchOptions, known_keys, option_key, parse_value
from bench.harness.server import check_server
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import CountingRedis, RedisSettings
from bench.protocol.queue import STRATEGIES, Queue
from bench.results import write_json

T = TypeVar("T")
log = logging.getLogger("echomq")

DEFAULT_QUEUE = "emq-locust"
FINAL_REPORT_WAIT_S = 10.0  # how long the master waits for each process's last delta
RECONNECT_BACKOFF_S = 0.05  # a user pauses this long after a connection error (a refused connect is instant)
WATCH_INTERVAL_S = 0.25  # how often the controller checks the server is there and the same
UNREACHABLE_ABORT_S = 2.0  # Redis unreachable this long stops the run (a dropped connection is not that)
CONTROL_TIMEOUT_S = 30.0  # the controller's own socket timeout: a paused server is waited for
EXIT_STOPPED = 3  # Locust's exit code when the run stopped early (Redis gone or restarted)
EXIT_INTERRUPTED = 130  # ... when Ctrl-C (SIGINT) stopped it

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
        socket_timeout_s=profile.socket_timeout_s,
    )


def redis_settings(environment: Environment, socket_timeout_s: float = 30.0) -> RedisSettings:
    options = environment.parsed_options
    url = getattr(options, "redis_url", "") or ""
    host = environment.host or ""
    if not url and host.startswith(("redis://", "rediss://", "unix://")):
        url = host
    settings = RedisSettings.from_url(url) if url else RedisSettings()
    return dataclasses.replace(settings, socket_timeout_s=socket_timeout_s)


def control_settings() -> RedisSettings:
    """The controller's connection: the load's server, with a timeout that outlasts a pause."""
    timeout = max(Current.redis.socket_timeout_s, CONTROL_TIMEOUT_S)
    return dataclasses.replace(Current.redis, socket_timeout_s=timeout)


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
            # Counted by kind, and raised: Locust logs it and the task starts over. Never re-sent
            # (the client has no retries): a script that may have run must not run twice.
            exception = exc
            RECORDER.count("errors")
            RECORDER.count(ERROR_PREFIX + error_kind(exc))
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
            if isinstance(exception, redis.ConnectionError):
                # A refused connect fails at once: do not spin (and flood the log) while Redis is away.
                gevent.sleep(RECONNECT_BACKOFF_S)


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
    """Runs the window on the master (or the only process): warm-up, reset, end, summary.

    It also watches the server: Redis unreachable for UNREACHABLE_ABORT_S, or
    restarted (a new run_id: without persistence its data is gone), stops the
    run early, as does Ctrl-C. A run stopped early still writes what it
    measured, with ``complete: false`` and the reason in ``aborted``.
    """

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
        self.run_id: str | None = None  # the server's, at the test's start
        self.aborted: str | None = None  # why the run stopped early
        self.server_error: str | None = None  # why the server's own figures are missing

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
        self.client = control_settings().connect()
        self.aborted = self.server_error = None
        try:  # the server's identity now, so a restart from here on is seen (else the watcher takes it)
            self.run_id = str(self.client.info("server")["run_id"])
        except redis.RedisError:
            self.run_id = None
        self.timers = [gevent.spawn_later(run.warmup_s, self.reset), gevent.spawn(self.watch_server)]
        options = environment.parsed_options
        if options is not None and options.headless and not options.run_time:
            # With no --run-time, a headless run ends itself after warm-up + measure.
            self.timers.append(gevent.spawn_later(run.warmup_s + run.measure_s, self._quit))
        log.info("echomq: %s, warm-up %gs then measuring", run.strategy, run.warmup_s)

    def _quit(self) -> None:
        assert self.environment.runner is not None
        self.environment.runner.quit()

    def abort(self, reason: str, exit_code: int = EXIT_STOPPED) -> None:
        """Stop the run early: what was measured is still written, marked incomplete."""
        if self.aborted is not None:
            return
        self.aborted = reason
        self.environment.process_exit_code = exit_code
        log.error("echomq: stopping the run early: %s", reason)
        self._quit()

    def on_sigint(self) -> None:
        """Ctrl-C: stop the run as an interrupted one (instead of Locust's plain KeyboardInterrupt);
        a second Ctrl-C exits at once."""
        if self.aborted is not None:
            log.error("echomq: interrupted again: exiting now, without a summary")
            os._exit(EXIT_INTERRUPTED)
        self.abort("interrupted (SIGINT)", EXIT_INTERRUPTED)

    def watch_server(self) -> None:
        """Stop the run when Redis is gone past a grace period, or restarted (a new run_id)."""
        client = control_settings().connect()  # its own connection: never behind the controller's
        where = Current.redis.where
        down_since: float | None = None
        try:
            while True:
                try:
                    run_id = str(client.info("server")["run_id"])
                except (redis.BusyLoadingError, redis.TimeoutError, redis.ResponseError):
                    down_since = None  # there, only slow or busy: the users count their own timeouts
                    gevent.sleep(WATCH_INTERVAL_S)
                    continue
                except redis.ConnectionError as exc:
                    now = time.monotonic()
                    down_since = down_since if down_since is not None else now
                    if now - down_since >= UNREACHABLE_ABORT_S:
                        self.abort(
                            f"Redis at {where} unreachable for {UNREACHABLE_ABORT_S:g}s: {_first_line(exc)}"
                        )
                        return
                    gevent.sleep(WATCH_INTERVAL_S)
                    continue
                down_since = None
                if self.run_id is None:
                    self.run_id = run_id
                elif run_id != self.run_id:
                    self.abort(
                        f"Redis at {where} restarted during the run (new run_id): "
                        "without persistence its data is gone"
                    )
                    return
                gevent.sleep(WATCH_INTERVAL_S)
        finally:
            client.close()

    def _server_figures(self) -> tuple[CommandStats, float] | None:
        """commandstats and Redis CPU seconds now; None (and the reason kept) when Redis is away."""
        assert self.client is not None
        try:
            return CommandStats.read(self.client), redis_cpu_seconds(self.client.info("cpu"))
        except redis.RedisError as exc:
            self.server_error = f"{error_kind(exc)}: {_first_line(exc)}"
            return None

    def reset(self, **_: Any) -> None:
        """Start a new window: every process drops what it has and counts from now."""
        runner = self.environment.runner
        if runner is None or self.client is None:
            return  # the web UI's reset button before any test: nothing to reset
        self.epoch += 1
        self.aggregate.reset(self.epoch)
        self.own.reset(self.epoch)
        figures = self._server_figures()
        self.stats_before = figures[0] if figures else None
        self.redis_cpu = (figures[1], 0.0) if figures else None
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
        figures = self._server_figures()
        self.stats_after = figures[0] if figures else None
        if self.redis_cpu is not None and figures is not None:
            self.redis_cpu = (self.redis_cpu[0], figures[1])
        else:
            self.redis_cpu = None
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

    def _awaited(self) -> bool:
        """Whether a process whose final delta is missing is still there to send it."""
        missing = set(self._missing())
        if not missing or not self.distributed:
            return bool(missing)
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        return bool(missing & {c.id for c in runner.clients.all})

    def on_test_stop(self, environment: Environment, **_: Any) -> None:
        if self.window is None:
            why = f" ({self.aborted})" if self.aborted else ""
            log.warning("echomq: the test stopped during warm-up%s; nothing was measured", why)
            return
        deadline = time.monotonic() + FINAL_REPORT_WAIT_S
        while self._awaited() and time.monotonic() < deadline:
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
        summary["aborted"] = self.aborted
        summary["complete"] = summary["complete"] and self.aborted is None
        summary["server_error"] = self.server_error
        if not self.distributed:
            # Every user of this process has stopped: the queue is still, so the audit is exact.
            summary["audit"] = self.audit()
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
        if d["errors"]:
            kinds = ", ".join(f"{n} {kind}" for kind, n in d["errors_by_kind"].items())
            log.warning("echomq: %d calls failed in the window (%s)", d["errors"], kinds)
        path = summary_path(environment.parsed_options)
        if path is not None:
            write_json(path, summary)
        if self.aborted:
            log.error("echomq: run stopped early: %s; what it measured is in %s", self.aborted, path)

    def audit(self) -> dict[str, Any]:
        """The queue audit as the summary holds it; a restart or an absent server says so."""
        from bench.protocol.audit import audit

        assert self.client is not None and Current.run is not None
        try:
            queue = Queue.open(self.client, Current.run.queue)
            result = audit(queue, issued_job_ids(queue), self.run_id)
        except redis.RedisError as exc:
            return {"ok": False, "verdict": f"not audited: Redis unreachable ({_first_line(exc)})"}
        return {"ok": result.ok, "verdict": result.verdict, "counts": result.counts}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__


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
    Current.redis = redis_settings(environment, run.socket_timeout_s)
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
    if getattr(environment.parsed_options, "headless", False) and role != "worker":
        _check_server_or_exit()
    # Headless, Ctrl-C ends the run as an interrupted one, summary written, in place of a
    # KeyboardInterrupt (with the web UI, Locust's own Ctrl-C handling stays: it quits).
    headless = bool(getattr(environment.parsed_options, "headless", False))
    if role != "worker":
        controller = Controller(environment)
        if headless:
            gevent.signal_handler(signal.SIGINT, controller.on_sigint)
    elif headless:
        gevent.signal_handler(signal.SIGINT, _worker_sigint)
    if role != "master":
        install_load_side(environment)


def _check_server_or_exit() -> None:
    """Headless: a Redis that cannot serve the run is one line and exit 2, before any user starts
    (instead of a traceback from every user)."""
    try:
        check_server(
            Current.redis,
            unreachable_remedy="start it, or point REDIS_URL or --redis-url at one "
            "(`python -m bench run` starts its own)",
        )
    except BenchError as exc:
        sys.stderr.write(f"echomq-bench: error: {exc}\n")
        sys.exit(2)


def _worker_sigint() -> None:
    """A worker leaves the first Ctrl-C to its master, which ends the run and asks for the last
    deltas (the terminal sends SIGINT to every process of Locust); a second one exits at once."""
    if getattr(_worker_sigint, "seen", False):
        os._exit(EXIT_INTERRUPTED)
    _worker_sigint.seen = True  # type: ignore[attr-defined]
    log.info("echomq: Ctrl-C: the master ends the run; press it again to leave now")
