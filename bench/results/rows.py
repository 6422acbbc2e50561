"""The result files' rows: one frozen dataclass a CSV, its fields the columns docs/results-reference.md
lists."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

# The protocol a row measured when it does not say (a run from before the protocol column).
PROTOCOL = "echomq"

# One frozen dataclass a CSV: its field names, in order, are the file's columns; FILE its name.
# Every row starts with run_id, protocol and profile, and carries the load
# settings that differ between profiles, so the CSVs of many runs concatenate
# without hand work. A value that was not measured (a skipped point) is None,
# written as an empty cell; a column that may be unmeasured is a float column,
# so pandas reads it as float64 whether or not a cell is empty.
#
# Every row ends with the machine watch of its measured window (bench.harness.machine):
# the foreign CPU and steal in % of one core, and ``contended`` when either was over
# its limit. A point never measured had no window: nothing foreign touched it.


STEADY = "steady"  # the regime of a finish_fetch row from before the regime column
NOT_STOPPED = "no"  # a remeasure_stopped cell when the budget stopped nothing


@dataclass(frozen=True)
class RunIds:
    """The columns every row starts with: which run, which protocol, which profile."""

    run_id: str
    profile: str
    protocol: str = PROTOCOL


@dataclass(frozen=True)
class FinishFetchRow:
    FILE: ClassVar[str] = "finish_fetch.csv"

    run_id: str
    protocol: str
    profile: str
    strategy: str
    rep: int
    workers: int
    producers: int
    rtt_ms: float
    batch_size: int
    payload_bytes: int
    target_rate: float
    warmup_s: float
    measure_s: float
    duration_s: float | None
    jobs: int
    jobs_per_s: float | None
    round_trips_per_job: float | None
    server_calls_per_job: float | None
    server_us_per_job: float | None
    cycle_p50_us: float | None
    cycle_p90_us: float | None
    cycle_p99_us: float | None
    cycle_p999_us: float | None
    cycle_max_us: float | None
    e2e_p50_us: float | None
    e2e_p99_us: float | None
    loadgen_cpu_pct: float | None
    saturated: bool
    audit_ok: bool
    # Jobs in flight per worker connection and the time each job is held.
    concurrency: int = 1
    job_ms: float = 0.0
    # Script calls a job's cycle sends (1 fused, 2 two-call): counted at the client, and by INFO
    # commandstats (EVALSHA calls less the producers' addJob and the fetches outside a cycle).
    commands_per_job: float | None = None
    server_commands_per_job: float | None = None
    # fetches outside a job's cycle (a slot's first, or after one found the queue empty), a job
    fetches_alone_per_job: float | None = None
    loadgen_cpu_us_per_job: float | None = None
    redis_cpu_pct: float | None = None
    # 1e6 / server_us_per_job: the jobs/s Redis could do were its own time the only cost
    redis_ceiling_jobs_per_s: float | None = None
    # which side set the pace (client, network, job time, redis) and its used share of capacity
    limit: str = ""
    limit_share: float | None = None
    # the server's used_memory growth over the window, per 1,000 jobs finished in it: kept jobs cost
    # memory, so a long window on the protocols' defaults fills a server (negative: memory freed)
    redis_mem_growth_bytes_per_1k_jobs: float | None = None
    # The raw driver at the same point and strategy (no Locust), the harness's calibration.
    raw_jobs_per_s: float | None = None
    raw_cpu_us_per_job: float | None = None
    raw_round_trips_per_job: float | None = None
    raw_commands_per_job: float | None = None
    locust_raw_jobs_ratio: float | None = None
    # The reference at the same point and strategy (reference.py: one process in lockstep, the
    # least client work the builders allow), and the raw driver's client CPU a job over its.
    reference_jobs_per_s: float | None = None
    reference_cpu_us_per_job: float | None = None
    reference_round_trips_per_job: float | None = None
    raw_reference_cpu_ratio: float | None = None
    # the mean wait a simulated round trip paid (rtt_ms nominal; a busy client wakes late)
    rtt_slept_ms: float | None = None
    # queues the producers and workers were spread over (finish_fetch_shards.csv: each master's part)
    queues: int = 1
    # The regime (design.md "Name the regime"): backlog (the wait list never ran dry: throughput),
    # steady (producers and workers at one pace), open (at target_rate: queue latency); a run from
    # before the column was steady. load: an open trial's rate over the point's backlog capacity.
    regime: str = STEADY
    load: float | None = None
    e2e_p999_us: float | None = None
    # the wait list's length sampled through the window: samples, and those that found it empty
    wait_samples: int | None = None
    wait_empty_samples: int | None = None
    # windows this trial took: more than 1 when a contended or saturated one was measured again;
    # why the re-measuring stopped while the window was still so (the budget), else "no"
    tries: int = 1
    remeasure_stopped: str = field(default="", metadata={"empty_as": NOT_STOPPED})
    # Locust processes the window ran on: the profile's loadgen-processes, or one more where a
    # saturated window was measured again (every profile before the column ran on one)
    loadgen_processes: int = 1
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False

    @property
    def clean(self) -> bool:
        """The window measured the protocol: no other work shared the machine (not contended) and
        the load generator kept up (not saturated), as the glossary (docs/method.md) has it."""
        return not self.contended and not self.saturated


@dataclass(frozen=True)
class FinishFetchServerRow:
    """finish_fetch's Redis-bound point (bound-concurrency at rtt 0) on each server a profile
    names (its key servers), fused and two_call alternating over every server, a row a trial.
    Its own file, so no figure of the main grid pools rows of another server."""

    FILE: ClassVar[str] = "finish_fetch_servers.csv"
    run_id: str
    protocol: str
    profile: str
    server: str  # from the server's own INFO: "valkey 8.0.1"
    strategy: str
    rep: int
    workers: int
    concurrency: int
    rtt_ms: float
    regime: str
    jobs: int
    jobs_per_s: float | None
    round_trips_per_job: float | None
    server_us_per_job: float | None
    redis_cpu_pct: float | None  # of one core, over the window: near 100 where Redis set the pace
    limit: str  # which side set the pace (client, network, job time, redis)
    loadgen_processes: int
    rtt_slept_ms: float | None
    saturated: bool
    audit_ok: bool
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class FinishFetchPart:
    """The columns a part of a finish_fetch run starts with: which run, and its point."""

    run_id: str
    protocol: str
    profile: str
    strategy: str
    workers: int
    concurrency: int
    job_ms: float
    rtt_ms: float
    queues: int  # the run's queues, on every master
    rep: int


@dataclass(frozen=True)
class FinishFetchShardRow(FinishFetchPart):
    """One master's part of a finish_fetch run (each cluster master; one server: its one row).
    Over a run's rows, jobs and server_usec add up to its finish_fetch.csv row's."""

    FILE: ClassVar[str] = "finish_fetch_shards.csv"
    master: str  # host:port
    master_queues: int  # the run's queues on this master
    jobs: int  # finished in the window on this master's queues
    jobs_per_s: float | None
    server_calls: float | None  # client-sent commands this master ran in the window (commandstats)
    server_usec: float | None
    server_us_per_job: float | None
    foreign_cpu_pct: float | None = None  # the run's window, as its finish_fetch.csv row
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class FinishFetchQueueRow(FinishFetchPart):
    """One queue's part of a finish_fetch run, and the master that holds it."""

    FILE: ClassVar[str] = "finish_fetch_queues.csv"
    queue: str
    slot: int
    master: str
    jobs: int
    jobs_per_s: float | None
    foreign_cpu_pct: float | None = None  # the run's window, as its finish_fetch.csv row
    steal_pct: float | None = None
    contended: bool = False


# A measured point's ``skipped`` cell: never empty, so the column is text in pandas
# whether or not any point of the run was skipped.
NOT_SKIPPED = "no"


@dataclass(frozen=True)
class SweepCostRow:
    FILE: ClassVar[str] = "sweep_cost.csv"

    run_id: str
    protocol: str
    profile: str
    variant: str
    scenario: str
    active_size: int
    slice_size: int  # ids a sliced sweep visits a call (the other variants ignore it)
    probe_rate_hz: float
    reps: int = 0  # sweeps measured (0: none)
    sweep_ms_median: float | None = None
    sweep_ms_stdev: float | None = None
    us_per_active_job: float | None = None
    round_trips: float | None = None  # medians over the sweeps
    server_us: float | None = None
    hold_ms_max: float | None = None  # the longest call at the client (round trip included)
    # ... inside Redis (SLOWLOG), or the slowlog threshold when no call was slower
    redis_hold_ms_max: float | None = None
    # µs after which a sliced call takes no further chunk of ids (the other variants ignore it)
    slice_budget_us: int | None = None
    # the most calls of one timed sweep over the server's slowlog threshold (SLOWLOG)
    redis_slow_calls_max: int | None = None
    probe_p99_us: float | None = None
    probe_max_us: float | None = None
    probe_busy: float | None = None
    # "" in memory when measured (written as NOT_SKIPPED), else why not
    skipped: str = field(default="", metadata={"empty_as": NOT_SKIPPED})
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class SweepControlRow:
    """The sweep stage's control: calls of a Lua loop of plain arithmetic, each timed inside Redis."""

    FILE: ClassVar[str] = "sweep_control.csv"

    run_id: str
    protocol: str  # "none": the loop belongs to no queue protocol
    profile: str
    calls: int
    iterations: int  # additions a call
    redis_us_median: int | None = None
    redis_us_p999: int | None = None
    redis_us_max: int | None = None
    calls_over_1ms: int | None = None
    # calls another client's script call overlapped, so their µs could not be told apart (left out)
    calls_mixed: int = 0
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class RaceRow:
    FILE: ClassVar[str] = "race.csv"

    run_id: str
    protocol: str
    profile: str
    variant: str
    sweepers: int
    stalled_jobs: int
    delay_ms: float
    workers: int  # worker threads finishing jobs during the sweeps
    slice_size: int  # ids a sliced sweep visits a call
    max_stalled: int
    reps: int
    double_recoveries: int
    lost_attempt_updates: int
    requeued_after_finish: int
    audit_violations: int
    foreign_cpu_pct: float | None = None  # the worst of the setting's repetitions
    steal_pct: float | None = None
    contended: bool = False  # any repetition


@dataclass(frozen=True)
class SweepHazardRow:
    """One all-stalled sweep sent once by a client, with that client's retry settings."""

    FILE: ClassVar[str] = "sweep_hazard.csv"
    protocol: str
    client: str  # "bullmq" (BullMQ's own connection settings) or "suite" (no re-sends)
    stalled_jobs: int
    socket_timeout_s: float
    elapsed_s: float  # from the call to its return or its error
    server_executions: int  # the sweep script's executions on the server (commandstats calls)
    server_rejected: int  # its sends the server refused (commandstats rejected_calls: BUSY)
    probe_busy: int  # BUSY replies another client got meanwhile
    probe_max_us: int | None
    reply_ids: int | None  # ids the call returned (None: it raised)
    moved_ids: int  # stalled jobs found out of active and in wait afterwards
    reply_matches: bool  # the reply named exactly the jobs that moved
    error: str  # what the call raised, or ""


@dataclass(frozen=True)
class BullmqWorkerRow:
    """One run of a worker driver over a pre-filled queue, timed from its 1,000th completion."""

    FILE: ClassVar[str] = "bullmq_worker.csv"
    protocol: str
    # "node_worker", "node_manual_fused", "node_manual_two_call" (BullMQ's Node package),
    # "bullmq_worker" (its Python port's asyncio Worker), or the suite's "fused" / "two_call" loop
    driver: str
    concurrency: int
    job_ms: float
    rep: int
    jobs: int  # completions in the window
    duration_s: float  # the window: from the 1,000th completion to the last
    jobs_per_s: float
    client_cpu_us_per_job: float
    redis_calls_per_job: float  # client-sent commands (EVALSHA, BZPOPMIN...) a job
    redis_us_per_job: float
    audit_ok: bool  # every pre-filled job completed exactly once
    foreign_cpu_pct: float | None = None  # over the driver's whole run (its warm-up included)
    steal_pct: float | None = None
    contended: bool = False
    prefilled_jobs: int | None = None  # in the queue at the start, sized for the window


@dataclass(frozen=True)
class ScriptCostRow:
    """One worker step of one protocol with its scripts alone on a small queue: the hot
    path's script cost, each protocol's against the others' in the same run."""

    FILE: ClassVar[str] = "script_cost.csv"
    run_id: str
    protocol: str
    profile: str
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


@dataclass(frozen=True)
class InstructionsRow:
    """The instructions Redis executed for one step, counted under valgrind's callgrind: a count,
    not a time, so steal cannot move it. Inside command execution (Redis's call(): the step's
    scripts and the commands they run) and for the whole request (read, parse, run, reply);
    the client, the network and the kernel are outside both."""

    FILE: ClassVar[str] = "instructions.csv"
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
    # the server counted, from its INFO ("valkey 8.0.1"), where the profile names several
    # (servers); empty: the one the run would start, named in meta.json
    server: str = ""
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None
    contended: bool = False


@dataclass(frozen=True)
class InstructionsPartRow:
    """Where a step's instructions went: the whole server's count (as instructions.csv's
    server_instructions_per_call) split by part of Redis, each function callgrind counted put in
    one part by bench/stages/instructions/parts.py's rules. A step's parts add up to its count."""

    FILE: ClassVar[str] = "instructions_parts.csv"
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


Row = (
    FinishFetchRow | FinishFetchShardRow | FinishFetchQueueRow | SweepCostRow | RaceRow | SweepHazardRow
    | BullmqWorkerRow | ScriptCostRow | SweepControlRow | InstructionsRow | InstructionsPartRow
    | FinishFetchServerRow
)  # fmt: skip

# Columns a run from before them implies a value for: it ran one job in flight a
# worker, held for no time. A reader fills them in instead of calling them absent.
# What a finish_fetch.csv from before a column implies: its closed loop was steady, one window a
# trial on one load process; an empty load is no open point's (0).
FINISH_FETCH_IMPLIED: dict[str, object] = {
    "concurrency": 1, "job_ms": 0.0, "queues": 1, "regime": STEADY, "tries": 1, "load": 0.0,
    "loadgen_processes": 1,
}  # fmt: skip
# An instructions.csv from before the seed was pinned counted on a random one.
INSTRUCTIONS_IMPLIED: dict[str, object] = {"seed_pinned": False}


def columns_of(row_type: type[Row]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(row_type))


FINISH_FETCH_COLUMNS = columns_of(FinishFetchRow)
FINISH_FETCH_SHARD_COLUMNS = columns_of(FinishFetchShardRow)
FINISH_FETCH_QUEUE_COLUMNS = columns_of(FinishFetchQueueRow)
SWEEP_COST_COLUMNS = columns_of(SweepCostRow)
RACE_COLUMNS = columns_of(RaceRow)
SWEEP_HAZARD_COLUMNS = columns_of(SweepHazardRow)
SWEEP_CONTROL_COLUMNS = columns_of(SweepControlRow)
BULLMQ_WORKER_COLUMNS = columns_of(BullmqWorkerRow)
SCRIPT_COST_COLUMNS = columns_of(ScriptCostRow)
INSTRUCTIONS_COLUMNS = columns_of(InstructionsRow)
INSTRUCTIONS_PART_COLUMNS = columns_of(InstructionsPartRow)
FINISH_FETCH_SERVER_COLUMNS = columns_of(FinishFetchServerRow)


_FLOAT_COLUMNS: dict[type, frozenset[str]] = {}


def _float_columns(row_type: type[Row]) -> frozenset[str]:
    """The fields declared float (alone or with None): written as floats, 3 as 3.0."""
    if row_type in _FLOAT_COLUMNS:
        return _FLOAT_COLUMNS[row_type]
    names = set()
    for name, hint in get_type_hints(row_type).items():
        kinds = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
        if float in kinds:
            names.add(name)
    _FLOAT_COLUMNS[row_type] = frozenset(names)
    return _FLOAT_COLUMNS[row_type]


def row_dict(row: Row) -> dict[str, Any]:
    """A row as the CSV writer takes it: None (not measured) becomes an empty cell, an int in a
    float column a float, a mapping a JSON object, and an empty text cell its stated stand-in
    (``empty_as``)."""
    floats = _float_columns(type(row))
    out: dict[str, Any] = {}
    for f in fields(row):
        value = getattr(row, f.name)
        if value is None:
            value = ""
        elif f.name in floats and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif isinstance(value, dict):  # a structured cell: JSON, read back with json.loads
            value = json.dumps(value, sort_keys=True)
        elif value == "" and "empty_as" in f.metadata:
            value = f.metadata["empty_as"]
        out[f.name] = value
    return out
