"""Stage 1 wired into Locust's events: its options, its user counts, the window, Ctrl-C.

bench/locustfile.py calls ``install()``; importing Locust monkey-patches the
process with gevent, so nothing outside Locust's own processes imports this
folder's Locust side (stage.py runs Locust as a child process).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

import gevent
from locust import events
from locust.env import Environment

from bench.errors import BenchError
from bench.finish_fetch.current import Current, read_settings
from bench.finish_fetch.loadstats import RunSettings
from bench.finish_fetch.options import add_options
from bench.finish_fetch.user import RedisUser
from bench.finish_fetch.window import EXIT_INTERRUPTED, Controller, install_load_side, role_of
from bench.harness.server import check_server

log = logging.getLogger("echomq")

_installed = False  # once per process, however many locustfiles call install()


def install() -> None:
    """Register the stage's listeners with Locust (before Locust parses its command line)."""
    global _installed
    if _installed:
        return
    events.init_command_line_parser.add_listener(_on_parser)
    events.init.add_listener(_on_init)
    _installed = True


def apply_user_counts(environment: Environment, run: RunSettings) -> None:
    """Producers and workers (or the one probe) as Locust fixed counts; with no -u given, exactly that
    many users."""
    counts = {"producer": run.producers, "worker": run.workers, "probe": 0}
    if run.probe:  # the latency-fidelity run: one probe user and nothing else
        counts = {"producer": 0, "worker": 0, "probe": 1}
    for user_class in environment.user_classes:
        if issubclass(user_class, RedisUser):
            user_class.fixed_count = counts.get(user_class.role, 0)
    options = environment.parsed_options
    if options is not None and not getattr(options, "worker", False):
        if options.num_users is None:
            options.num_users = sum(counts.values())
        if options.spawn_rate is None:
            options.spawn_rate = options.num_users  # all within a second, inside the warm-up


def _on_parser(parser: Any, **_: Any) -> None:
    add_options(parser)


def _on_init(environment: Environment, **_: Any) -> None:
    if environment.parsed_options is None:
        return  # a library user without our options: nothing to wire
    apply_user_counts(environment, read_settings(environment))

    def on_test_start(environment: Environment, **_: Any) -> None:
        apply_user_counts(environment, read_settings(environment))

    # Added first, so the settings are read before the Controller's test_start listener runs.
    environment.events.test_start.add_listener(on_test_start)
    role = role_of(environment)
    headless = bool(getattr(environment.parsed_options, "headless", False))
    if headless and role != "worker":
        _check_server_or_exit()
    # Headless, Ctrl-C ends the run as an interrupted one, summary written, in place of a
    # KeyboardInterrupt (with the web UI, Locust's own Ctrl-C handling stays: it quits).
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
