"""Stage 1 in Locust's web UI: no password sent to the browser, a live tab of our own, user counts
that follow the profile, and a Redis that cannot serve the run refused before any user starts.

- The Host field shows the Redis URL with its password redacted (redaction.py); every page and
  JSON answer is scrubbed of the real one on its way out.
- The "echomq" tab (``extended_tabs`` / ``extended_tables``, fed through /stats/requests and
  the JSON route /echomq/live) shows, per strategy, jobs/s, round trips and Redis commands per
  job, and the µs percentiles of every call, the cycle and end to end, from our merged
  HdrHistograms (Locust's own tabs round to whole milliseconds).
- ``ProfileShape`` starts exactly producers + workers users (the form's user count is off) and
  ends the test after warm-up + measure, as a headless run ends.
- Start is refused, with one line in the terminal and the reason in the form, when Redis does
  not answer or a setting is wrong.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from flask import Response, jsonify, request
from hdrh.histogram import HdrHistogram
from locust import LoadTestShape
from locust.env import Environment

from bench import hdr
from bench.errors import BenchError
from bench.finish_fetch.current import RECORDER, Current
from bench.finish_fetch.loadstats import RunSettings
from bench.finish_fetch.options import redis_settings, redis_settings_from, run_settings
from bench.finish_fetch.redaction import scrub, show_host
from bench.finish_fetch.window import Controller
from bench.harness.server import check_server
from bench.protocol.commandstats import CommandStats, client_side
from bench.protocol.connection import CountingRedis, RedisSettings

log = logging.getLogger("echomq")

TAB_KEY = "echomq"
LIVE_ROUTE = "/echomq/live"
STATS_ROUTE = "/stats/requests"
SCRUBBED_TYPES = ("application/json", "text/html", "text/csv", "text/plain", "application/javascript")
UNREACHABLE_REMEDY = "start it, or put its URL in the Host field (or REDIS_URL), then press Start again"

# The tab's columns: (key, title). Locust's UI camel-cases the keys of rows and structure alike.
COLUMNS = (
    ("strategy", "Strategy"),
    ("state", "State"),
    ("measure", "Measure"),
    ("count", "Count"),
    ("jobs_per_s", "Jobs/s"),
    ("round_trips_per_job", "Round trips/job"),
    ("commands_per_job", "Redis commands/job"),
    ("p50_us", "p50 µs"),
    ("p90_us", "p90 µs"),
    ("p99_us", "p99 µs"),
    ("p999_us", "p99.9 µs"),
    ("max_us", "max µs"),
)
MEASURES = {
    "cycle": "worker cycle (finish + fetch)",
    "e2e": "end to end (enqueue to finish)",
    "enqueue": "producer batch (enqueue)",
}


def measure_name(metric: str) -> str:
    if metric.startswith("call:"):
        return f"call {metric.removeprefix('call:')}"
    return MEASURES.get(metric, metric)


class ProfileShape(LoadTestShape):
    """The profile's users, all at once; the test ends after warm-up + measure."""

    def __init__(self, prepare: Callable[[], RunSettings]) -> None:
        super().__init__()
        self._prepare = prepare
        self._run: RunSettings | None = None

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


def _row(strategy: str, state: str, measure: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys((key for key, _ in COLUMNS), "")
    row.update(strategy=strategy, state=state, measure=measure)
    row.update({k: v for k, v in values.items() if v is not None})
    return row


def _rounded(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def _measure_order(metric: str) -> tuple[int, str]:
    """Cycle, end to end and the producers' batches first, then each call by name."""
    known = list(MEASURES)
    return (known.index(metric), "") if metric in known else (len(known), metric)


def strategy_rows(
    strategy: str,
    state: str,
    jobs: int,
    window_s: float,
    round_trips: int,
    commands: int | None,
    percentiles: dict[str, dict[str, int]],
) -> list[dict[str, Any]]:
    """A strategy's rows: its jobs, rates and counts per job, then a row a measured latency."""
    per_job = (lambda n: n / jobs) if jobs else (lambda n: None)
    rows = [
        _row(
            strategy,
            state,
            f"jobs finished in {window_s:.1f} s",
            count=jobs,
            jobs_per_s=_rounded(jobs / window_s if window_s > 0 else None, 1),
            round_trips_per_job=_rounded(per_job(round_trips), 3),
            commands_per_job=_rounded(per_job(commands) if commands is not None else None, 3),
        )
    ]
    order = sorted(
        percentiles, key=lambda m: (m not in MEASURES, list(MEASURES).index(m) if m in MEASURES else 0, m)
    )
    for metric in order:
        p = percentiles[metric]
        rows.append(
            _row(strategy, state, measure_name(metric), count=p.get("count"), p50_us=p.get("p50"),
                 p90_us=p.get("p90"), p99_us=p.get("p99"), p999_us=p.get("p999"), max_us=p.get("max"))
        )  # fmt: skip
    return rows


class LiveTab:
    """What the echomq tab shows: the open window, live, and the last finished one of each strategy."""

    def __init__(self, environment: Environment, controller: Controller) -> None:
        self.environment = environment
        self.controller = controller
        self.finished: dict[str, list[dict[str, Any]]] = {}  # strategy -> its last window's rows
        self.message: str | None = None  # why the last Start was refused, or Redis's problem
        self._client: CountingRedis | None = None
        self._client_settings: RedisSettings | None = None

    def _server_commands(self) -> int | None:
        """Redis commands the clients sent since the window opened (INFO commandstats), if it answers."""
        before = self.controller.stats_before
        if before is None:
            return None
        settings = Current.redis
        try:
            if self._client is None or self._client_settings != settings:
                if self._client is not None:
                    self._client.close()
                self._client, self._client_settings = settings.connect(), settings
            return client_side(CommandStats.read(self._client).since(before)).total_calls
        except redis.RedisError:
            return None

    def live_rows(self) -> list[dict[str, Any]]:
        run = Current.run
        window = self.controller.window
        if run is None:
            return []
        if window is None:
            runner = self.environment.runner
            running = runner is not None and runner.state in ("spawning", "running")
            if running:
                return [_row(run.strategy, f"warm-up ({run.warmup_s:g} s, not measured)", "")]
            return []
        histograms: dict[str, list[HdrHistogram]] = {}
        counters: Counter[str] = Counter(self.controller.aggregate.counters)
        for name, merged in self.controller.aggregate.histograms.items():
            histograms.setdefault(name, []).append(merged)
        local, local_counters = RECORDER.peek()
        for name, part in local.items():
            histograms.setdefault(name, []).append(part)
        counters.update(local_counters)
        window_s = time.perf_counter() - window[0]
        percentiles = {name: hdr.summary(hdr.merge(parts)) for name, parts in histograms.items()}
        state = f"measuring ({window_s:.0f} of {run.measure_s:g} s)"
        return strategy_rows(
            run.strategy, state, counters["jobs"], window_s, counters["worker_round_trips"],
            self._server_commands(), percentiles,
        )  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        live = self.live_rows()
        current = live[0]["strategy"] if live else None
        rows = list(live)
        for strategy, finished in self.finished.items():
            if strategy != current or not live:
                rows += finished
        return rows

    def record_finished(self, summary: dict[str, Any]) -> None:
        """A test ended: keep its window's figures, from its summary, as the strategy's last."""
        if not summary.get("measured"):
            return
        d = summary["derived"]
        strategy = summary["settings"]["strategy"]
        state = "finished" if summary.get("complete") else f"stopped early: {summary.get('aborted')}"
        counters = summary.get("counters", {})
        server = d.get("server_calls_per_job")
        jobs = int(d["jobs"])
        self.finished[strategy] = strategy_rows(
            strategy, state, jobs, float(summary["window_s"]), int(counters.get("worker_round_trips", 0)),
            round(server * jobs) if server is not None else None, summary.get("percentiles_us", {}),
        )  # fmt: skip

    def payload(self) -> dict[str, Any]:
        run = Current.run
        return {
            "strategy": run.strategy if run else None,
            "measuring": self.controller.window is not None,
            "message": self.message,
            "columns": [{"key": key, "title": title} for key, title in COLUMNS],
            "rows": self.rows(),
        }


def check_start(environment: Environment, form: dict[str, str]) -> str | None:
    """Why a Start with these form values cannot run (a setting, or Redis), or None."""
    options = argparse.Namespace(**vars(environment.parsed_options))
    for key, value in form.items():
        if key in vars(options) and key not in ("host",):
            setattr(options, key, value)
    try:
        run = run_settings(options)
    except BenchError as exc:
        return str(exc)
    host = form.get("host", environment.host or "")
    try:
        settings = redis_settings_from(options, host, run.socket_timeout_s)
        check_server(settings, unreachable_remedy=UNREACHABLE_REMEDY)
    except BenchError as exc:
        return str(exc)
    return None


def install(environment: Environment, controller: Controller, prepare: Callable[[], RunSettings]) -> LiveTab:
    """Wire the web UI: redacted Host, the tab and its route, the profile's shape, the Start check."""
    web_ui = environment.web_ui
    assert web_ui is not None
    tab = LiveTab(environment, controller)
    # Host shows where the load goes, redacted: no "missing host" banner, no password in the page.
    settings = redis_settings(environment)
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


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the tab shows it: thousands separated, per-job figures to two places (the JSON
    route keeps the numbers)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, float) and key.endswith("_per_job"):
            out[key] = f"{value:,.2f}"
        elif isinstance(value, float):
            out[key] = f"{value:,.1f}"
        elif isinstance(value, int):
            out[key] = f"{value:,}"
        else:
            out[key] = value
    return out


def _authenticated(web_ui: Any) -> bool:
    """Whether the request may act: always, unless --web-login is on and nobody is logged in."""
    if not getattr(web_ui, "web_login", False):
        return True
    from flask_login import current_user

    return bool(current_user.is_authenticated)


def unreachable_line(environment: Environment) -> str | None:
    """At start-up: the one line to log when Redis cannot serve a run (the UI refuses Start too)."""
    try:
        check_server(redis_settings(environment), unreachable_remedy=UNREACHABLE_REMEDY)
    except BenchError as exc:
        return str(exc)
    return None


def read_summary(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data
