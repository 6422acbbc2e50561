"""The measured window of a Locust run, and its collection from every process.

The process that runs the test resets everything after the warm-up, tells every process by a
message with a new epoch, and at the end asks each for its final delta; periodic deltas ride on
``report_to_master``. Only deltas of the current epoch count, so the merged histograms hold
exactly the window.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any

import gevent
import locust.runners
import redis
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from bench.errors import first_line
from bench.harness.machine import clock
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client
from bench.stages.finish_fetch.in_locust.current import RECORDER, REFUSED_MESSAGE, Current, control_settings
from bench.stages.finish_fetch.in_locust.options import summary_path
from bench.stages.finish_fetch.in_locust.server_watch import ServerWatch
from bench.stages.finish_fetch.in_locust.sleep import prompt_stop
from bench.stages.finish_fetch.in_locust.trial_queues import TrialQueues
from bench.stages.finish_fetch.loadstats import Aggregate, Recorder, error_kind, server_figures
from bench.stages.finish_fetch.seats import started
from bench.stages.finish_fetch.summary import (
    ServerFigures,
    TrialSummary,
    WindowEnd,
    build_summary,
    unmeasured_summary,
    write_summary,
)
from bench.stages.finish_fetch.trial_settings import TrialSettings
from bench.stages.finish_fetch.wait_list import SAMPLE_EVERY_S, WaitSamples, wait_length

log = logging.getLogger("echomq")

FINAL_REPORT_WAIT_S = 10.0  # how long the master waits for each process's last delta
USERS_START_DEADLINE_S = 30.0  # the warm-up waits this long at most for every user to run
USERS_POLL_S = 0.02
EXIT_STOPPED = 3  # Locust's exit code when the run stopped early (Redis gone or restarted)
EXIT_INTERRUPTED = 130  # ... when Ctrl-C (SIGINT) stopped it


def role_of(environment: Environment) -> str:
    if isinstance(environment.runner, MasterRunner):
        return "master"
    if isinstance(environment.runner, WorkerRunner):
        return "worker"
    return "local"


def _process_id(environment: Environment) -> str:
    return str(getattr(environment.runner, "client_id", None) or f"pid{os.getpid()}")


class Controller:
    """Runs the window on the master (or the only process): warm-up, reset, end, summary. A run
    stopped early (Redis lost or restarted, Ctrl-C) still writes what it measured, marked so."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.distributed = isinstance(environment.runner, MasterRunner)
        self.aggregate = Aggregate()
        self.own = Recorder()  # the master's own CPU, part of the load generator's
        self.epoch = 0
        self.window: tuple[float, float] | None = None
        self.window_clock = (0.0, 0.0)  # the same window on the machine watch's clock
        self.stats_before: dict[str, CommandStats] | None = None  # a master's each (host:port)
        self.stats_after: dict[str, CommandStats] | None = None
        self.trial = TrialQueues(environment)  # the test's queues: opened at its start, audited, deleted
        self.redis_cpu: tuple[float, float] | None = None
        self.used_memory: tuple[int, int] | None = None  # the server's, at the window's open and close
        self.expected: set[str] = set()
        self.timers: list[gevent.Greenlet] = []
        self.client: Client | None = None
        self.watch: ServerWatch | None = None  # knows the server's run_id, for the audit
        self.aborted: str | None = None  # why the run stopped early
        self.refused: str | None = None  # the kind of refusal that stopped it (OOM, READONLY, ...)
        self.server_error: str | None = None  # why the server's own figures are missing
        self.wait = WaitSamples()  # the wait list's length through the window
        self.sampler: gevent.Greenlet | None = None

        events_ = environment.events
        events_.test_start.add_listener(self.on_test_start)
        events_.test_stopping.add_listener(self.on_test_stopping)
        events_.test_stop.add_listener(self.on_test_stop)
        events_.reset_stats.add_listener(self.reset)
        events_.worker_report.add_listener(self.on_worker_report)
        assert environment.runner is not None
        environment.runner.register_message("emq_final_report", self.on_final_report)
        environment.runner.register_message(REFUSED_MESSAGE, self.on_refused)

    def on_test_start(self, environment: Environment, **_: Any) -> None:
        trial = Current.trial
        assert trial is not None
        self.window = None
        if self.client is not None:  # a second test from the web UI
            self.client.close()
        self.client = control_settings().connect()
        self.aborted = self.server_error = self.refused = None
        run_id: str | None = None
        with contextlib.suppress(redis.RedisError):  # else the watcher learns it on its first answer
            run_id = str(self.client.info("server")["run_id"])  # so a restart from here on is seen
        trial = self.trial.open(self.client, trial)
        self.watch = ServerWatch(control_settings(), run_id, self.abort)
        options = environment.parsed_options
        # With no --run-time, a headless run ends itself after warm-up + measure.
        auto_quit = bool(options is not None and options.headless and not options.run_time)
        self.timers = [gevent.spawn(self._window, trial, auto_quit), gevent.spawn(self.watch.run)]
        log.info("echomq: %s, warm-up %gs then measuring", trial.strategy, trial.warmup_s)

    def _window(self, trial: TrialSettings, auto_quit: bool) -> None:
        """Warm-up, window, (quit): timed from when every user runs, not from test_start.

        test_start fires on the master as it sends the spawn messages; a worker
        process starts its users only after it has handled its message, and
        Locust rebuilds its whole default parser for each of the ~90 parsed
        options in it (~1 s of CPU, seconds on a loaded machine): a window
        timed from test_start closed before the workers' users ran (0 jobs).
        """
        runner = self.environment.runner
        assert runner is not None
        expected = min(trial.producers + trial.workers, runner.target_user_count)
        deadline = time.monotonic() + USERS_START_DEADLINE_S
        while (ready := self._users_ready()) < expected:
            if time.monotonic() >= deadline:
                self.abort(f"only {ready} of {expected} users started within {USERS_START_DEADLINE_S:g}s")
                return
            gevent.sleep(USERS_POLL_S)
        gevent.sleep(trial.warmup_s)
        self.reset()
        if auto_quit:
            gevent.sleep(trial.measure_s)
            self._quit()

    def _users_ready(self) -> int:
        """Users spawned and done with their start: a user counts itself on the server once it has
        connected and loaded its scripts (on a cluster, seconds on a loaded machine), so a window
        does not open before the last one's first job."""
        assert self.environment.runner is not None
        spawned = self.environment.runner.user_count
        if not self.trial.queues:
            return spawned
        try:
            return min(spawned, started(self.trial.queues[0]))
        except redis.RedisError:
            return 0  # the watcher says why, or the deadline does

    def _quit(self) -> None:
        runner = self.environment.runner
        assert runner is not None
        if isinstance(runner, MasterRunner):
            prompt_stop(locust.runners)
            # quit() alone fires test_stop before the workers hear of it: their users would
            # go on adding jobs after the queues are deleted. stop() waits for them first.
            runner.stop()
        runner.quit()

    def abort(self, reason: str, exit_code: int = EXIT_STOPPED) -> None:
        """Stop the run early: what was measured is still written, marked incomplete."""
        if self.aborted is not None:
            return
        self.aborted = reason
        self.environment.process_exit_code = exit_code
        log.error("echomq: stopping the run early: %s", reason)
        self._quit()

    def on_refused(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A user met a reply every later call gets too: stop the run, its line as the reason.
        In its own greenlet: the user's process may be this one, and the stop kills its users."""
        if self.aborted is None:
            self.refused = str(msg.data["kind"])
            gevent.spawn(self.abort, str(msg.data["line"]))

    def on_sigint(self) -> None:
        """Ctrl-C: stop the run as an interrupted one (instead of Locust's plain KeyboardInterrupt);
        a second Ctrl-C exits at once."""
        if self.aborted is not None:
            log.error("echomq: interrupted again: exiting now, without a summary")
            os._exit(EXIT_INTERRUPTED)
        self.abort("interrupted (SIGINT)", EXIT_INTERRUPTED)

    def _server_figures(self) -> tuple[dict[str, CommandStats], float, int] | None:
        """Each master's commandstats and Redis CPU seconds now; None (and the reason kept) when
        Redis is away."""
        assert self.client is not None
        try:
            return server_figures(self.client)
        except redis.RedisError as exc:
            self.server_error = f"{error_kind(exc)}: {first_line(exc)}"
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
        self.used_memory = (figures[2], 0) if figures else None
        runner.stats.reset_all()
        self.window = (time.perf_counter(), 0.0)
        self.window_clock = (clock(), 0.0)
        runner.send_message("emq_reset", {"epoch": self.epoch})
        self.wait = WaitSamples()
        if self.sampler is not None:
            self.sampler.kill(block=False)
        self.sampler = gevent.spawn(self._sample_wait, self.wait)
        log.info("echomq: warm-up over, window %d opened", self.epoch)

    def _sample_wait(self, into: WaitSamples) -> None:
        """The wait list's length every SAMPLE_EVERY_S until the window closes (killed then)."""
        while True:
            gevent.sleep(SAMPLE_EVERY_S)
            with contextlib.suppress(redis.RedisError):  # a sample missed is no sample
                into.add(wait_length(self.trial.queues), len(self.trial.queues))

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        if (delta := data.get("emq")) is not None:
            self.aggregate.absorb(client_id, "worker", delta)

    def on_final_report(self, environment: Environment, msg: Any, **_: Any) -> None:
        data = msg.data
        self.aggregate.absorb(data["process"], data["role"], data["delta"], final=True)

    def on_test_stopping(self, environment: Environment, **_: Any) -> None:
        for timer in self.timers:
            if timer is not gevent.getcurrent():  # the quit timer may be the one stopping the test
                timer.kill(block=False)
        if self.sampler is not None:
            self.sampler.kill(block=False)  # the window closes: no sample after it
            self.sampler = None
        if self.window is None or self.client is None:
            return
        self.window = (self.window[0], time.perf_counter())
        self.window_clock = (self.window_clock[0], clock())
        figures = self._server_figures()
        self.stats_after = figures[0] if figures else None
        self.redis_cpu = (self.redis_cpu[0], figures[1]) if self.redis_cpu and figures else None
        self.used_memory = (self.used_memory[0], figures[2]) if self.used_memory and figures else None
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
        path = summary_path(environment.parsed_options)
        if self.window is None:
            # Stopped before the window opened: the summary still says why (stage.py reads it).
            assert Current.trial is not None
            write_summary(unmeasured_summary(Current.trial, self._mode(), self.aborted, self.refused), path)
            self.trial.delete()
            return
        deadline = time.monotonic() + FINAL_REPORT_WAIT_S
        while self._awaited() and time.monotonic() < deadline:
            gevent.sleep(0.02)
        if self.distributed:
            self.aggregate.absorb(_process_id(environment), "master", self.own.take(), final=True)
        write_summary(self.summary(), path)
        self.window = None
        self.trial.delete()

    def _mode(self) -> str:
        return "distributed" if self.distributed else "local"

    def summary(self) -> TrialSummary:
        """The closed window's summary: merged parts, the server's deltas, why it ended early."""
        trial = Current.trial
        assert trial is not None and self.window is not None
        by_master = None
        if self.stats_before is not None and self.stats_after is not None:
            before = self.stats_before
            by_master = {m: now.since(before[m]) for m, now in self.stats_after.items() if m in before}
        server = ServerFigures(
            by_master,  # the whole is its masters' sum, exactly
            self.redis_cpu[1] - self.redis_cpu[0] if self.redis_cpu else None,
            self.used_memory[1] - self.used_memory[0] if self.used_memory else None,
            self.trial.home,
            self.server_error,
        )
        return build_summary(
            trial,
            self.aggregate,
            self.window[1] - self.window[0],
            self._mode(),
            server,
            WindowEnd(self._missing(), self.aborted, self.refused),
            # One process: every user has stopped, the queue is still, so the audit is exact.
            audit=None if self.distributed else self.trial.audit(self.refused),
            window_clock=self.window_clock,
            wait=self.wait,
        )


def install_load_side(environment: Environment) -> None:
    """In each process that runs users: answer the window's messages, send deltas."""
    runner = environment.runner
    assert runner is not None
    role = role_of(environment)

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
