"""The runs in a results folder, and the table `python -m bench runs` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.errors import BenchError
from bench.report.load import STAGE_FILES, is_run
from bench.results.meta import META_FILE, RunMeta, read_meta


@dataclass(frozen=True)
class RunListing:
    path: Path
    meta: RunMeta | None  # None: no meta.json, or one that does not read
    stages: tuple[str, ...]


def list_runs(results: Path) -> list[RunListing]:
    """Run folders under ``results``, oldest first (run ids start with their time)."""
    if not results.is_dir():
        return []
    runs = []
    for path in sorted(p for p in results.iterdir() if p.is_dir() and is_run(p)):
        try:
            meta = read_meta(path) if (path / META_FILE).is_file() else None
        except (OSError, ValueError, BenchError):
            meta = None
        stages = tuple(s for s, row in STAGE_FILES.items() if (path / row.FILE).is_file())
        runs.append(RunListing(path, meta, stages))
    return runs


def runs_table(runs: Sequence[RunListing]) -> str:
    rows = []
    for run in runs:
        meta = run.meta
        if not meta:
            status = "no meta.json"
        elif meta.complete:
            status = "complete"
        else:
            status = f"INCOMPLETE: {meta.reason or 'no reason recorded'}"
        server = f"{meta.server} {meta.server_release}" if meta and meta.server_release else "?"
        rows.append({
            "run": run.path.name, "profile": (meta and meta.profile) or "?",
            "date": str((meta and meta.started) or "?").replace("T", " "),
            "server": server, "git": str((meta and meta.git_sha) or "?")[:10],
            "stages": ",".join(run.stages) or "-", "status": status,
        })  # fmt: skip
    frame = pd.DataFrame(rows)
    widths = {c: max(len(c), *(len(str(v)) for v in frame[c])) for c in frame.columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in frame.columns).rstrip()]
    lines += ["  ".join(str(v).ljust(widths[c]) for c, v in zip(frame.columns, row, strict=True)).rstrip()
              for row in frame.itertuples(index=False)]  # fmt: skip
    return "\n".join(lines)
