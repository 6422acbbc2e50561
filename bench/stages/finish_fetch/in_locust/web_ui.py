"""Stage 1 in Locust's web UI: the Host field shows the Redis URL with its password redacted and
every answer is scrubbed of it (redaction.py); an "echomq live" tab of µs figures from our merged
HdrHistograms (web_tab.py: Locust's own tabs round to whole milliseconds); ``ProfileShape`` starts
exactly producers + workers users and ends the test after warm-up + measure, as a headless run
ends; a Start is refused, in one line, when Redis does not answer or a setting is wrong.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from typing import Any

from flask import Response, jsonify, request
from locust import LoadTestShape
from locust.env import Environment

from bench.errors import BenchError
from bench.harness.server import check_server
from bench.stages.finish_fetch.in_locust.options import redis_settings, trial_settings
from bench.stages.finish_fetch.in_locust.redaction import scrub, show_host
from bench.stages.finish_fetch.in_locust.web_tab import COLUMNS, TAB_KEY, LiveTab, shown
from bench.stages.finish_fetch.in_locust.window import Controller
from bench.stages.finish_fetch.trial_settings import TrialSettings

log = logging.getLogger("echomq")

LIVE_ROUTE = "/echomq/live"
STATS_ROUTE = "/stats/requests"
SCRUBBED_TYPES = ("application/json", "text/html", "text/csv", "text/plain", "application/javascript")
UNREACHABLE_REMEDY = "start it, or put its URL in the Host field (or REDIS_URL), then press Start again"


class ProfileShape(LoadTestShape):
    """The profile's users, all at once; the test ends after warm-up + measure."""

    def __init__(self, prepare: Callable[[], TrialSettings]) -> None:
        super().__init__()
        self._prepare = prepare
        self._run: TrialSettings | None = None

    def reset_time(self) -> None:
        super().reset_time()
        self._run = None  # a new test: read the form's settings again at its first tick

    def tick(self) -> tuple[int, float] | None:
        if self._run is None:
            self._run = self._prepare()
        if self.get_run_time() >= self._run.warmup_s + self._run.measure_s:
            return None
        users = self._run.producers + self._run.workers
        return users, float(users)


def check_start(environment: Environment, form: dict[str, str]) -> str | None:
    """Why a Start with these form values cannot run (a setting, or Redis), or None."""
    options = argparse.Namespace(**vars(environment.parsed_options))
    for key, value in form.items():
        if key in vars(options) and key != "host":
            setattr(options, key, value)
    try:
        run = trial_settings(options)
        settings = redis_settings(options, form.get("host", environment.host or ""), run.socket_timeout_s)
        check_server(settings, unreachable_remedy=UNREACHABLE_REMEDY)
    except BenchError as exc:
        return str(exc)
    return None


def install(
    environment: Environment, controller: Controller, prepare: Callable[[], TrialSettings]
) -> LiveTab:
    """Wire the web UI: redacted Host, the tab and its route, the profile's shape, the Start check."""
    web_ui = environment.web_ui
    assert web_ui is not None
    tab = LiveTab(environment, controller)
    # Host shows where the load goes, redacted: no "missing host" banner, no password in the page.
    settings = redis_settings(environment.parsed_options, environment.host or "")
    environment.host = show_host(settings.url if not environment.host else environment.host)
    environment.shape_class = ProfileShape(prepare)
    environment.shape_class.runner = environment.runner
    web_ui.template_args["extended_tabs"] = [{"title": "echomq live", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": key, "title": title} for key, title in COLUMNS]}
    ]
    original_update = web_ui.update_template_args

    def update_template_args() -> None:
        original_update()
        web_ui.template_args = json.loads(scrub(json.dumps(web_ui.template_args, default=str)))

    web_ui.update_template_args = update_template_args  # type: ignore[method-assign]
    app = web_ui.app
    assert app is not None

    @app.route(LIVE_ROUTE)
    @web_ui.auth_required_if_enabled
    def echomq_live() -> Response:
        return jsonify(tab.payload())

    @app.before_request
    def refuse_a_start_that_cannot_run() -> Response | None:
        if request.path != "/swarm" or request.method != "POST" or not _authenticated(web_ui):
            return None
        problem = check_start(environment, dict(request.form.items()))
        tab.message = problem
        if problem is None:
            return None
        log.error("echomq: not started: %s", problem)
        return jsonify({"success": False, "message": f"Not started: {problem}", "host": environment.host})

    @app.after_request
    def scrub_and_extend(response: Response) -> Response:
        if response.direct_passthrough or response.mimetype not in SCRUBBED_TYPES:
            return response
        text = response.get_data(as_text=True)
        if request.path == STATS_ROUTE and response.mimetype == "application/json":
            data = json.loads(text)
            data["extended_stats"] = [{"key": TAB_KEY, "data": [shown(row) for row in tab.rows()]}]
            text = json.dumps(data)
        response.set_data(scrub(text))
        return response

    return tab


def _authenticated(web_ui: Any) -> bool:
    """Whether the request may act: always, unless --web-login is on and nobody is logged in."""
    if not getattr(web_ui, "web_login", False):
        return True
    from flask_login import current_user

    return bool(current_user.is_authenticated)


def unreachable_line(environment: Environment) -> str | None:
    """At start-up: the one line to log when Redis cannot serve a run (the UI refuses Start too)."""
    try:
        check_server(
            redis_settings(environment.parsed_options, environment.host or ""),
            unreachable_remedy=UNREACHABLE_REMEDY,
        )
    except BenchError as exc:
        return str(exc)
    return None
