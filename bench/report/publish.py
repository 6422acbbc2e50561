"""`echomq-bench publish RUN`: a run's portable files, copied into docs/results/<run-id>/.

A published run is what a reader can check a figure against, so it holds only what
is small and says nothing private: meta.json, the CSVs, report.md and its plots
(no HdrHistogram, Locust or pyperf raw files), no password of a Redis URL, and no
absolute path of the machine that ran it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.paths import REPO
from bench.results.meta import META_FILE, RunMeta, read_meta

PUBLISHED_DIR = REPO / "docs" / "results"
BUDGET_BYTES = 2 * 1024 * 1024  # a published run; a test holds every committed run to it
# The run folder's own files at its top; each tool's raw files sit in subfolders and stay behind.
PORTABLE_PATTERNS = ("meta.json", "*.csv", "report.md", "*.png")
DATA_PATTERNS = ("meta.json", "*.csv")  # a run kept as the data behind a figure, not a page
AA_DIR = REPO / "docs" / "aa-runs"  # the A/A pairs compare's thresholds were learnt from
TEXT_SUFFIXES = (".json", ".csv", ".md")
RUN_ID = re.compile(r"\d{8}-\d{6}-[A-Za-z0-9_.-]+")

# A Redis URL's credentials (redis://user:secret@host, ?password=secret) and a word that starts
# like an absolute path; the path is this machine's when its first folder exists here.
_URL_CREDENTIALS = re.compile(r"\b((?:rediss?|unix)://)[^@\s/\"']*@")
_URL_PASSWORD_QUERY = re.compile(r"([?&]password=)[^&\s\"']*")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:-])/[\w.+@-]+(?:/[\w.+@-]*)+")


@dataclass(frozen=True)
class Published:
    """A run as published: its id, where it went, and the files copied."""

    run_id: str
    folder: Path
    files: tuple[str, ...]
    size: int


def machine_roots() -> list[str]:
    """This machine's folders a run may name (checkout, home, temp, Python), longest first."""
    roots = {str(REPO), str(Path.home()), tempfile.gettempdir(), sys.prefix, os.getcwd()}
    return sorted((root for root in roots if len(root) > 1), key=len, reverse=True)


def _portable_path(match: re.Match[str]) -> str:
    path = match.group(0)
    first = path.split("/")[1]
    if not Path("/", first).exists():
        return path  # not a path of this machine (a URL's path, an endpoint such as /echomq/live)
    try:
        return Path(path).relative_to(REPO).as_posix()  # a file of the checkout: its name in it
    except ValueError:
        return ".../" + Path(path).name


def portable_text(text: str) -> str:
    """``text`` without a Redis password and with no absolute path of this machine."""
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _URL_PASSWORD_QUERY.sub(r"\1***", text)
    return _ABSOLUTE_PATH.sub(_portable_path, text)


def leaks(text: str) -> list[str]:
    """What of this machine ``text`` still names (a folder of it, a password in a URL)."""
    found = [root for root in machine_roots() if re.search(rf"(?<![\w.]){re.escape(root)}(?![\w.-])", text)]
    found += [m.group(0) for m in _URL_CREDENTIALS.finditer(text) if not m.group(0).endswith("://***@")]
    return found


def _run_meta(run: Path) -> tuple[str, RunMeta]:
    """The run's id and meta.json, or why it may not be published."""
    meta_path = run / META_FILE
    if not meta_path.is_file():
        raise BenchError(f"{run} has no meta.json: give a run folder (results/<run-id>)")
    try:
        meta = read_meta(run)  # an undeclared key is refused here, before anything is copied
    except ValueError as exc:
        raise BenchError(f"{meta_path} is not JSON ({exc}); publish another run") from None
    if not meta.complete:
        reason = meta.reason or "it did not finish"
        raise BenchError(f"run {run.name} is incomplete ({reason}); publish a complete run")
    run_id = str(meta.run_id or run.name)
    if not RUN_ID.fullmatch(run_id):
        raise BenchError(
            f"run id {run_id!r} is not YYYYmmdd-HHMMSS-<name>; publish a run folder of the suite"
        )
    return run_id, meta


def publish_run(
    run: Path,
    root: Path = PUBLISHED_DIR,
    budget: int = BUDGET_BYTES,
    patterns: tuple[str, ...] = PORTABLE_PATTERNS,
) -> Published:
    """Copy ``run``'s portable files into root/<run-id>/, cleaned; over ``budget`` bytes, none."""
    if not run.is_dir():
        raise BenchError(f"no run folder {run}; `echomq-bench runs` lists the runs")
    run_id, meta = _run_meta(run)
    if meta.git_dirty or not meta.git_sha:
        why = "uncommitted changes" if meta.git_dirty else "no commit recorded"
        raise BenchError(
            f"run {run_id} was made with {why}; a published figure must come from a commit: "
            "commit, run again, then publish"
        )
    files = sorted({path for pattern in patterns for path in run.glob(pattern) if path.is_file()})
    contents = {
        path.name: portable_text(path.read_text()).encode()
        if path.suffix in TEXT_SUFFIXES
        else path.read_bytes()
        for path in files
    }
    size = sum(len(data) for data in contents.values())
    if size > budget:
        raise BenchError(
            f"run {run_id}: its portable files take {size / 2**20:.1f} MB, over the "
            f"{budget / 2**20:.0f} MB a published run may take; publish a run with fewer points"
        )
    for name, data in contents.items():
        if name.endswith(TEXT_SUFFIXES) and (left := leaks(data.decode())):
            raise BenchError(f"run {run_id}: {name} still names {left[0]!r}; not published")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{run_id}.", dir=root))
    try:
        for name, data in contents.items():
            (staging / name).write_bytes(data)
            (staging / name).chmod(0o644)
        staging.chmod(0o755)
        target = root / run_id
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Published(run_id, target, tuple(sorted(contents)), size)


def published_runs(root: Path = PUBLISHED_DIR) -> list[Path]:
    """The published run folders, oldest first (a run id starts with its date and time)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and RUN_ID.fullmatch(p.name))
