"""Run folders and the writers of their files, atomic so a crash cannot tear them: a CSV from its
row type (bench.results.rows), JSON, meta.json; and the ledger a stage writes its rows and section with."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Generic, ParamSpec, TypeVar, cast

from bench.errors import BenchError
from bench.results.meta import META_FILE, STAGE_SECTIONS, merged
from bench.results.rows import Row, columns_of, row_dict

RESULTS_DIR = Path(os.environ.get("EMQ_RESULTS_DIR", "results"))

# A run folder holds our own files at its top, each tool's raw files in a subfolder of its own.
LOCUST_DIR = "locust"  # Locust's per-repetition CSVs, each run's summary JSON and log
PYPERF_DIR = "pyperf"  # pyperf's JSON a size, every size's merged, its log, the side records
RAW_DIR = "raw"  # the finish_fetch raw driver's summary JSON, one a protocol, point and strategy
FIDELITY_DIR = "fidelity"  # the latency-fidelity check's Locust probe run

HDR_DIR = "hdr"  # hdr/<stage>__<variant>__r<rep>__<metric>.hdr: HdrHistogram's base64 line, in µs


def hdr_name(stage: str, variant: str, rep: int, metric: str) -> str:
    return f"{stage}__{variant}__r{rep}__{metric}.hdr"


def run_id(profile: str) -> str:
    return f"{dt.datetime.now():%Y%m%d-%H%M%S}-{profile}"


def resolve_run(name: str, results: Path | None = None) -> Path:
    """A run folder given as a path or as a run id under results/."""
    path = Path(name)
    if path.is_dir():
        return path
    candidate = (results or RESULTS_DIR) / name
    if candidate.is_dir():
        return candidate
    raise BenchError(f"no run folder {name!r} (nor {candidate}); `echomq-bench runs` lists the runs")


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


def current_umask() -> int:
    """The process's umask (read from /proc where it can be, so it is never changed, even briefly)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic_with(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Let ``write`` fill a temporary file beside ``path``, then rename it into place:
    a reader (report, pandas, an image viewer) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a result file is as readable as the user's umask says
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    write_atomic_with(path, lambda handle: handle.write(text.encode()))


def write_csv(path: Path, columns: Iterable[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Write rows with exactly ``columns``, atomically; a missing value is an empty cell."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="raise")
    writer.writeheader()
    for row in rows:
        writer.writerow(dict(row))
    write_atomic(path, buffer.getvalue())


def write_rows(folder: Path, row_type: type[Row], rows: Iterable[Row]) -> None:
    """The rows as ``folder``/``row_type.FILE`` (every column, in order), atomically."""
    write_csv(folder / row_type.FILE, columns_of(row_type), map(row_dict, rows))


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text()))


P = ParamSpec("P")  # the fields of what write_meta writes: RunMeta, or a stage's section
R = TypeVar("R", bound=Row)


def write_meta(
    run_dir: Path, kind: Callable[P, object], /, *args: P.args, **fields: P.kwargs
) -> dict[str, Any]:
    """Write ``fields`` into run_dir/meta.json (created when missing), atomically, each named and typed
    as ``kind`` declares it, so mypy checks them: ``RunMeta`` (the run's head, a field replaced), or a
    stage's section (``FinishFetchMeta``, ...), merged key by key as the stage learns its keys. A key
    not declared is UndeclaredMetaKey, and nothing is written. Returns the whole object written."""
    if args:
        raise TypeError("meta.json's fields are written by name")
    stage = next((id for id, section in STAGE_SECTIONS.items() if section is kind), None)
    path = run_dir / META_FILE
    meta = merged(read_json(path) if path.exists() else {}, {stage: fields} if stage else fields)
    write_json(path, meta)
    return meta


class Ledger(Generic[P]):
    """What one stage writes: its rows, each CSV written whole (atomically) as its rows change, and
    its meta.json ``section`` (the dataclass of bench/results/<stage>.py; none for script_cost)."""

    def __init__(self, run_dir: Path, section: Callable[P, object] | None = None) -> None:
        self.run_dir = run_dir
        self.section = section
        self._rows: dict[type[Row], list[Row]] = {}

    def meta(self, *args: P.args, **fields: P.kwargs) -> None:
        assert self.section is not None, "a ledger without a section writes no meta.json"
        write_meta(self.run_dir, self.section, *args, **fields)

    def rows(self, kind: type[R]) -> list[R]:
        """The rows of ``kind`` written so far (a copy)."""
        return cast(list[R], list(self._rows.get(kind, [])))

    def add(self, kind: type[R], rows: Iterable[R]) -> None:
        """``rows`` after those of ``kind`` so far; its file written."""
        self.put(kind, [*self.rows(kind), *rows])

    def put(self, kind: type[R], rows: Iterable[R]) -> None:
        """The rows of ``kind`` replaced by ``rows``; its file written."""
        self._rows[kind] = list(rows)
        write_rows(self.run_dir, kind, self._rows[kind])
