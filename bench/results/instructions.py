"""The instructions stage's contract: its rows (instructions.csv), counted under callgrind, a row a
step, and its meta.json section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from bench.results import rows

# Instructions counted under callgrind on pinned seeds and clock (harness.callgrind): three counts
# of one commit's default steps, two side by side beside a CPU hog on each core, put all 76 figures
# of each pair within 0.44% (median 0.02%). So a change beyond 0.5% is one the code made. On a
# random seed (unshare refused) a count with many key lookups moves by up to 0.75% from server to
# server (a healthy sweep of 100: 856,852 and 852,418, 0.52%): judged beyond 1%. Nor is a change
# under 1,000 instructions a call claimed; one more redis.call costs about 5,000.
INSTRUCTIONS_BEYOND = 0.005
INSTRUCTIONS_UNPINNED_BEYOND = 0.01
INSTRUCTIONS_LEAST = 1000.0
COUNTED = rows.Metric(
    "instructions_per_call", exact=True, exact_beyond=INSTRUCTIONS_BEYOND, least=INSTRUCTIONS_LEAST
)


@dataclass(frozen=True)
class InstructionsRow(rows.RunRow):
    """The instructions Redis executed for one step under valgrind's callgrind (a count, not a time:
    steal cannot move it), inside command execution (Redis's call()) and for the whole request
    (read, parse, run, reply); the client, the network and the kernel are outside both."""

    FILE: ClassVar[str] = "instructions.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "server", "step", "active_size", "completed_size")
    # a run before the column: the run's own server; every queue began empty
    IMPLIED: ClassVar[Mapping[str, object]] = {**rows.Row.IMPLIED, "server": "", "completed_size": 0}
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (
        COUNTED,
        replace(COUNTED, column="server_instructions_per_call"),
    )
    # protocol "none": a baseline of no queue protocol (PING, EVALSHA of return 1)
    step: str  # a phase ("moveToActive"), a cycle ("fused cycle"), a baseline or a sweep ("sweep atomic")
    active_size: int  # the sweep's active list, every id stalled (0: not a sweep)
    completed_size: int  # as a protocol's phases began (the rest: meta.json's instructions.state)
    unit: str  # what a count is per: "call", "job" (a cycle) or "stalled id" (a sweep)
    calls: int  # the step's runs counted (a sweep: 1)
    instructions_per_call: float  # inside command execution, per unit
    server_instructions_per_call: float  # the whole request, from its read to its reply, per unit
    # the count per unit over 2N calls against over N, in %: near 0 for a cost per call (empty for a sweep)
    instructions_2n_diff_pct: float | None = None
    server_instructions_2n_diff_pct: float | None = None
    seed_pinned: bool = False  # Redis's seeds and clock pinned (unpinned, a count may move up to 0.75%)
    server: str = ""  # its INFO ("valkey 8.0.1") where the profile names several; empty: meta.json's
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class InstructionsPartRow(rows.RunRow):
    """A step's whole-server count split by part of Redis (bench/stages/instructions/parts.py's
    rules): a step's parts add up to its instructions.csv server_instructions_per_call."""

    FILE: ClassVar[str] = "instructions_parts.csv"
    IMPLIED: ClassVar[Mapping[str, object]] = {**rows.Row.IMPLIED, "server": ""}
    step: str  # as instructions.csv's
    active_size: int
    unit: str  # what a count is per: "call", "job" or "stalled id"
    part: str  # "Lua interpreter", "allocator", ... (docs/results-reference.md lists them)
    detail: str  # within the part: the command ("zadd"), the data type ("sorted set"), or ""
    server_instructions_per_call: float  # this part's, per unit
    share_pct: float  # of the step's whole count
    server: str = ""  # as instructions.csv's
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class InstructionsCompletedRow(rows.RunRow):
    """A job's instructions inside command execution, a fused and a two-call cycle, at each completed
    set size the profile names (instructions-completed-sizes), the rest of the state as stated. The
    size is the set's as the phases began: their finishes add 2 x (lead + N) by the fused cycle's end."""

    FILE: ClassVar[str] = "instructions_completed.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "server", "step", "completed_size")
    METRICS: ClassVar[tuple[rows.Metric, ...]] = (COUNTED,)
    IMPLIED: ClassVar[Mapping[str, object]] = {**rows.Row.IMPLIED, "server": ""}
    step: str  # "fused cycle" or "two-call cycle"
    completed_size: int
    unit: str  # "job"
    # the cycle's runs counted: N at a size of the figure's own, 2N at the stated state's (its count)
    calls: int
    instructions_per_call: float  # inside command execution, a job
    seed_pinned: bool = False  # as instructions.csv's
    server: str = ""  # as instructions.csv's
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
    servers: dict[str, str] = field(default_factory=dict)
    """Each server binary counted, by its INFO's name ("valkey 8.0.1"), where the profile names several."""
    left_out: dict[str, dict[str, str]] = field(default_factory=dict)
    """By server, each protocol left out on it because it refused the protocol's scripts, and why."""
    state: dict[str, int] = field(default_factory=dict)
    """The queue state a protocol's phases began at, by size (wait, active, completed, events,
    last_id, other_keys), and lead_calls: the calls each phase ran before its counted ones."""
    allocators: dict[str, str] = field(default_factory=dict)
    """Each allocator's settings (by its environment variable): counts compare only under the same."""
