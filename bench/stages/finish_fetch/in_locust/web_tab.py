"""The web UI's "echomq live" tab: a row a strategy's jobs and rates, then a row a measured latency,
in µs from our merged HdrHistograms; live while the window is open, kept once a test ends.

Locust's UI camel-cases the keys of the rows and of the table's structure alike, so the keys here
stay snake_case. ``shown`` formats a row for the tab; the JSON route keeps the numbers.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from locust.env import Environment

from bench.protocol.commandstats import CommandStats, added, client_side
from bench.protocol.connection import Client, RedisSettings
from bench.results import hdr
from bench.stages.finish_fetch.in_locust.current import RECORDER, Current
from bench.stages.finish_fetch.in_locust.window import Controller
from bench.stages.finish_fetch.summary import TrialSummary

TAB_KEY = "echomq"

# The tab's columns: (key, title). Locust's UI camel-cases the keys of rows and structure alike.
COLUMNS = (
    ("strategy", "Strategy"),
    ("regime", "Regime"),
    ("state", "State"),
    ("measure", "Measure"),
    ("count", "Count"),
    ("jobs_per_s", "Jobs/s"),
    ("round_trips_per_job", "Round trips/job"),
    # one header, one count: the worker's script calls a job at the client, as the terminal's
    # cmd/job; the server's count (producers' addJob included) under a header that says so
    ("commands_per_job", "Commands a job"),
    ("server_calls_per_job", "Server calls a job, producers included"),
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


def measure_name(metric: str, regime: str = "") -> str:
    if metric.startswith("call:"):
        return f"call {metric.removeprefix('call:')}"
    if metric == "e2e" and regime:  # queue latency in open loop; in a closed one, the backlog's wait
        return "queue latency (enqueue to finish)" if regime == "open" else "backlog wait (enqueue to finish)"
    return MEASURES.get(metric, metric)


def _row(strategy: str, state: str, measure: str, regime: str = "", **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys((key for key, _ in COLUMNS), "")
    row.update(strategy=strategy, regime=regime, state=state, measure=measure)
    row.update({k: v for k, v in values.items() if v is not None})
    return row


def _rounded(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def strategy_rows(
    strategy: str,
    state: str,
    jobs: int,
    window_s: float,
    round_trips: int,
    commands: float | None,
    server_calls: int | None,
    percentiles: dict[str, dict[str, int]],
    regime: str = "",
) -> list[dict[str, Any]]:
    """A strategy's rows, named by its regime: its jobs, rates and counts per job, then a row a
    measured latency."""
    per_job = (lambda n: n / jobs) if jobs else (lambda n: None)
    rows = [
        _row(
            strategy,
            state,
            f"jobs finished in {window_s:.1f} s",
            regime,
            count=jobs,
            jobs_per_s=_rounded(jobs / window_s if window_s > 0 else None, 1),
            round_trips_per_job=_rounded(per_job(round_trips), 3),
            commands_per_job=_rounded(per_job(commands) if commands is not None else None, 3),
            server_calls_per_job=_rounded(per_job(server_calls) if server_calls is not None else None, 3),
        )
    ]
    known = list(MEASURES)  # cycle, end to end and the batches first, then each call by name
    for metric in sorted(percentiles, key=lambda m: (known.index(m) if m in known else len(known), m)):
        p = percentiles[metric]
        rows.append(
            _row(strategy, state, measure_name(metric, regime), regime, count=p.get("count"),
                 p50_us=p.get("p50"), p90_us=p.get("p90"), p99_us=p.get("p99"), p999_us=p.get("p999"),
                 max_us=p.get("max"))
        )  # fmt: skip
    return rows


class LiveTab:
    """What the echomq tab shows: the open window, live, and the last finished one of each strategy."""

    def __init__(self, environment: Environment, controller: Controller) -> None:
        self.environment = environment
        self.controller = controller
        self.finished: dict[str, list[dict[str, Any]]] = {}  # strategy -> its last window's rows
        self.message: str | None = None  # why the last Start was refused, or Redis's problem
        self._client: Client | None = None
        self._client_settings: RedisSettings | None = None

    def _server_commands(self) -> int | None:
        """Redis commands the clients sent since the window opened (INFO commandstats), if it answers."""
        if (before := self.controller.stats_before) is None:
            return None
        settings = Current.redis
        try:
            if self._client is None or self._client_settings != settings:
                if self._client is not None:
                    self._client.close()
                self._client, self._client_settings = settings.connect(), settings
            return client_side(CommandStats.read(self._client).since(added(before.values()))).total_calls
        except redis.RedisError:
            return None

    def live_rows(self) -> list[dict[str, Any]]:
        trial = Current.trial
        window = self.controller.window
        if trial is None:
            return []
        if window is None:
            runner = self.environment.runner
            if runner is None or runner.state not in ("spawning", "running"):
                return []
            return [_row(trial.strategy, f"warm-up ({trial.warmup_s:g} s, not measured)", "", trial.regime)]
        merged, (local, local_counters) = self.controller.aggregate.histograms, RECORDER.peek()
        counters = self.controller.aggregate.counters + local_counters
        window_s = time.perf_counter() - window[0]
        percentiles = {
            name: hdr.summary(hdr.merge(h for h in (merged.get(name), local.get(name)) if h is not None))
            for name in {**merged, **local}
        }
        state = f"measuring ({window_s:.0f} of {trial.measure_s:g} s)"
        # the worker's script calls less its lone fetches, as summary.py counts commands_per_job
        commands = counters["worker_script_calls"] - counters["fetches_alone"]
        return strategy_rows(
            trial.strategy, state, counters["jobs"], window_s, counters["worker_round_trips"], commands,
            self._server_commands(), percentiles, trial.regime,
        )  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        live = self.live_rows()
        current = live[0]["strategy"] if live else None
        return live + [row for strategy, rows in self.finished.items() if strategy != current for row in rows]

    def record_finished(self, summary: TrialSummary) -> None:
        """A test ended: keep its window's figures, from its summary, as the strategy's last."""
        if not summary.measured:
            return
        d = summary.figures
        strategy = summary.settings.strategy
        state = "finished" if summary.complete else f"stopped early: {summary.aborted}"
        server, commands = d.server_calls_per_job, d.commands_per_job
        self.finished[strategy] = strategy_rows(
            strategy, state, d.jobs, summary.window_s, summary.counters.get("worker_round_trips", 0),
            commands * d.jobs,
            round(server * d.jobs) if server is not None else None, summary.percentiles_us,
            summary.settings.regime,
        )  # fmt: skip

    def payload(self) -> dict[str, Any]:
        trial = Current.trial
        return {
            "strategy": trial.strategy if trial else None,
            "measuring": self.controller.window is not None,
            "message": self.message,
            "columns": [{"key": key, "title": title} for key, title in COLUMNS],
            "rows": self.rows(),
        }


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
