"""The script_cost stage's contract: its rows (script_cost.csv), a row per repetition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.results import rows


@dataclass(frozen=True)
class ScriptCostRow(rows.RunRow):
    """One worker step of one protocol with its scripts alone on a small queue: the hot
    path's script cost, each protocol's against the others' in the same run."""

    FILE: ClassVar[str] = "script_cost.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "step")
    # the scripts fix the commands a call: no noise to test against
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (
        rows.Metric("server_us_per_call"),
        rows.Metric("commands_per_call", exact=True),
    )
    step: str  # "fused cycle", "two-call cycle", "extendLock", "healthy sweep (100 active)"
    rep: int
    calls: int  # times the step ran
    server_us_per_call: float  # Redis µs inside the step's EVALSHAs, a call (a cycle: a job)
    commands_per_call: float  # every command the step ran, those inside its scripts too
    # the same by name, a call; a JSON object in its cell: {"evalsha": 1, "hset": 2, "zadd": 1}
    commands: dict[str, float]
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False
