"""A stage's ledger (bench.results.files.Ledger): its rows and meta.json section, written as the
stage adds to them, each file whole and atomically, and a section field only as declared."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from bench.results import files
from bench.results.files import Ledger
from bench.results.meta import UndeclaredMetaKey, read_meta
from bench.results.race import RaceMeta
from bench.results.rows import Row


@dataclass(frozen=True)
class Tiny(Row):
    FILE: ClassVar[str] = "tiny.csv"
    run_id: str
    n: int


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_the_ledger_writes_what_a_stage_adds(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, RaceMeta)
    ledger.meta(variants=["atomic"], reps=3)
    ledger.add(Tiny, [Tiny("r", 1)])
    ledger.add(Tiny, [Tiny("r", 2), Tiny("r", 3)])
    ledger.meta(sweepers=[2])  # merged into the section, key by key
    assert _csv(tmp_path / "tiny.csv") == [{"run_id": "r", "n": str(n)} for n in (1, 2, 3)]
    assert ledger.rows(Tiny) == [Tiny("r", 1), Tiny("r", 2), Tiny("r", 3)]
    assert json.loads((tmp_path / "meta.json").read_text())["race"] == {
        "variants": ["atomic"], "reps": 3, "sweepers": [2]
    }  # fmt: skip
    assert read_meta(tmp_path).race == RaceMeta(variants=["atomic"], reps=3, sweepers=[2])
    ledger.put(Tiny, [Tiny("r", 9)])  # rows replaced, as finish_fetch's when the raw figures join them
    assert _csv(tmp_path / "tiny.csv") == [{"run_id": "r", "n": "9"}]


def test_a_write_that_fails_leaves_the_last_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path, RaceMeta)
    ledger.add(Tiny, [Tiny("r", 1)])
    ledger.meta(reps=3)
    before = {name: (tmp_path / name).read_text() for name in ("tiny.csv", "meta.json")}

    def torn(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", torn)
    with pytest.raises(OSError, match="disk full"):
        ledger.add(Tiny, [Tiny("r", 2)])
    with pytest.raises(OSError, match="disk full"):
        ledger.meta(reps=4)
    assert {name: (tmp_path / name).read_text() for name in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json", "tiny.csv"]  # no temporary left


def test_a_misnamed_section_field_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """mypy refuses it first (the ignore is needed: warn_unused_ignores); at run time, the
    declaration does."""
    ledger = Ledger(tmp_path, RaceMeta)
    ledger.meta(reps=3)
    before = (tmp_path / "meta.json").read_text()
    with pytest.raises(UndeclaredMetaKey, match=r"race\.rep\b"):
        ledger.meta(rep=3)  # type: ignore[call-arg]
    assert (tmp_path / "meta.json").read_text() == before
