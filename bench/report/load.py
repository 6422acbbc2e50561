"""A run folder as the report reads it: meta.json, the stage CSVs with their types, hdr/*.hdr.
An older or partial run loads with what it has, and ``RunData.absent`` says what is not there."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.results.files import HDR_DIR
from bench.results.hdr import merge, read_hdr
from bench.results.meta import META_FILE, RunMeta, read_meta
from bench.results.rows import Row, columns_of, typed_columns
from bench.results.stages import FILES

# frame -> its row type (bench/results/stages.py): a stage's main file, said to be absent when a run
# lacks it, and the files a stage writes only when the profile asks for them, loaded when there
STAGE_FILES: dict[str, type[Row]] = {f.frame: f.row for f in FILES if f.frame and not f.optional}
OPTIONAL_FILES: dict[str, type[Row]] = {f.frame: f.row for f in FILES if f.frame and f.optional}
FRAMES = {**STAGE_FILES, **OPTIONAL_FILES}  # every frame, in the order the loader reads them
# Columns read as text (a JSON object's too) and as booleans: as the row types declare them.
TEXT_COLUMNS: frozenset[str] = frozenset().union(*(typed_columns(f.row, str, dict) for f in FILES))
BOOL_COLUMNS: frozenset[str] = frozenset().union(*(typed_columns(f.row, bool) for f in FILES))
# Columns a run's every row holds alike: the report shows them once, in its Run section.
ID_COLUMNS = ("run_id", "protocol", "profile")


def parse_hdr_name(name: str) -> tuple[str, str, int, str] | None:
    """hdr/<stage>__<variant>__r<rep>__<metric>.hdr (results.hdr_name) -> its four parts."""
    parts = name.removesuffix(".hdr").split("__")
    if len(parts) != 4 or not re.fullmatch(r"r\d+", parts[2]) or not name.endswith(".hdr"):
        return None
    return parts[0], parts[1], int(parts[2][1:]), parts[3]


@dataclass
class RunData:
    """One run folder as loaded: meta, a frame per stage present, and what is absent."""

    path: Path
    meta: RunMeta
    frames: dict[str, pd.DataFrame]
    missing_columns: dict[str, list[str]] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)  # one line each: what the report cannot show
    hdr_files: dict[tuple[str, str, str], list[Path]] = field(default_factory=dict)
    # what the report derives from the frames, by what and how: worked out once a load of the folder
    derived: dict[tuple[object, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return str(self.meta.run_id or self.path.name)

    @property
    def complete(self) -> bool:
        return self.meta.complete

    def frame(self, stage: str) -> pd.DataFrame | None:
        """The rows of ``stage``'s file, or None where the run has none (absent or empty)."""
        frame = self.frames.get(stage)
        return None if frame is None or frame.empty else frame


def is_run(path: Path) -> bool:
    return (path / "meta.json").is_file() or any((path / row.FILE).is_file() for row in STAGE_FILES.values())


def _bool(value: object) -> object:
    text = str(value).strip().lower()
    return True if text in ("true", "1", "yes") else False if text in ("false", "0", "no") else pd.NA


def _skipped(value: object) -> str:
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()
    return "" if text.lower() in ("", "no", "false", "0", "nan", "none") else text


def read_stage(path: Path, row: type[Row]) -> tuple[pd.DataFrame, list[str]]:
    """A stage CSV with its types fixed, its older names renamed; missing columns are added empty
    and returned, but for those the row type implies a value for (filled with it, also where a
    cell is empty)."""
    columns = columns_of(row)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    old = {a: b for a, b in row.RENAMED.items() if a in frame.columns and b not in frame.columns}
    frame = frame.rename(columns=old)
    missing = [c for c in columns if c not in frame.columns and c not in row.IMPLIED]
    # in the declared order, an added column (empty) in its place (an older run's extras after them)
    frame = frame.reindex(columns=[*columns, *(c for c in frame.columns if c not in columns)], fill_value="")
    for column, value in row.IMPLIED.items():
        if column in frame.columns:
            frame[column] = frame[column].map(lambda cell, v=value: cell if str(cell).strip() else str(v))
    for column in frame.columns:
        if column == "skipped":
            frame[column] = frame[column].map(_skipped)
        elif column in TEXT_COLUMNS:
            frame[column] = frame[column].astype(str)
        elif column in BOOL_COLUMNS:
            frame[column] = frame[column].map(_bool).astype("boolean")
        else:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame, missing


def load_run(path: Path) -> RunData:
    """Load a run folder; a folder with neither meta.json nor a result CSV is a BenchError."""
    if not path.is_dir():
        raise BenchError(f"{path} is not a folder; give a run folder or a run id")
    if not is_run(path):
        raise BenchError(f"{path} is not a run folder (no meta.json, no result CSV); give results/<run-id>")
    data = RunData(path, RunMeta(), {})
    if (path / META_FILE).is_file():
        try:
            data.meta = read_meta(path)  # an undeclared key is an error, never a silent None
        except (OSError, ValueError) as exc:
            data.absent.append(f"meta.json unreadable ({exc}); machine, Redis and git details unknown")
    else:
        data.absent.append("meta.json absent: machine, Redis and git details unknown")
    planned, protocols = data.meta.stages_planned, data.meta.protocols
    for stage, row in FRAMES.items():
        name, optional = row.FILE, stage in OPTIONAL_FILES
        if not (path / name).is_file():
            if optional or (stage == "bullmq_worker" and not protocols):
                pass  # a file the profile did not ask for; a run from before the bullmq_worker stage
            elif planned and stage not in planned:
                data.absent.append(f"stage {stage}: not part of this run (left out with --stages)")
            elif stage == "bullmq_worker" and "bullmq" not in protocols:
                data.absent.append("stage bullmq_worker: not run (bullmq is not one of the run's protocols)")
            else:
                data.absent.append(f"stage {stage}: {name} absent")
            continue
        try:
            data.frames[stage], missing = read_stage(path / name, row)
        except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            said = "" if optional else f"stage {stage}: "
            data.absent.append(f"{said}{name} unreadable ({exc.__class__.__name__}: {exc})")
            continue
        data.missing_columns[stage] = missing
        if missing and not optional:
            data.absent.append(f"stage {stage}: {name} lacks column(s) {', '.join(missing)}")
    for hdr in sorted((path / HDR_DIR).glob("*.hdr")):
        if parsed := parse_hdr_name(hdr.name):
            stage, variant, _, metric = parsed
            data.hdr_files.setdefault((stage, variant, metric), []).append(hdr)
    return data


def merged_histograms(data: RunData, stage: str) -> tuple[dict[tuple[str, str], Any], list[str]]:
    """(metric, variant) -> the merge of every repetition's histogram; and the files that failed."""
    merged: dict[tuple[str, str], Any] = {}
    bad: list[str] = []
    for (hdr_stage, variant, metric), files in sorted(data.hdr_files.items()):
        if hdr_stage != stage:
            continue
        histograms = []
        for file in files:
            try:
                histograms.append(read_hdr(file))
            except Exception:  # a torn or foreign file must not stop the report
                bad.append(file.name)
        if histograms:
            merged[(metric, variant)] = merge(histograms)
    return merged, bad
