"""The verdict on one metric at one point, A against B, that does not cry wolf: a Sample of each
run's repetitions, the ranges and Welch's t-test over them, and a threshold set by the spread
between runs as well as inside one.

A verdict needs evidence. It is decided in this order (``verdict``):

1. A deterministic count (``exact``: a count the code fixes, as commands a
   job, or instructions counted under callgrind) is judged on its value alone:
   ``same`` within 5% (instructions: 1%, and 1,000 a call), else ``better`` or
   ``worse`` by the metric's direction; a busy machine does not move it.
2. Timed metrics are judged from clean windows (neither contended nor
   saturated) where both runs have one (compare.metrics picks them); where a
   run has none, its noisy windows are used and the verdict knows which run
   was noisy (``noisy``).
3. ``no spread`` when either run measured the metric once per point (a max, a
   p99 of one window, a race count): one value against one value cannot tell a
   change from noise. Two values within the floor below are ``same``.
4. The between-runs threshold: the metric's floor (``BETWEEN_RUNS``, 15%:
   two runs of identical code on a shared machine differ by this much; a
   sweep's time has its own, as pyperf's spread is measured inside one
   process against one server) widened by the drift of the two runs' machine
   calibrations (``claim_beyond``).
5. A noisy window only ever makes a run look worse. Where the run that looks
   worse was noisy, a change is claimed only when the other was noisy too, the
   worse no more disturbed (foreign CPU and steal) than the other, and the
   change is far beyond both: ranges apart, beyond x1.4 either way
   (``NOISY_BEYOND``) and beyond five times the runs' pooled stdev (a halving
   with a 4% spread on both sides); else ``same`` within the threshold widened
   by the larger coefficient of variation, or when the change is not
   significant, and ``unstable`` otherwise.
6. Where the run that looks worse was clean: beyond the threshold with the
   two runs' ranges [min-max] over three repetitions or more apart, ``better`` / ``worse``
   by the metric's direction; ``same`` within the threshold widened by the
   larger of the two runs' coefficients of variation, or when Welch's t-test
   over the repetitions does not find the change significant at 95% (as
   pyperf's compare_to); ``unstable`` when either run's coefficient of
   variation exceeds 10%; else ``better`` / ``worse``. More jobs/s is better;
   more µs, ms, round trips, calls, BUSY replies or anomalies is worse.

``unstable`` and ``no spread`` are not regressions: ``--fail-on-regression``
fails on ``worse`` only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

UNSTABLE_CV = 0.10
CLAIM_BEYOND = 0.05  # a deterministic count this far apart is a change the code made
# Instructions counted under callgrind on pinned seeds and clock (harness.callgrind): three counts
# of one commit's default steps, two side by side beside a CPU hog on each core, put all 76 figures
# of each pair within 0.44% (median 0.02%). On a random seed a count with many key lookups moves by
# up to 0.75% from server to server (a healthy sweep of 100: 856,852 and 852,418, 0.52%).
INSTRUCTIONS_BEYOND = 0.005
INSTRUCTIONS_UNPINNED_BEYOND = 0.01
BETWEEN_RUNS = 0.15  # the least change between two runs a measured metric is judged on
# On noisy windows (contended or saturated in both runs) a change is claimed only when it is
# this large (x1.4 either way) and beyond FAR_SPREADS times the runs' pooled stdev: a halving
# of fused jobs/s with a 4% spread on both sides is 12 stdevs, no steal burst.
NOISY_BEYOND = 0.40
FAR_SPREADS = 5.0
APART_WINDOWS = 3  # the fewest windows a side for ranges apart to count as evidence
# A far-beyond change on noisy windows is claimed only when the run that looks worse was not the
# more disturbed one: its foreign CPU and steal (mean % of a core over its windows) at most this
# much above the other's. A real A/A under a CPU hog put one run's two-call cycle at x1.46 the
# other's with spreads of 1% and 4%: both contended, one far more.
DISTURBANCE_SLACK = 10.0
NO_SPREAD = "no spread"
VERDICTS = ("better", "worse", "same", "unstable", NO_SPREAD)


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
        clean = [float(v) for v in values if not is_missing(v)]
        if not clean:
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
    if a == 0:
        return math.nan if b == 0 else math.inf
    return b / a


# Two-sided 95% critical values of Student's t by degrees of freedom; between rows, linear in 1/df.
T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}  # fmt: skip
T95_INFINITE = 1.960


def t_critical(df: float) -> float:
    """The 95% two-sided critical t for ``df`` degrees of freedom (fractional, as Welch gives)."""
    if df <= 1:
        return T95[1]
    rows = sorted(T95.items())
    for (d0, t0), (d1, t1) in itertools.pairwise(rows):
        if d0 <= df <= d1:
            w = (1 / df - 1 / d0) / (1 / d1 - 1 / d0)
            return t0 + w * (t1 - t0)
    last_df, last_t = rows[-1]
    return T95_INFINITE + (last_t - T95_INFINITE) * last_df / df


def significant(a: Sample, b: Sample) -> bool:
    """Welch's t-test at 95%: is the difference of the means beyond the repetitions' noise?"""
    assert a.stdev is not None and b.stdev is not None
    va, vb = a.stdev**2 / a.n, b.stdev**2 / b.n
    if va + vb == 0:
        return a.mean != b.mean  # no noise at all: any difference is real
    t = abs(b.mean - a.mean) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    return t > t_critical(df)


def claim_beyond(floor: float, drift: float) -> float:
    """The least change claimed: the metric's ``floor`` widened by the calibration ``drift``
    (the largest relative change of a machine calibration figure between the two runs)."""
    return (1 + floor) * (1 + max(drift, 0.0)) - 1


def apart(a: Sample, b: Sample) -> bool:
    """The two runs' ranges over repetitions do not overlap."""
    return a.hi < b.lo or b.hi < a.lo


def far_beyond(a: Sample, b: Sample, beyond: float) -> bool:
    """A change no noise of these sizes explains: ranges apart, beyond ``NOISY_BEYOND`` (and the
    between-runs threshold), and beyond ``FAR_SPREADS`` times the two runs' pooled stdev."""
    # Two noisy windows a side can sit far apart by chance: one real run split in two gave a timed
    # script cost x1.91 at a 5% spread both sides. Three a side, as for ranges apart below.
    if not (a.has_spread and b.has_spread) or min(a.n, b.n) < APART_WINDOWS or not apart(a, b):
        return False
    assert a.stdev is not None and b.stdev is not None
    pooled = math.sqrt((a.stdev**2 + b.stdev**2) / 2)
    change = abs(ratio(a.mean, b.mean) - 1)
    return change > max(beyond, NOISY_BEYOND) and abs(b.mean - a.mean) > FAR_SPREADS * pooled


def verdict(
    a: Sample,
    b: Sample,
    higher_is_better: bool,
    *,
    exact: bool = False,
    exact_beyond: float = CLAIM_BEYOND,
    contended: bool = False,
    noisy: tuple[bool, bool] = (False, False),
    disturbed: tuple[float, float] | None = None,
    beyond: float = BETWEEN_RUNS,
    least: float = 0.0,
) -> str:
    """better | worse | same | unstable | no spread, by the rules of the module docstring;
    ``noisy`` says which run's windows were contended or saturated (``contended``: both),
    ``disturbed`` how much (each run's mean foreign CPU and steal, % of a core), ``beyond`` is the
    between-runs threshold of a measured metric (``claim_beyond``), ``least``
    the smallest change in the metric's own unit that is claimed at all."""
    if exact:  # a busy CPU does not change a count the code fixes
        if least and abs(a.mean - b.mean) <= least:
            return "same"
        return _by_threshold(a, b, higher_is_better, exact_beyond)
    noisy_a, noisy_b = (True, True) if contended else noisy
    change = ratio(a.mean, b.mean) - 1
    if not (a.has_spread and b.has_spread):
        # one value against one value: equal, or within the floor, is no change; beyond it no verdict
        return "same" if a.mean == b.mean or abs(change) <= beyond else NO_SPREAD
    if least and abs(a.mean - b.mean) <= least:
        return "same"
    # A noisy window (steal, a busy neighbour, a saturated client) only ever makes a run look
    # worse: where the run that looks worse had one, the change may be the noise.
    b_looks_worse = (change < 0) == higher_is_better
    worse_noisy, better_noisy = (noisy_b, noisy_a) if b_looks_worse else (noisy_a, noisy_b)
    widened = beyond + max(cv or 0.0 for cv in (a.cv, b.cv))
    if worse_noisy:
        worse_more_disturbed = disturbed is not None and (
            (disturbed[1] - disturbed[0] if b_looks_worse else disturbed[0] - disturbed[1])
            > DISTURBANCE_SLACK
        )
        # both noisy, the worse no more disturbed than the other, and far beyond both spreads
        if better_noisy and not worse_more_disturbed and far_beyond(a, b, beyond):
            return _by_threshold(a, b, higher_is_better, beyond)
        return "same" if abs(change) <= widened or not significant(a, b) else "unstable"
    # The run that looks worse was clean: noise can only have hidden part of the change. Ranges
    # apart say little over fewer than three windows a side (two against three fall apart by
    # chance one time in five).
    if apart(a, b) and min(a.n, b.n) >= APART_WINDOWS and abs(change) > beyond:
        return _by_threshold(a, b, higher_is_better, beyond)
    # Ranges that overlap: the threshold widened by the noisier run's own spread (two repetitions
    # far apart in one run say a change of that size between runs is no news).
    if abs(change) <= widened or not significant(a, b):
        return "same"
    if any(cv is not None and cv > UNSTABLE_CV for cv in (a.cv, b.cv)):
        return "unstable"
    return _by_threshold(a, b, higher_is_better, widened)


def _by_threshold(a: Sample, b: Sample, higher_is_better: bool, beyond: float) -> str:
    change = ratio(a.mean, b.mean) - 1
    if abs(change) <= beyond:
        return "same"
    return "better" if (change > 0) == higher_is_better else "worse"
