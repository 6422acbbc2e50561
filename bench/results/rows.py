"""What every result file's rows share: the columns they start with, the base of a row type and
how a row is written. Each stage's row types are in its own file (bench/results/<stage>.py), listed
in bench/results/stages.py; docs/results-reference.md describes every column."""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

# The protocol a row measured when it does not say (a run from before the protocol column).
PROTOCOL = "echomq"

JsonObject = dict[str, object]  # a nested JSON object meta.json keeps as the stage wrote it
CLAIM_BEYOND = 0.05  # a deterministic count this far apart is a change the code made


@dataclass(frozen=True)
class Metric:
    """A column `bench compare` judges run against run, and how (lower is better unless said)."""

    column: str
    higher_is_better: bool = False
    exact: bool = False  # a count the code fixes, not a measurement: no noise to test against
    maximum: bool = False  # a window's largest value: one event, shown and never judged
    least: float = 0.0  # the least change claimed in the column's own unit (0: any)
    exact_beyond: float = CLAIM_BEYOND  # an exact count's least change claimed


@dataclass(frozen=True)
class RunIds:
    """The columns every row starts with: which run, which protocol, which profile."""

    run_id: str
    profile: str
    protocol: str = PROTOCOL


class Row:
    """The base of a row type: one frozen dataclass a CSV, its field names, in order, the file's columns.

    A row carries the load settings that differ between profiles, so many runs' CSVs concatenate.
    A value not measured is None, an empty cell; a column that may be unmeasured is a float column,
    so pandas reads it as float64 either way. Every row ends with the machine watch of its window
    (bench.harness.machine): foreign CPU and steal in % of one core, ``contended`` when over a limit.
    """

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    FILE: ClassVar[str]  # the file's name in the run folder
    KEYS: ClassVar[tuple[str, ...]] = ()  # the columns that name a point: compare matches rows on them
    # what a file from before a column implies for it (before the protocol column: echomq's)
    IMPLIED: ClassVar[Mapping[str, object]] = {"protocol": PROTOCOL}
    RENAMED: ClassVar[Mapping[str, str]] = {}  # an older run's name for a column -> its name now
    METRICS: ClassVar[tuple[Metric, ...]] = ()  # what compare judges of a keyed file's points


@dataclass(frozen=True)
class RunRow(Row):
    """A row that starts as most do: which run, which protocol, which profile."""

    run_id: str
    protocol: str
    profile: str


def columns_of(row_type: type[Row]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(row_type))


_TYPED: dict[tuple[type, tuple[type, ...]], frozenset[str]] = {}  # filled as rows are written


def typed_columns(row_type: type[Row], *kinds: type) -> frozenset[str]:
    """The fields declared one of ``kinds`` (alone or with None; dict names dict[str, float] too):
    a float column is written as floats (3 as 3.0), a str or dict one read back as text."""
    if (row_type, kinds) not in _TYPED:
        hints = get_type_hints(row_type).items()
        declared = {n: get_args(h) if get_origin(h) in (Union, types.UnionType) else (h,) for n, h in hints}
        found = (n for n, ds in declared.items() if any((get_origin(d) or d) in kinds for d in ds))
        _TYPED[row_type, kinds] = frozenset(found)
    return _TYPED[row_type, kinds]


def row_dict(row: Row) -> dict[str, Any]:
    """A row as the CSV writer takes it: None (not measured) becomes an empty cell, an int in a
    float column a float, a mapping a JSON object, and an empty text cell its stated stand-in
    (``empty_as``)."""
    floats = typed_columns(type(row), float)
    out: dict[str, Any] = {}
    for f in fields(row):
        if (value := getattr(row, f.name)) is None:
            value = ""
        elif f.name in floats and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif isinstance(value, dict):  # a structured cell: JSON, read back with json.loads
            value = json.dumps(value, sort_keys=True)
        elif value == "" and "empty_as" in f.metadata:
            value = f.metadata["empty_as"]
        out[f.name] = value
    return out
