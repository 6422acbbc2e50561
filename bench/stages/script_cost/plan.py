"""The script-cost stage's grid: every protocol, every repetition, protocols alternating."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """One protocol's phases, once."""

    protocol: str
    rep: int


def points_of(protocols: Sequence[str], reps: int) -> list[Point]:
    """A B C A B C: drift on a shared machine hits every protocol alike."""
    return [Point(protocol, rep) for rep in range(1, reps + 1) for protocol in protocols]
