"""The instructions stage's contract: its rows (instructions.csv), counted under callgrind, a row a
step, and its meta.json section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from bench.results import rows


@dataclass(frozen=True)
class InstructionsRow(rows.Row):
    """The instructions Redis executed for one step, counted under valgrind's callgrind: a count,
    not a time, so steal cannot move it. Inside command execution (Redis's call(): the step's
    scripts and the commands they run) and for the whole request (read, parse, run, reply);
    the client, the network and the kernel are outside both."""

    FILE: ClassVar[str] = "instructions.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "step", "active_size")
    run_id: str
    protocol: str  # "none": a baseline of no queue protocol (PING, EVALSHA of return 1)
    profile: str
    # a phase of the script cost ("moveToActive"), a worker's cycle ("fused cycle", a job),
    # a baseline, or a sweep variant over an all-stalled active list ("sweep atomic")
    step: str
    active_size: int  # the sweep's active list, every id stalled (0: not a sweep)
    unit: str  # what a count is per: "call", "job" (a cycle) or "stalled id" (a sweep)
    calls: int  # the step's runs counted (a sweep: 1)
    instructions_per_call: float  # inside command execution, per unit
    server_instructions_per_call: float  # the whole request, from its read to its reply, per unit
    # the count per unit over 2N calls against over N, in %: near 0 when it is a cost per call
    # (empty for a sweep: one sweep is counted)
    instructions_2n_diff_pct: float | None = None
    server_instructions_2n_diff_pct: float | None = None
    # Redis's seeds and wall clock pinned for the count (harness.callgrind): counts of one commit
    # agree to the instruction nearly; unpinned, a key's lookup moves a count by up to 0.75%
    seed_pinned: bool = False
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class InstructionsMeta:
    """The instructions stage's section: how its counts were made, or why there are none."""

    skipped: str | None = None
    """Why nothing was counted (valgrind missing)."""
    calls: int | None = None
    """Calls a step's batch N (the row's figure is over 2N)."""
    scopes: dict[str, str] = field(default_factory=dict)
    """Each count's scope: the functions callgrind collected inside."""
    outside: str | None = None
    """What neither count holds."""
    seed: str | None = None
    """Redis's random seed: "pinned" (a fixed /dev/urandom), or why it could not be."""
