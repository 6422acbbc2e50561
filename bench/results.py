"""Run folders and result files: the columns of design.md, written so a crash cannot tear them."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from bench.errors import BenchError

RESULTS_DIR = Path(os.environ.get("EMQ_RESULTS_DIR", "results"))

FINISH_FETCH_COLUMNS = (
    "variant", "rep", "workers", "producers", "rtt_ms", "duration_s", "jobs", "jobs_per_s",
    "round_trips_per_job", "server_calls_per_job", "server_us_per_job",
    "cycle_p50_us", "cycle_p90_us", "cycle_p99_us", "cycle_p999_us", "cycle_max_us",
    "e2e_p50_us", "e2e_p99_us", "loadgen_cpu_pct", "saturated", "audit_ok",
)  # fmt: skip
SWEEP_COST_COLUMNS = (
    "variant", "scenario", "active_size", "reps", "sweep_ms_median", "sweep_ms_stdev",
    "us_per_active_job", "round_trips", "server_us", "hold_ms_max", "probe_p99_us",
    "probe_max_us", "probe_busy", "skipped",
)  # fmt: skip
RACE_COLUMNS = (
    "variant", "sweepers", "stalled_jobs", "delay_ms", "reps", "double_recoveries",
    "lost_attempt_updates", "requeued_after_finish", "audit_violations",
)  # fmt: skip

# Encoded HdrHistograms: hdr/<stage>__<variant>__r<rep>__<metric>.hdr, one
# base64 line (HdrHistogram's own encoding), values in µs.
HDR_DIR = "hdr"


def hdr_name(stage: str, variant: str, rep: int, metric: str) -> str:
    return f"{stage}__{variant}__r{rep}__{metric}.hdr"


def run_id(profile: str, when: dt.datetime | None = None) -> str:
    when = when or dt.datetime.now()
    return f"{when:%Y%m%d-%H%M%S}-{profile}"


def make_run_dir(profile: str, root: Path | None = None) -> Path:
    """Create results/<run-id>/ (and hdr/); a root that cannot be written is a one-line error."""
    root = root or RESULTS_DIR
    path = root / run_id(profile)
    try:
        (path / HDR_DIR).mkdir(parents=True, exist_ok=False)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except FileExistsError:
        raise BenchError(f"run folder {path} exists already; wait a second and run again") from None
    except OSError as exc:
        raise BenchError(
            f"cannot write results to {root}: {exc.strerror}; "
            "choose a writable folder with --results (or EMQ_RESULTS_DIR)"
        ) from None
    return path


def write_atomic_with(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Let ``write`` fill a temporary file beside ``path``, then rename it into place:
    a reader (report, pandas, an image viewer) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename)."""
    write_atomic_with(path, lambda handle: handle.write(text.encode()))


def write_csv(path: Path, columns: Iterable[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Write rows with exactly ``columns``, atomically. Missing values are left empty."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="raise")
    writer.writeheader()
    for row in rows:
        writer.writerow(dict(row))
    write_atomic(path, buffer.getvalue())


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def update_meta(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into run_dir/meta.json (created when missing)."""
    path = run_dir / "meta.json"
    meta = read_json(path) if path.exists() else {}
    meta.update(fields)
    write_json(path, meta)
    return meta
