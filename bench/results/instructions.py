"""The instructions stage's contract: its rows (instructions.csv), counted under callgrind, a row a
step, and its meta.json section."""

from __future__ import annotations

from collections.abc import Mapping
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
    # on each server a profile names; "" for the run's own (every run before the column)
    # and at the completed set's size a protocol's phases began at: a count is of its state
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "server", "step", "active_size", "completed_size")
    # a run before the state: every queue began empty
    IMPLIED: ClassVar[Mapping[str, object]] = {**rows.Row.IMPLIED, "server": "", "completed_size": 0}
    run_id: str
    protocol: str  # "none": a baseline of no queue protocol (PING, EVALSHA of return 1)
    profile: str
    # a phase of the script cost ("moveToActive"), a worker's cycle ("fused cycle", a job),
    # a baseline, or a sweep variant over an all-stalled active list ("sweep atomic")
    step: str
    active_size: int  # the sweep's active list, every id stalled (0: not a sweep)
    # the completed set's size as a protocol's phases began (meta.json's instructions.state has
    # the rest of that state); 0 for a baseline or a sweep, and in a run from before the state
    completed_size: int
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
    # the server counted, from its INFO ("valkey 8.0.1"), where the profile names several
    # (servers); empty: the one the run would start, named in meta.json
    server: str = ""
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class InstructionsPartRow(rows.Row):
    """Where a step's instructions went: the whole server's count (as instructions.csv's
    server_instructions_per_call) split by part of Redis, each function callgrind counted put in
    one part by bench/stages/instructions/parts.py's rules. A step's parts add up to its count."""

    FILE: ClassVar[str] = "instructions_parts.csv"
    IMPLIED: ClassVar[Mapping[str, object]] = {**rows.Row.IMPLIED, "server": ""}
    run_id: str
    protocol: str
    profile: str
    step: str  # as instructions.csv's
    active_size: int
    unit: str  # what a count is per: "call", "job" or "stalled id"
    # "Lua interpreter", "script call and dispatch", "command bodies", "data structures", "allocator",
    # "replies", "propagation and keyspace bookkeeping", "networking and event loop",
    # "unnamed (no symbols)" (a binary without its static symbols), "the rest"
    part: str
    detail: str  # within the part: the command ("zadd"), the data type ("sorted set"), or ""
    server_instructions_per_call: float  # this part's, per unit
    share_pct: float  # of the step's whole count
    server: str = ""  # as instructions.csv's
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class InstructionsCompletedRow(rows.Row):
    """A job's instructions inside command execution against the completed set's size: a fused and
    a two-call cycle counted at the stated queue state (meta.json's instructions.state) with the
    completed set at each size the profile names (instructions-completed-sizes). The size is the
    set's as the phases began: their finishes add to it, 2 x (lead + N) by the fused cycle's end."""

    FILE: ClassVar[str] = "instructions_completed.csv"
    KEYS: ClassVar[tuple[str, ...]] = ("protocol", "server", "step", "completed_size")
    IMPLIED: ClassVar[Mapping[str, object]] = {**rows.Row.IMPLIED, "server": ""}
    run_id: str
    protocol: str
    profile: str
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
    """Each server binary counted, by the name its INFO gave ("valkey 8.0.1"), where the profile
    named several (servers)."""
    left_out: dict[str, dict[str, str]] = field(default_factory=dict)
    """By server, each protocol left out on it because it refused the protocol's scripts, and why."""
    state: dict[str, int] = field(default_factory=dict)
    """The queue state a protocol's phases began at, by size (wait, active, completed, events,
    last_id, other_keys), and lead_calls: the calls each phase ran before its counted ones."""
    allocators: dict[str, str] = field(default_factory=dict)
    """The settings each allocator ran under (by its environment variable): counts compare only
    under the same."""
