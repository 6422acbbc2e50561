"""Locust's options for stage 1: every profile key, and the run's settings read back from them.

Every profile key (bench/harness/profile.py's dataclasses) is a Locust option,
so ``locust --config profiles/<name>.conf`` accepts the whole file; the keys of
other stages are hidden from the help and the web UI.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

import configargparse
from locust.env import Environment

from bench.errors import BenchError
from bench.finish_fetch.loadstats import RunSettings
from bench.harness.profile import FinishFetchOptions, known_keys, option_key, parse_value
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import STRATEGIES

DEFAULT_QUEUE = "emq-locust"

# Profile keys this locustfile uses, shown in Locust's web UI; the rest are accepted but hidden.
SHOWN_KEYS = frozenset(
    {
        "workers", "producers", "batch-size", "payload-bytes", "target-rate",
        "warmup-s", "measure-s", "rtt-ms", "concurrency", "job-ms",
    }
)  # fmt: skip


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
    parser.add_argument(
        "--probe",
        action="store_true",
        help=configargparse.SUPPRESS,  # the latency-fidelity run: one user times a trivial EVALSHA
        include_in_web_ui=False,
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
        concurrency=profile.concurrency[0],
        job_ms=profile.job_ms[0],
        probe=bool(getattr(options, "probe", False)),
    )


def redis_settings(environment: Environment, socket_timeout_s: float = 30.0) -> RedisSettings:
    """The server to load: --redis-url (or $REDIS_URL), else a redis:// --host, else the default."""
    options = environment.parsed_options
    url = getattr(options, "redis_url", "") or ""
    host = environment.host or ""
    if not url and host.startswith(("redis://", "rediss://", "unix://")):
        url = host
    settings = RedisSettings.from_url(url) if url else RedisSettings()
    return dataclasses.replace(settings, socket_timeout_s=socket_timeout_s)


def summary_path(options: Any) -> Path | None:
    """Where the run's summary goes: --summary-json, else beside the --csv files, else nowhere."""
    explicit = getattr(options, "summary_json", "")
    if explicit:
        return Path(explicit)
    prefix = getattr(options, "csv_prefix", None)
    return Path(f"{prefix}_summary.json") if prefix else None
