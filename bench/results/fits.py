"""Log-log slopes and paired A/B ratios, here so the stages' tables, the report and compare
compute them alike. The headline A/B figure (fused against two_call jobs/s) is ``headline_ratio``,
and nothing else computes an A/B ratio."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


def finite_number(value: object) -> float | None:
    """A finite float, or None for a blank, missing or NaN cell."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class LogLogFit:
    """Slope of log(y) on log(x): 1 is linear growth, 2 quadratic."""

    slope: float  # least squares over every point
    slope_top_two: float  # between the two largest x, where growth at scale shows most plainly
    from_x: float
    to_x: float


def loglog_fit(points: Iterable[tuple[object, object]]) -> LogLogFit | None:
    """The fit of (x, y) points without a blank or non-positive value; None below two distinct x."""
    kept = sorted(
        (x, y)
        for x, y in ((finite_number(x), finite_number(y)) for x, y in points)
        if x is not None and y is not None and x > 0 and y > 0
    )
    if len({x for x, _ in kept}) < 2:
        return None
    logs_x = [math.log(x) for x, _ in kept]
    logs_y = [math.log(y) for _, y in kept]
    dx = logs_x[-1] - logs_x[-2]
    top = (logs_y[-1] - logs_y[-2]) / dx if dx else math.nan  # two points at the same largest x
    slope = statistics.linear_regression(logs_x, logs_y).slope
    return LogLogFit(slope=slope, slope_top_two=top, from_x=kept[0][0], to_x=kept[-1][0])


@dataclass(frozen=True)
class PairedRatio:
    """A/B over the repetitions run as pairs (A B A B): the median of the pair ratios and their range.
    Pairing cancels a shared machine's drift between rounds, which a ratio of means would not."""

    median: float
    lo: float
    hi: float
    pairs: int

    def text(self, form: str = "{:.2f}") -> str:
        """``median [min-max]``; the median alone for a single pair."""
        middle = form.format(self.median)
        return middle if self.pairs == 1 else f"{middle} [{form.format(self.lo)}-{form.format(self.hi)}]"


def paired_ratio(pairs: Iterable[tuple[object, object]]) -> PairedRatio | None:
    """The ratios a/b of the (a, b) pairs without a blank side or b = 0; None when none is left."""
    ratios = [
        a / b
        for a, b in ((finite_number(a), finite_number(b)) for a, b in pairs)
        if a is not None and b is not None and b != 0
    ]
    return PairedRatio(statistics.median(ratios), min(ratios), max(ratios), len(ratios)) if ratios else None


def headline_ratio(a: Mapping[int, object], b: Mapping[int, object]) -> PairedRatio | None:
    """A/B of one point from each side's value by repetition: a repetition one side lacks (a run
    stopped early) pairs with nothing, rather than shifting every later pair by one."""
    return paired_ratio((a[rep], b[rep]) for rep in sorted(a.keys() & b.keys()))
