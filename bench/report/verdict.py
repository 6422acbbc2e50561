"""The verdict on one metric at one point, A against B, that never cries wolf: a Sample of each
run's windows, their ranges, and a threshold learnt from A/A pairs of one
commit (bench.report.compare.learnt).

Two kinds of figure, judged apart (``verdict``):

1. A count the code fixes (``exact``: commands a job, instructions counted under callgrind) is
   judged on its value alone: ``same`` within 5% (instructions: 0.5%, and 1,000 a call), else
   ``better`` or ``worse`` by the metric's direction. A busy machine does not move it: these
   carry the gate.
2. A timed figure (jobs/s, µs, a ratio taken within one run) is judged only on clean windows
   (neither contended nor saturated), at least three a side: ``not judged`` otherwise, never
   better or worse. Then it is ``better`` / ``worse`` only where the change is beyond the drift
   learnt for its metric between runs of one commit (the largest any A/A pair showed) and beyond
   both runs' spread: their ranges [min-max] apart. Else ``same``.

A maximum and any figure measured once a point (one event, no spread) is ``shown`` by the
comparison (compare.metrics): never judged. ``--fail-on-regression`` fails on ``worse`` only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from bench.results.rows import CLAIM_BEYOND

# A timed metric no A/A pair has measured yet is judged beyond this (and says so).
BETWEEN_RUNS = 0.15
CLEAN_WINDOWS_MIN = 3  # the fewest clean windows a side a timed figure is judged on
NOT_JUDGED = "not judged"  # a timed figure on too few clean windows
SHOWN = "shown"  # a maximum or a single value: one event, never judged
VERDICTS = ("better", "worse", "same", NOT_JUDGED, SHOWN)


@dataclass(frozen=True)
class Sample:
    """One metric at one point of one run: its value and the spread of its repetitions."""

    mean: float
    lo: float
    hi: float
    cv: float | None = None  # None when there is only one value (no spread known)
    n: int = 1
    stdev: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        if not (clean := [float(v) for v in values if not is_missing(v)]):
            return cls(math.nan, math.nan, math.nan, None, 0)
        mean = sum(clean) / len(clean)
        cv = sd = None
        if len(clean) >= 2:
            sd = math.sqrt(sum((v - mean) ** 2 for v in clean) / (len(clean) - 1))
            cv = sd / abs(mean) if mean else (0.0 if sd == 0 else math.inf)
        return cls(mean, min(clean), max(clean), cv, len(clean), sd)

    @classmethod
    def with_stdev(cls, centre: float, stdev: float, scale: float = 1.0, n: int = 2) -> Sample:
        """A median ± stdev over ``n`` repetitions (sweep_cost rows); ``scale`` converts both."""
        if is_missing(stdev) or n < 2:
            return cls(centre * scale, centre * scale, centre * scale)
        cv = stdev / abs(centre) if centre else None
        lo, hi = (centre - stdev) * scale, (centre + stdev) * scale
        return cls(centre * scale, lo, hi, cv, n, abs(stdev * scale))

    @property
    def has_spread(self) -> bool:
        return self.n >= 2 and self.stdev is not None


def is_missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def ratio(a: float, b: float) -> float:
    """B/A; nan when both are zero, inf when only A is."""
    return b / a if a != 0 else math.nan if b == 0 else math.inf


def apart(a: Sample, b: Sample) -> bool:
    """The two runs' ranges over repetitions do not overlap."""
    return a.hi < b.lo or b.hi < a.lo


def verdict(
    a: Sample,
    b: Sample,
    higher_is_better: bool,
    *,
    exact: bool = False,
    exact_beyond: float = CLAIM_BEYOND,
    clean: tuple[bool, bool] = (True, True),
    beyond: float = BETWEEN_RUNS,
    least: float = 0.0,
) -> str:
    """better | worse | same | not judged | shown, by the rules of the module docstring.
    ``clean`` says whether each run's sample is its clean windows only, ``beyond`` is the drift
    learnt for the metric, ``least`` the smallest change in the metric's own unit claimed at all."""
    timed = not exact  # a busy CPU does not change a count the code fixes
    if timed and (not all(clean) or min(a.n, b.n) < CLEAN_WINDOWS_MIN or not (a.has_spread and b.has_spread)):
        return NOT_JUDGED
    if least and abs(a.mean - b.mean) <= least:
        return "same"
    if not (exact or apart(a, b)):
        return "same"
    change = ratio(a.mean, b.mean) - 1
    if abs(change) <= (exact_beyond if exact else beyond):
        return "same"
    return "better" if (change > 0) == higher_is_better else "worse"
