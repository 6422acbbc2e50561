"""The run's headline figure, fused/two_call jobs/s at each point, as every part of the report shows it.

One definition (bench.fits.headline_ratio): the median of the ratios of the
runs paired by repetition, A B A B, with their [min-max]. The stage's terminal
table prints the same; the report's tables, its throughput plot and compare
take it from here, so no ratio of means creeps back in.
"""

from __future__ import annotations

import pandas as pd

from bench.fits import PairedRatio, headline_ratio

A, B = "fused", "two_call"
NAME = f"{A}/{B} jobs/s"
POINT_KEYS = ("workers", "rtt_ms")  # and the protocol first, where the run has one


def by_rep(frame: pd.DataFrame, strategy: str, column: str = "jobs_per_s") -> dict[int, float]:
    """One strategy's ``column`` by repetition (rows without a repetition number left out)."""
    rows = frame[(frame["strategy"] == strategy) & frame["rep"].notna()]
    return {int(rep): float(value) for rep, value in zip(rows["rep"], rows[column], strict=True)}


def point_ratio(frame: pd.DataFrame) -> PairedRatio | None:
    """The headline at one point (``frame`` holds that point's rows only)."""
    needed = {"strategy", "rep", "jobs_per_s"}
    if not needed <= set(frame.columns) or not {A, B} <= set(frame["strategy"]):
        return None
    return headline_ratio(by_rep(frame, A), by_rep(frame, B))


def point_keys(frame: pd.DataFrame) -> tuple[str, ...]:
    """What a point is: (protocol,) workers and rtt_ms."""
    return ("protocol", *POINT_KEYS) if "protocol" in frame.columns else POINT_KEYS


def per_point_with_keys(
    frame: pd.DataFrame | None,
) -> tuple[tuple[str, ...], dict[tuple[object, ...], PairedRatio]]:
    """The key columns, and key -> the headline there, for every point that ran both strategies."""
    if frame is None or frame.empty or not set(POINT_KEYS) <= set(frame.columns):
        return POINT_KEYS, {}
    keys = point_keys(frame)
    found = {}
    for key, group in frame.groupby(list(keys), dropna=False, sort=True):
        ratio = point_ratio(group)
        if ratio is not None:
            found[tuple(key)] = ratio
    return keys, found


def per_point(frame: pd.DataFrame | None) -> dict[tuple[object, ...], PairedRatio]:
    """Key ((protocol,) workers, rtt_ms) -> the headline there."""
    return per_point_with_keys(frame)[1]
