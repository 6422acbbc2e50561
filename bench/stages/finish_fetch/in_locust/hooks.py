"""Stage 1 wired into Locust's events: its options, its user counts, the window, Ctrl-C.
bench/locustfile.py calls ``install()``; only Locust's own (gevent-patched) processes import this.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import gevent
import redis
from locust import events
from locust.env import Environment

from bench.errors import BenchError
from bench.harness.provenance import code_record
from bench.harness.server import check_server, server_identity
from bench.protocol.connection import redact_url
from bench.results.files import read_json, write_meta
from bench.results.meta import RunMeta
from bench.stages.finish_fetch.in_locust.current import Current, read_settings
from bench.stages.finish_fetch.in_locust.options import add_options, begin_test, default_summary, summary_path
from bench.stages.finish_fetch.in_locust.user import RedisUser
from bench.stages.finish_fetch.in_locust.window import (
    EXIT_INTERRUPTED,
    Controller,
    install_load_side,
    role_of,
)
from bench.stages.finish_fetch.summary import TrialSummary
from bench.stages.finish_fetch.trial_settings import TrialSettings

log = logging.getLogger("echomq")

_installed = False  # once per process, however many locustfiles call install()


def install() -> None:
    """Register the stage's listeners with Locust (before Locust parses its command line)."""
    global _installed
    if _installed:
        return
    events.init_command_line_parser.add_listener(add_options)
    events.init.add_listener(_on_init)
    _installed = True


def apply_user_counts(environment: Environment, trial: TrialSettings) -> None:
    """Producers and workers (or the fidelity run's one probe) as Locust fixed counts. A -u that
    differs would start other counts than the run records (Locust fills the fixed counts in turn):
    one line, exit 2. In the web UI the profile's shape sets the users."""
    counts = {"producer": trial.producers, "worker": trial.workers, "probe": 0}
    if trial.probe:  # the latency-fidelity run: one probe user and nothing else
        counts = {"producer": 0, "worker": 0, "probe": 1}
    for user_class in environment.user_classes:
        if issubclass(user_class, RedisUser):
            user_class.fixed_count = counts.get(user_class.role, 0)
    options = environment.parsed_options
    if options is not None and not getattr(options, "worker", False):
        users = sum(counts.values())
        if options.num_users is None:
            options.num_users = users
        elif options.num_users != users and environment.web_ui is None:
            sys.stderr.write(
                f"echomq-bench: error: -u {options.num_users} does not match producers {trial.producers} "
                f"+ workers {trial.workers} = {users}; leave -u out (the users follow --producers and "
                "--workers) or change those\n"
            )
            sys.exit(2)
        if options.spawn_rate is None:
            options.spawn_rate = options.num_users  # all within a second, inside the warm-up


def _on_init(environment: Environment, **_: Any) -> None:
    if environment.parsed_options is None:
        return  # a library user without our options: nothing to wire
    apply_user_counts(environment, read_settings(environment))

    role = role_of(environment)

    def prepare() -> TrialSettings:
        """The settings of the test about to start (the web UI's form may have changed them)."""
        trial = read_settings(environment)
        apply_user_counts(environment, trial)
        return trial

    def on_test_start(environment: Environment, **_: Any) -> None:
        trial = prepare()
        if role != "worker":
            begin_test(trial.strategy)
            _started[:] = [_now()]

    # Added first, so the settings are read before the Controller's test_start listener runs.
    environment.events.test_start.add_listener(on_test_start)
    headless = bool(getattr(environment.parsed_options, "headless", False))
    if headless and role != "worker":
        _check_server_or_exit()
    # Headless, Ctrl-C ends the run as an interrupted one, summary written, in place of a
    # KeyboardInterrupt (with the web UI, Locust's own Ctrl-C handling stays: it quits).
    if role != "worker":
        controller = Controller(environment)
        tab = None
        if environment.web_ui is not None:
            from bench.stages.finish_fetch.in_locust import web_ui  # Flask and the UI's pieces only with a UI

            tab = web_ui.install(environment, controller, prepare)
            if problem := web_ui.unreachable_line(environment):
                log.error("echomq: %s; Start is refused until it answers", problem)

        def after_test(environment: Environment, **_: Any) -> None:
            """After the Controller wrote the summary: say where, keep it for the UI's tab."""
            path = summary_path(environment.parsed_options)
            summary = _read_summary(path)
            if path is not None and summary is not None:
                if path == default_summary():
                    _write_run_meta(path.parent, summary, environment)
                log.info("echomq: the run's summary is in %s", path)
            if tab is not None and summary is not None:
                tab.record_finished(summary)

        environment.events.test_stop.add_listener(after_test)  # after the Controller's own
        if headless:
            gevent.signal_handler(signal.SIGINT, controller.on_sigint)
    elif headless:
        gevent.signal_handler(signal.SIGINT, _worker_sigint)
    if role != "master":
        install_load_side(environment)


_started: list[str] = []  # when the current test started


def _now() -> str:
    return dt.datetime.now().isoformat(timespec="seconds")


def _read_summary(path: Path | None) -> TrialSummary | None:
    try:
        return TrialSummary.from_json(read_json(path)) if path is not None and path.is_file() else None
    except (OSError, ValueError, TypeError):
        return None


def _write_run_meta(folder: Path, summary: TrialSummary, environment: Environment) -> None:
    """A direct Locust run's folder under results/: meta.json beside its summary, so `bench runs`
    lists it and says whether it completed."""
    headless = bool(getattr(environment.parsed_options, "headless", False))
    info = _server_info()
    name, own = server_identity(info) if info else (None, None)
    write_meta(
        folder,
        RunMeta,
        **code_record(),
        server_name=name,
        server_version=own,
        redis_version=str(info["redis_version"]) if info and "redis_version" in info else None,
        run_id=folder.name,
        profile="locust",
        source=f"locust -f bench/locustfile.py ({'headless' if headless else 'web UI'})",
        started=_started[0] if _started else None,
        finished=_now(),
        complete=summary.complete,
        reason=summary.aborted,
        stages_planned=["finish_fetch"],
        stages_done=["finish_fetch"] if summary.measured else [],
        settings=summary.settings.as_dict(),
        redis_url=redact_url(Current.redis.url),
        locust=metadata.version("locust"),  # this process runs it
    )


def _server_info() -> dict[str, object] | None:
    """INFO server of the run's server (on a cluster, one node's), or None when it does not answer."""
    try:
        client = Current.redis.connect_single()
        try:
            return dict(client.info("server"))
        finally:
            client.close()
    except redis.RedisError:
        return None


def _check_server_or_exit() -> None:
    """Headless: a Redis that cannot serve the run is one line and exit 2, before any user starts
    (instead of a traceback from every user)."""
    try:
        check_server(
            Current.redis,
            unreachable_remedy="start it, or point REDIS_URL or --redis-url at one "
            "(`echomq-bench run` starts its own)",
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
