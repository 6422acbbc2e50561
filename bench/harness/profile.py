"""Named load profiles: profiles/<name>.conf, in Locust's ``key = value`` config format, one file
for every stage's settings (lists comma-separated), checked whole before a run starts: a bad key
or value is a one-line error naming the key and what to do."""

from __future__ import annotations

import dataclasses
import difflib
import types
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from bench.errors import BenchError
from bench.paths import PROFILES_DIR
from bench.results.finish_fetch import Regime
from bench.results.stages import RUN_ORDER


def _min(value: float) -> dict[str, float]:
    return {"min": value}


GRID_REGIMES = tuple(Regime)
STAGES = (*RUN_ORDER, "report")  # the report last, after what it reports


def parse_point(text: str) -> tuple[str, int, float] | None:
    """A grid point as steady-at and open-at name it, "[protocol.]c8-rtt1": (the protocol, "" for
    every one, concurrency, rtt ms); None when it is not one."""
    protocol, _, point = text.strip().rpartition(".")
    if "." in point or (protocol and "-rtt" in protocol):  # "c8-rtt0.5": the dot is the rtt's
        protocol, point = "", text.strip()
    head, _, tail = point.partition("-rtt")
    try:
        return (protocol, int(head.removeprefix("c")), float(tail)) if head.startswith("c") else None
    except ValueError:
        return None


@dataclass(frozen=True)
class FinishFetchOptions:
    """Stage 1: Locust producers and workers, fused against two_call and two_call_pipelined."""

    strategies: tuple[str, ...] = ("fused", "two_call", "two_call_pipelined")
    repetitions: int = field(default=3, metadata=_min(1))
    workers: tuple[int, ...] = field(default=(4,), metadata=_min(1))
    # jobs in flight per worker connection, their calls auto-pipelined (a grid axis, as workers)
    concurrency: tuple[int, ...] = field(default=(1,), metadata=_min(1))
    # one point more, outside the grid: this many jobs in flight at rtt 0 and job-ms 0 with the
    # first workers count, where Redis rather than the client should set the pace (0: none)
    bound_concurrency: int = field(default=0, metadata=_min(0))
    # queues the producers and workers are spread over evenly, named to land on every cluster
    # master (bench/protocol/spread.py; a grid axis): at most producers and workers
    queues: tuple[int, ...] = field(default=(1,), metadata=_min(1))
    # how long a worker holds each job before finishing it (processing time; a grid axis)
    job_ms: tuple[float, ...] = field(default=(0.0,), metadata=_min(0))
    producers: int = field(default=1, metadata=_min(1))
    batch_size: int = field(default=50, metadata=_min(1))
    payload_bytes: int = field(default=100, metadata=_min(0))
    target_rate: float = field(default=0.0, metadata=_min(0))  # jobs/s in all; 0 = closed loop
    warmup_s: float = field(default=2.0, metadata=_min(0))
    measure_s: float = field(default=10.0, metadata=_min(0.1))
    rtt_ms: tuple[float, ...] = field(default=(0.0, 1.0), metadata=_min(0))
    # Locust processes per run (`--processes N` when above 1); one process is one core at most
    loadgen_processes: int = field(default=1, metadata=_min(1))
    # the load's Redis clients wait this long for a reply; a slower call is counted as a timeout, not re-sent
    socket_timeout_s: float = field(default=30.0, metadata=_min(0.01))
    # the raw driver: the same producers, workers and connections in plain threads, no Locust,
    # once per point and strategy, as the harness's calibration
    raw_driver: bool = True
    # trivial EVALSHA calls timed per way of the latency-fidelity check (0 leaves it out)
    fidelity_calls: int = field(default=2000, metadata=_min(0))
    # The grid's regime (design.md "Name the regime"): backlog, a wait list that never runs dry
    # (pre-filled and kept full by backlog-producers adding backlog-batch-size jobs a call), or
    # steady, producers and workers at one pace (producers, batch-size, a backlog of 10 batches).
    # target-rate above 0 makes the grid open instead, at that rate (a trial's own regime: open).
    regime: str = "backlog"
    backlog_producers: int = field(default=3, metadata=_min(1))
    backlog_batch_size: int = field(default=200, metadata=_min(1))
    # jobs the backlog producers pre-fill the wait list with, and keep it near
    backlog_jobs: int = field(default=4000, metadata=_min(1))
    # grid points also run steady, and open at each open-load (a fraction of the point's measured
    # backlog capacity, fused and two_call at one rate): "[protocol.]c<concurrency>-rtt<ms>", e.g.
    # c8-rtt1 (every protocol of the stage) or echomq.c8-rtt1 (that protocol only)
    steady_at: tuple[str, ...] = ()
    open_at: tuple[str, ...] = ()
    open_loads: tuple[float, ...] = field(default=(0.5, 0.8), metadata=_min(0.01))
    # grid points ("[protocol.]c<concurrency>-rtt<ms>", as open-at) that also run at each of
    # job-ms-extra: where a gain fades as jobs take longer, without the whole grid's cost
    job_ms_at: tuple[str, ...] = ()
    job_ms_extra: tuple[float, ...] = field(default=(), metadata=_min(0))
    # A contended window is measured again: at most this many extra windows a point, and extra
    # windows worth at most this share of the stage's planned time (0: never measured again)
    remeasure_windows: int = field(default=0, metadata=_min(0))
    remeasure_share: float = field(default=0.0, metadata=_min(0))
    # the protocols this stage runs, of the profile's (empty: every one of the profile's)
    finish_fetch_protocols: tuple[str, ...] = ()
    # the grid points ("[protocol.]c<concurrency>-rtt<ms>", as open-at) where the raw driver and the
    # reference run (empty: every grid point); the reference runs at rtt 0 whatever the point's
    raw_driver_at: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from bench.protocol.queue import STRATEGIES  # here, so loading a profile stays light until checked

        for strategy in self.strategies:
            if strategy not in STRATEGIES:
                raise BenchError(
                    f"profile key strategies: unknown strategy {strategy!r}; use {', '.join(STRATEGIES)}"
                )
        if self.regime not in GRID_REGIMES:
            raise BenchError(f"profile key regime = {self.regime!r}; use {' or '.join(GRID_REGIMES)}")
        if self.regime == "open" and self.target_rate <= 0:
            raise BenchError("profile key regime = open needs a target-rate above 0 (jobs/s in all)")
        for name in ("steady_at", "open_at", "job_ms_at", "raw_driver_at"):
            for point in getattr(self, name):
                if parse_point(point) is None:
                    raise BenchError(
                        f"profile key {option_key(name)}: {point!r} is not a grid point; write "
                        "[protocol.]c<concurrency>-rtt<ms>, e.g. c8-rtt1 or echomq.c8-rtt1"
                    )
        fewest = min(self.producers, *self.workers)
        if max(self.queues) > fewest:
            raise BenchError(
                f"profile key queues = {max(self.queues)} is more than producers {self.producers} or "
                f"workers {min(self.workers)}: a queue needs a producer and a worker; raise those or "
                "lower queues"
            )


@dataclass(frozen=True)
class SweepOptions:
    """Stage 2: sweep cost against active-list size."""

    sweep_variants: tuple[str, ...] = (
        "atomic", "atomic_linear", "atomic_sliced", "app_side", "app_side_pipelined",
    )  # fmt: skip
    sweep_scenarios: tuple[str, ...] = ("healthy", "all_stalled", "mixed")
    sweep_sizes: tuple[int, ...] = field(default=(10, 100, 1000, 10_000, 100_000), metadata=_min(1))
    sweep_reps: int = field(default=5, metadata=_min(1))
    # [protocol.]variant:scenario:max_size, "*" for any scenario; bigger points are skipped with a reason
    sweep_caps: tuple[str, ...] = (
        "atomic:all_stalled:10000",
        "atomic:mixed:30000",
        "app_side:*:10000",
    )
    sweep_slice: int = field(default=100, metadata=_min(1))
    # µs of Redis time after which a sliced call takes no further chunk of ids; 0: no budget
    sweep_slice_budget_us: int = field(default=250, metadata=_min(0))
    probe_rate_hz: float = field(default=500.0, metadata=_min(1))
    # the client-default hazard (with bullmq among the protocols): an all-stalled sweep of each
    # size, once through BullMQ's own connection settings and once through the suite's client;
    # a size that holds Redis over 5 s shows the re-send. Empty (the default): not run
    sweep_hazard_sizes: tuple[int, ...] = field(default=(), metadata=_min(1))
    # the socket timeout both clients of the hazard use; 0 = redis-py's default, as BullMQ keeps it
    sweep_hazard_timeout_s: float = field(default=0.0, metadata=_min(0))
    # the control: calls of a Lua loop of plain arithmetic, each timed inside Redis, beside which
    # the sliced sweeps' longest calls are judged (0: not run); its additions a call
    sweep_control_calls: int = field(default=2000, metadata=_min(0))
    sweep_control_iterations: int = field(default=70_000, metadata=_min(1))


@dataclass(frozen=True)
class RaceOptions:
    """Stage 3: the race audit."""

    # sweep variants by name (bench/protocol/sweep.py SWEEPERS); "all" is every registered one
    race_variants: tuple[str, ...] = ("all",)
    race_sweepers: tuple[int, ...] = field(default=(2, 8), metadata=_min(2))  # 2..16 at once
    race_jobs: int = field(default=500, metadata=_min(1))
    race_delay_ms: tuple[float, ...] = field(default=(0.0, 2.0), metadata=_min(0))
    race_reps: int = field(default=3, metadata=_min(1))
    race_workers: int = field(default=2, metadata=_min(0))
    # per run: past it the run stops and counts an error instead of hanging
    race_deadline_s: float = field(default=60.0, metadata=_min(1))
    # ids a sliced sweep visits a call in the race: below race-jobs, so a pass spans calls
    race_slice: int = field(default=50, metadata=_min(1))
    # reclaims of a job before it goes to failed: high, so every reclaim goes to wait; low tests failed
    race_max_stalled: int = field(default=1000, metadata=_min(0))


@dataclass(frozen=True)
class BullmqWorkerOptions:
    """BullMQ's own workers (its Node package's, when node can run it, and its Python port's) on a
    pre-filled queue, beside the suite's loops (runs when bullmq is one of the profile's protocols)."""

    bullmq_worker_concurrency: tuple[int, ...] = field(default=(1, 8, 50), metadata=_min(1))
    # BullMQ's drivers run at each concurrency: its Node Worker, its Node manual processing fused
    # and two-call, its Python port's Worker (bench/stages/bullmq_worker/plan.py BULLMQ_DRIVERS)
    bullmq_worker_drivers: tuple[str, ...] = (
        "node_worker", "node_manual_fused", "node_manual_two_call", "bullmq_worker",
    )  # fmt: skip
    # jobs a run at least; the first 1,000 are its warm-up, the window runs from the 1,000th to the last
    bullmq_worker_jobs: int = field(default=6000, metadata=_min(1001))
    bullmq_worker_reps: int = field(default=3, metadata=_min(1))
    # the processor sleeps this long a job (asyncio.sleep; 0 = a no-op processor)
    bullmq_worker_job_ms: float = field(default=0.0, metadata=_min(0))
    # the shortest window a run should have: a run whose window was shorter runs again with its
    # jobs sized from its rate, and the next repetition starts from that size (0: no sizing)
    bullmq_worker_window_s: float = field(default=1.0, metadata=_min(0))


@dataclass(frozen=True)
class InstructionsOptions:
    """The instructions Redis executes a call and a job, counted under valgrind's callgrind."""

    # calls a step's batch; 2N more check the count is a cost per call. A multiple of 50: Redis steps
    # Lua's garbage collector every 50 script calls, so each batch holds whole steps of it
    instructions_calls: int = field(default=200, metadata=_min(50))
    # the sweep variants counted, each over an active list of every size whose locks all lapsed
    instructions_sweep_variants: tuple[str, ...] = (
        "atomic", "atomic_linear", "atomic_sliced", "app_side", "app_side_pipelined",
    )  # fmt: skip
    instructions_sweep_sizes: tuple[int, ...] = field(default=(100, 1000), metadata=_min(1))
    # the completed set's sizes a fused and a two-call job are counted at, beside the stated state's
    # (bench/protocol/counted.py COMPLETED, from its own count): instructions_completed.csv
    instructions_completed_sizes: tuple[int, ...] = field(default=(0, 1000, 10_000), metadata=_min(0))

    def __post_init__(self) -> None:
        if self.instructions_calls % 50:
            raise BenchError(
                f"profile key instructions-calls = {self.instructions_calls} is not a multiple of 50; "
                "Redis steps Lua's garbage collector every 50 script calls: use 50, 100, 200..."
            )


SECTIONS = (FinishFetchOptions, SweepOptions, RaceOptions, BullmqWorkerOptions, InstructionsOptions)


@dataclass(frozen=True)
class Profile:
    name: str
    stages: tuple[str, ...] = STAGES
    # the queue protocols every stage measures, side by side (bench/protocol/base.py PROTOCOLS)
    protocols: tuple[str, ...] = ("echomq",)
    # With no REDIS_URL: start an embedded 3-master Redis Cluster instead of one server.
    cluster: bool = False
    # server binaries compared side by side (docs/servers.md): the instructions stage counts every
    # step on each, and finish_fetch runs its Redis-bound point on each; none: the run's own server
    servers: tuple[str, ...] = ()
    finish_fetch: FinishFetchOptions = FinishFetchOptions()
    sweep: SweepOptions = SweepOptions()
    race: RaceOptions = RaceOptions()
    bullmq_worker: BullmqWorkerOptions = BullmqWorkerOptions()
    instructions: InstructionsOptions = InstructionsOptions()


def finish_fetch_protocols(profile: Profile) -> tuple[str, ...]:
    """The protocols the finish_fetch stage runs: its key's (in the profile's order), else the profile's."""
    chosen = profile.finish_fetch.finish_fetch_protocols
    return tuple(p for p in profile.protocols if p in chosen) if chosen else profile.protocols


def parse_protocols(raw: str, *, flag: str | None = None) -> tuple[str, ...]:
    """The ``protocols`` key: registered protocol names, each once."""
    from bench.protocol.base import check_protocol_names  # here: loading a profile stays light

    names = tuple(parse_value("protocols", tuple[str, ...], raw, flag=flag))
    if len(set(names)) != len(names):
        raise BenchError(
            f"{flag or 'profile key protocols'} names one twice ({', '.join(names)}); list each once"
        )
    check_protocol_names(names)
    return names


def check_servers(profile: Profile) -> None:
    """Every binary of the ``servers`` key is an executable file (one line when one is not); the
    stages that start them check it before a run starts, so a profile still loads to be read."""
    from bench.harness.server import check_binary  # here: loading a profile stays light

    for path in profile.servers:
        check_binary(path, "profile key servers:")


def resolved(profile: Profile) -> dict[str, Any]:
    """The profile as the run used it, every key with its value, defaults included (meta.json)."""
    record: dict[str, Any] = {
        "name": profile.name,
        "stages": list(profile.stages),
        "cluster": profile.cluster,
        "servers": list(profile.servers),
    }
    for section in SECTIONS:
        name = section_field(section)
        values = dataclasses.asdict(getattr(profile, name))
        record[name] = {option_key(k): list(v) if isinstance(v, tuple) else v for k, v in values.items()}
    return record


def section_field(section: type) -> str:
    hints = get_type_hints(Profile)
    return next(f.name for f in fields(Profile) if hints[f.name] is section)


def option_key(field_name: str) -> str:
    return field_name.replace("_", "-")


def known_keys() -> dict[str, tuple[type, dataclasses.Field[Any]]]:
    """Every key a profile may hold, with the section it belongs to."""
    return {option_key(f.name): (section, f) for section in SECTIONS for f in fields(section)}


Where = tuple[str, str, str]  # how an error names a value: its name, the joiner before it, the fix


def _scalar(kind: Any, raw: str, where: Where, minimum: float | None) -> Any:
    name, joiner, fix = where
    text = raw.strip()
    if kind is str:
        if not text:
            raise BenchError(f"{name} is empty; give it a value")
        return text
    if kind is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise BenchError(f"{name}{joiner}{text!r} is not true or false")
    try:
        value = int(text) if kind is int else float(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise BenchError(f"{name}{joiner}{text!r} is not {what}; {fix}") from None
    if minimum is not None and value < minimum:
        raise BenchError(f"{name}{joiner}{text} is below its minimum {minimum:g}; use {minimum:g} or more")
    return value


def parse_value(
    key: str, kind: Any, raw: str, minimum: float | None = None, *, flag: str | None = None
) -> Any:
    """``raw`` as profile key ``key`` of type ``kind`` holds it; errors name ``flag`` when given."""
    where = (
        (flag, " ", "fix it on the command line")
        if flag
        else (f"profile key {key}", " = ", "fix it in the profile")
    )
    if get_origin(kind) is tuple:
        item = get_args(kind)[0]
        if not (items := [p for p in raw.strip().strip("[]").split(",") if p.strip()]):
            raise BenchError(f"{where[0]} is empty; give at least one value")
        return tuple(_scalar(item, p, where, minimum) for p in items)
    if get_origin(kind) in (Union, types.UnionType):
        kind = next(a for a in get_args(kind) if a is not type(None))
    return _scalar(kind, raw, where, minimum)


def read_conf(path: Path) -> dict[str, str]:
    """Locust's config format: ``key = value`` lines, # comments, [sections] ignored."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", ";", "[")):
            continue
        sep = "=" if "=" in text else ":" if ":" in text else None
        if sep is None:
            raise BenchError(f"{path}:{number}: expected 'key = value', got {text!r}")
        key, value = (part.strip() for part in text.split(sep, 1))
        pairs[key] = value
    return pairs


# Locust's own options that may stand in a profile beside ours, for a direct
# `locust --config` run, and that change only how Locust shows or logs a run:
# `bench run` passes over them.
LOCUST_KEYS = frozenset(
    {
        "locustfile", "loglevel", "logfile", "csv", "csv-full-history", "html", "only-summary",
        "headless", "autostart", "autoquit", "web-host", "web-port", "print-stats",
    }
)  # fmt: skip

# Locust's options that set what a run does: `bench run` sets them itself from
# our keys, so one in a profile would be ignored. Each is refused, naming the
# key that does it (a typo of ours, such as `worker` for `workers`, lands here too).
LOCUST_SET_BY_US = {
    "worker": "did you mean 'workers'? (Locust's --worker makes a process a load worker)",
    "users": "bench run starts producers + workers users; set 'workers' and 'producers'",
    "spawn-rate": "bench run starts every user within the warm-up; set 'warmup-s'",
    "run-time": "bench run measures for warmup-s + measure-s; set 'measure-s' (and 'warmup-s')",
    "processes": "did you mean 'loadgen-processes'?",
    **dict.fromkeys(
        ("master", "master-host", "master-port", "expect-workers"),
        "bench run starts its own Locust processes; set 'loadgen-processes'",
    ),
    "host": "bench run loads the Redis in REDIS_URL (the environment), or its own",
    "redis-url": "bench run loads the Redis in REDIS_URL (the environment), or its own",
    "reset-stats": "bench run resets the statistics after warm-up itself; set 'warmup-s'",
    "stop-timeout": "bench run stops its users itself at the end of the window",
    "strategy": "did you mean 'strategies'?",
    "queue": "bench run uses a fresh queue for every run",
    "tags": "the locustfile has no tags; pick strategies with 'strategies'",
    "exclude-tags": "the locustfile has no tags; pick strategies with 'strategies'",
}


def _unknown_key(path: Path, key: str, known: Iterable[str]) -> BenchError:
    """One line for a key no stage reads: the Locust option it is, or the key it is nearest."""
    if key in LOCUST_SET_BY_US:
        return BenchError(
            f"{path.name}: {key!r} is a Locust option that `bench run` sets itself, so it would be "
            f"ignored; {LOCUST_SET_BY_US[key]}"
        )
    names = sorted({*known, "stages", "servers"})
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    guess = f"did you mean {near[0]!r}? " if near else ""
    return BenchError(f"{path.name}: unknown key {key!r}; {guess}known keys: {', '.join(names)}")


def load_profile(name_or_path: str) -> Profile:
    """Load and check profiles/<name>.conf (or a path to a .conf file)."""
    path = Path(name_or_path)
    if path.suffix != ".conf" and path.parent == Path("."):
        path = PROFILES_DIR / f"{name_or_path}.conf"
    if not path.is_file():
        available = ", ".join(sorted(p.stem for p in PROFILES_DIR.glob("*.conf")))
        raise BenchError(f"profile {name_or_path!r} not found ({path}); available: {available}")
    known = known_keys()
    values: dict[type, dict[str, Any]] = {section: {} for section in SECTIONS}
    top: dict[str, Any] = {}  # the profile's own keys, beside the sections'
    for key, text in read_conf(path).items():
        if key == "protocols":
            top[key] = parse_protocols(text)
        elif key == "stages":
            top[key] = parse_value(key, tuple[str, ...], text)
            if strange := [stage for stage in top[key] if stage not in STAGES]:
                raise BenchError(f"profile stage {strange[0]!r} is unknown; use some of {', '.join(STAGES)}")
        elif key in ("cluster", "servers"):
            top[key] = parse_value(key, get_type_hints(Profile)[key], text)
        elif key in known:
            section, f = known[key]
            values[section][f.name] = parse_value(
                key, get_type_hints(section)[f.name], text, f.metadata.get("min")
            )
        elif key not in LOCUST_KEYS:
            raise _unknown_key(path, key, known)
    protocols = top.get("protocols", Profile.protocols)
    unknown = set(values[FinishFetchOptions].get("finish_fetch_protocols", ())) - set(protocols)
    if unknown:
        raise BenchError(
            f"profile key finish-fetch-protocols names {', '.join(sorted(unknown))}, not in protocols "
            f"({', '.join(protocols)}); list only the profile's protocols"
        )
    sections: dict[str, Any] = {section_field(section): section(**values[section]) for section in SECTIONS}
    return Profile(name=path.stem, **top, **sections)
