"""The runs in a results folder, and the table `python -m bench runs` prints."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.report.load import STAGE_FILES, is_run


@dataclass(frozen=True)
class RunListing:
    path: Path
    meta: dict[str, Any]
    stages: tuple[str, ...]


def list_runs(results: Path) -> list[RunListing]:
    """Run folders under ``results``, oldest first (run ids start with their time)."""
    if not results.is_dir():
        return []
    runs = []
    for path in sorted(p for p in results.iterdir() if p.is_dir() and is_run(p)):
        try:
            meta = json.loads((path / "meta.json").read_text()) if (path / "meta.json").is_file() else {}
        except (OSError, ValueError):
            meta = {}
        stages = tuple(s for s, (f, _) in STAGE_FILES.items() if (path / f).is_file())
        runs.append(RunListing(path, meta, stages))
    return runs


def runs_table(runs: Sequence[RunListing]) -> str:
    rows = []
    for run in runs:
        meta = run.meta
        if not meta:
            status = "no meta.json"
        elif meta.get("complete"):
            status = "complete"
        else:
            status = f"INCOMPLETE: {meta.get('reason') or 'no reason recorded'}"
        rows.append({
            "run": run.path.name, "profile": meta.get("profile", "?"),
            "date": str(meta.get("started", "?")).replace("T", " "),
            "redis": meta.get("redis_version", "?"), "git": str(meta.get("git_sha") or "?")[:10],
            "stages": ",".join(run.stages) or "-", "status": status,
        })  # fmt: skip
    frame = pd.DataFrame(rows)
    widths = {c: max(len(c), *(len(str(v)) for v in frame[c])) for c in frame.columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in frame.columns).rstrip()]
    lines += ["  ".join(str(v).ljust(widths[c]) for c, v in zip(frame.columns, row, strict=True)).rstrip()
              for row in frame.itertuples(index=False)]  # fmt: skip
    return "\n".join(lines)
