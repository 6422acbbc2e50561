"""bench.results.fits: the slopes and paired ratios the stages print and the report shows."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bench.report.render import write_report
from bench.results.fits import headline_ratio, loglog_fit, paired_ratio
from tests.data.make_fixtures import RUN_A

DATA = Path(__file__).parent / "data"


def test_loglog_slope_is_one_for_linear_and_two_for_quadratic() -> None:
    sizes = [10, 100, 1000, 10_000]
    linear = loglog_fit((n, 0.5 * n) for n in sizes)
    quadratic = loglog_fit((n, 3e-4 * n * n) for n in sizes)
    assert linear is not None and quadratic is not None
    assert linear.slope == pytest.approx(1.0) and linear.slope_top_two == pytest.approx(1.0)
    assert quadratic.slope == pytest.approx(2.0) and quadratic.slope_top_two == pytest.approx(2.0)
    assert (linear.from_x, linear.to_x) == (10, 10_000)


def test_loglog_leaves_out_blank_and_non_positive_points() -> None:
    fit = loglog_fit([(1000, 10.0), (10, ""), (100, 1.0), (50, 0), (20, None), (5, math.nan)])
    assert fit is not None and fit.slope == pytest.approx(1.0) and fit.from_x == 100
    assert loglog_fit([(10, 1.0), (10, 2.0), (100, "")]) is None  # one size: no slope


def test_paired_ratio_is_the_median_of_the_pairs_with_their_range() -> None:
    # Ratios 2.0, 1.5, 1.0; the ratio of the means would be 4.5/3.4.
    ratio = paired_ratio([(2.0, 1.0), (1.5, 1.0), (1.0, 1.0)])
    assert ratio is not None
    assert (ratio.median, ratio.lo, ratio.hi, ratio.pairs) == (1.5, 1.0, 2.0, 3)
    assert ratio.text() == "1.50 [1.00-2.00]"
    one = paired_ratio([(3, 2)])
    assert one is not None and one.text("{:.1f}") == "1.5"


def test_paired_ratio_leaves_out_pairs_it_cannot_divide() -> None:
    ratio = paired_ratio([(1.0, 0), (None, 2.0), ("", 1.0), (4.0, 2.0), (math.nan, 1.0)])
    assert ratio is not None and (ratio.median, ratio.pairs) == (2.0, 1)
    assert paired_ratio([(1.0, 0), (None, None)]) is None


def test_the_headline_pairs_the_runs_by_repetition() -> None:
    fused, two_call = {1: 200.0, 2: 300.0, 3: 150.0}, {2: 100.0, 1: 100.0}  # rep 3 of two_call lost
    ratio = headline_ratio(fused, two_call)
    assert ratio is not None and ratio.text() == "2.50 [2.00-3.00]" and ratio.pairs == 2
    assert headline_ratio({1: 1.0}, {2: 1.0}) is None


def test_the_report_shows_the_median_of_pairs_not_the_ratio_of_means(
    tmp_path: Path, figures_undrawn: None
) -> None:
    run = tmp_path / RUN_A
    shutil.copytree(DATA / RUN_A, run)
    csv = run / "finish_fetch.csv"
    frame = pd.read_csv(csv)
    point = (frame["workers"] == 2) & (frame["rtt_ms"] == 0)
    fused = point & (frame["strategy"] == "fused")
    two = point & (frame["strategy"] == "two_call")
    frame.loc[fused, "jobs_per_s"] = [1200.0, 900.0, 600.0]
    frame.loc[two, "jobs_per_s"] = [400.0, 600.0, 600.0]  # pairs 3.0, 1.5, 1.0; means 900/533
    frame.to_csv(csv, index=False)
    text = write_report(run).read_text()
    assert "| 2 | 0 | 1.50 | [1.00-3.00] | 3 |" in text
