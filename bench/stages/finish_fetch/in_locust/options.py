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
from typing import Any, get_origin, get_type_hints

import configargparse

from bench.errors import BenchError
from bench.harness.profile import FinishFetchOptions, known_keys, option_key, parse_protocols, parse_value
from bench.protocol.base import PROTOCOLS
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import STRATEGIES
from bench.results.files import RESULTS_DIR, run_id
from bench.stages.finish_fetch.in_locust.redaction import REDIS_SCHEMES, shown_host, unredact
from bench.stages.finish_fetch.plan import points_of
from bench.stages.finish_fetch.trial_settings import TrialSettings

SUMMARY_FILE = "finish_fetch_summary.json"

DEFAULT_QUEUE = "emq-locust"
KEEP_QUEUE = "Keep queue"  # the option's dest: the web UI's label for its checkbox

# Profile keys this locustfile uses, shown in Locust's web UI with a label a person reads; the rest
# are accepted but hidden. The web UI labels a field by its option's name (its argparse dest) and
# puts the help in brackets after it; a name that starts with a capital and has no "_" is shown
# as it is, so these names are the labels (and the web UI sends them back as they are).
UI_LABELS = {
    "workers": "Workers",
    "producers": "Producers",
    "batch-size": "Batch size",
    "payload-bytes": "Payload",
    "target-rate": "Target rate",
    "warmup-s": "Warm-up",
    "measure-s": "Measured window",
    "rtt-ms": "Simulated round trip",
    "concurrency": "Jobs in flight",
    "job-ms": "Job time",
    "queues": "Queues",
    "regime": "Regime",
}
UI_HELP = {
    "workers": "worker users; the web UI starts producers + workers users",
    "producers": "producer users, adding jobs in pipelined batches",
    "batch-size": "jobs a producer adds in one pipeline",
    "payload-bytes": "bytes of data in each job",
    "target-rate": "jobs/s offered in all; 0 = closed loop, as fast as the workers go",
    "warmup-s": "seconds before the measured window opens; not measured",
    "measure-s": "seconds measured; the test stops by itself after warm-up + this, in the web UI too",
    "rtt-ms": "ms each exchange on the wire waits once, whatever it carries: a simulated network",
    "concurrency": "jobs each worker holds at once, their calls auto-pipelined on its one connection",
    "job-ms": "ms a worker holds each job before finishing it (processing time)",
    "queues": "queues the producers and workers are spread over evenly (on a cluster, over every "
    "master); at most producers and workers",
    "regime": "backlog: the wait list pre-filled with backlog-jobs and kept full, so a fused fetch-next "
    "always finds a job (throughput); steady: producers and workers at one pace; open: at target-rate "
    "(queue latency)",
}
SHOWN_KEYS = frozenset(UI_LABELS)
LIST_NOTE = "; a list takes its first value here"


def _format_default(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(_format_default(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _checked(key: str, kind: Any, minimum: float | None) -> Callable[[str], str]:
    """An argparse type that checks a value as the profile loader does, and keeps it as text.

    Text, because Locust's web UI sends custom options back as text: the values
    are converted when a test starts (``trial_settings``).
    """

    def check(raw: str) -> str:
        try:
            parse_value(key, kind, str(raw), minimum)
        except BenchError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return str(raw)

    return check


def dest_of(field_name: str) -> str:
    """Where Locust's parsed options hold a profile key: its web UI label, or its own name."""
    return UI_LABELS.get(option_key(field_name), field_name)


def add_options(parser: Any, **_: Any) -> None:
    """Register every profile key, and the locustfile's own options, with Locust's parser."""
    for key, (section, f) in known_keys().items():
        kind = get_type_hints(section)[f.name]
        shown = section is FinishFetchOptions and key in SHOWN_KEYS
        text = configargparse.SUPPRESS
        if shown:
            text = UI_HELP[key] + (LIST_NOTE if get_origin(kind) is tuple else "")
        parser.add_argument(
            f"--{key}",
            dest=dest_of(f.name),
            metavar=key.upper().replace("-", "_"),
            type=_checked(key, kind, f.metadata.get("min")),
            # an empty list (a key that is off unless given) has no text argparse could check
            default=_format_default(f.default) if f.default != () else None,
            help=text,
            include_in_web_ui=shown,
        )
    # bench run's own (--cluster: whether it starts an embedded cluster, whose URL Locust gets)
    for hidden, default in (("--stages", ""), ("--cluster", "false"), ("--protocols", "echomq")):
        parser.add_argument(hidden, default=default, help=configargparse.SUPPRESS, include_in_web_ui=False)
    parser.add_argument(
        "--protocol",
        choices=tuple(PROTOCOLS),
        default=None,
        help="queue protocol whose scripts the users run (default: the first of the profile's protocols)",
    )
    parser.add_argument(
        "--strategy",
        dest="Strategy",
        metavar="STRATEGY",
        choices=STRATEGIES,
        default=None,
        help="finish a job and fetch the next in one call (fused), two (two_call), or two sent back "
        "to back in one round trip (two_call_pipelined); default: the first of --strategies",
    )
    # Not in the web UI: the Host field shows the server (its password redacted) and takes a URL.
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL", ""),
        help="Redis to load (default: $REDIS_URL, else --host when it is redis://..., else localhost:6379)",
        include_in_web_ui=False,
    )
    parser.add_argument(
        "--queue",
        dest="Queue",
        metavar="QUEUE",
        default=DEFAULT_QUEUE,
        help="queue name; its keys share one hash tag",
    )
    parser.add_argument(
        "--keep-queue",
        dest=KEEP_QUEUE,
        action="store_true",
        default=False,
        help="keep the test's queue keys in Redis after it stops, to inspect them; by default they are "
        "deleted (a test starts on the first of QUEUE, QUEUE-2, ... that holds no keys)",
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help=configargparse.SUPPRESS,  # the latency-fidelity run: one user times a trivial EVALSHA
        include_in_web_ui=False,
    )
    parser.add_argument(
        "--summary-json",
        default="",
        help="where the run's summary goes (default: <--csv prefix>_summary.json with --csv, "
        "else a run folder of its own under results/)",
        include_in_web_ui=False,
    )


def keep_queue(options: Any) -> bool:
    """Whether the test's queue keys stay in Redis after it stops (--keep-queue, the UI's box)."""
    return bool(getattr(options, KEEP_QUEUE, False))


def trial_settings(options: Any) -> TrialSettings:
    """The run's single-valued settings from Locust's parsed options (lists take their first value)."""
    hints = get_type_hints(FinishFetchOptions)
    values = {
        f.name: parse_value(option_key(f.name), hints[f.name], str(raw), f.metadata.get("min"))
        for f in fields(FinishFetchOptions)
        if (raw := getattr(options, dest_of(f.name), None)) is not None
    }
    profile = FinishFetchOptions(**values)
    return TrialSettings.at(
        profile,
        getattr(options, "Strategy", None) or profile.strategies[0],
        points_of(profile)[0],  # the first of each list
        getattr(options, "Queue", None) or DEFAULT_QUEUE,
        getattr(options, "protocol", None) or parse_protocols(getattr(options, "protocols", "echomq"))[0],
        probe=bool(getattr(options, "probe", False)),
    )


def redis_settings(options: Any, host: str, socket_timeout_s: float = 30.0) -> RedisSettings:
    """The server to load: --redis-url (or $REDIS_URL), else a redis:// ``host``, else the default.

    In the web UI the Host field shows the server with its password redacted; sent back as it
    was shown it means that server, and a URL typed there is the one to load.
    """
    url = unredact(getattr(options, "redis_url", "") or "")
    host = unredact(host)
    typed_in_ui = bool(shown_host()) and host != unredact(shown_host())
    if host.startswith(REDIS_SCHEMES) and (not url or typed_in_ui):
        url = host
    settings = RedisSettings.from_url(url) if url else RedisSettings()
    return dataclasses.replace(settings, socket_timeout_s=socket_timeout_s)


_default_summary: list[Path] = []  # this test's, when neither --summary-json nor --csv says


def begin_test(strategy: str) -> Path:
    """A test starts: where its summary goes when nothing on the command line says, a run folder
    of its own under results/ (results/<YYYYmmdd-HHMMSS>-locust-<strategy>/)."""
    path = RESULTS_DIR / run_id(f"locust-{strategy}") / SUMMARY_FILE
    _default_summary[:] = [path]
    return path


def summary_path(options: Any) -> Path | None:
    """Where the run's summary goes: --summary-json, else beside the --csv files, else the run
    folder of its own that ``begin_test`` named."""
    if explicit := getattr(options, "summary_json", ""):
        return Path(explicit)
    if prefix := getattr(options, "csv_prefix", None):
        return Path(f"{prefix}_summary.json")
    return default_summary()


def default_summary() -> Path | None:
    """This test's summary path in the run folder of its own (None before a test begins)."""
    return _default_summary[0] if _default_summary else None
