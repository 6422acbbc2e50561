"""The instructions stage's grid: the baselines once, then each protocol's phases and its sweeps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bench.protocol.sweep import variants_of

NO_PROTOCOL = "none"  # the baselines belong to no queue protocol

Kind = Literal["baselines", "phases", "sweep", "cycles"]


@dataclass(frozen=True)
class Point:
    """What one measurement counts: the baselines, a protocol's phases, one sweep, or a protocol's
    fused and two-call jobs with another completed set than the stated state's."""

    protocol: str
    kind: Kind
    variant: str = ""  # a sweep's
    active_size: int = 0  # a sweep's active list, every lock lapsed
    completed_size: int = 0  # the cycles' completed set, as their phases begin


def points_of(protocols: Sequence[str], variants: Sequence[str], sizes: Sequence[int]) -> list[Point]:
    """Baselines, then per protocol its phases and each sweep variant it has at each size, small first.
    A count does not drift, so nothing alternates."""
    points = [Point(NO_PROTOCOL, "baselines")]
    for protocol in protocols:
        points.append(Point(protocol, "phases"))
        for variant in variants_of(protocol, variants):
            points += [Point(protocol, "sweep", variant, size) for size in sorted(sizes)]
    return points


def cycle_points_of(protocols: Sequence[str], sizes: Sequence[int], stated: int) -> list[Point]:
    """Per protocol, its jobs at each completed set size but the stated state's (``stated``: the
    phases' own count has it), small first: instructions against the completed set's size."""
    return [
        Point(p, "cycles", completed_size=size) for p in protocols for size in sorted(sizes) if size != stated
    ]
