"""What made a run, as meta.json records it: code, server, client libraries, machine."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

from redis.utils import HIREDIS_AVAILABLE

from bench import invocation
from bench.harness.calibration import Calibration
from bench.harness.headroom import MemoryNeed
from bench.harness.machine import MachineCheck
from bench.harness.profile import Profile, resolved
from bench.harness.server import ServerInfo
from bench.harness.system import system_view
from bench.harness.watch_scope import WatchScope
from bench.paths import REPO
from bench.protocol.base import protocol_named
from bench.results.files import write_meta
from bench.results.meta import RunMeta
from bench.results.rows import JsonObject


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def installed_packages() -> dict[str, str]:
    """Every distribution installed beside the suite, name (lower case) -> version."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[str(name).lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_state() -> tuple[str | None, bool]:
    """The checkout's commit, and whether tracked files differ from it."""
    return _git("rev-parse", "HEAD") or None, bool(_git("status", "--porcelain", "--untracked-files=no"))


def protocol_record(names: Sequence[str]) -> dict[str, Any]:
    """Per protocol: where its scripts come from (its package's version, None for lua/), and
    each step's file and SHA1 (the name Redis runs it under: the SHA1 of its source)."""
    record: dict[str, Any] = {}
    for name in names:
        protocol = protocol_named(name)
        files = protocol.script_files()
        record[name] = {
            "version": protocol.version(),
            "script_files": dict(files),
            "script_shas": {
                step: hashlib.sha1(source.encode()).hexdigest()
                for step, source in protocol.script_sources().items()
            },
        }
    return record


class CodeRecord(TypedDict):
    """meta.json's word on the code (RunMeta's fields of that name)."""

    git_sha: str | None
    git_dirty: bool


class MachineRecord(TypedDict):
    """meta.json's word on the machine and the Python that ran (RunMeta's fields of that name)."""

    python: str
    cpu_model: str
    cores: int | None
    platform: str
    system: JsonObject


def code_record() -> CodeRecord:
    """meta.json's word on the code: the commit, and whether tracked files differ from it."""
    sha, dirty = git_state()
    return CodeRecord(git_sha=sha, git_dirty=dirty)


def machine_record() -> MachineRecord:
    """meta.json's word on the machine and the Python that ran: the same for a run, an experiment
    and a direct Locust run."""
    return MachineRecord(
        python=platform.python_version(),
        cpu_model=cpu_model(),
        cores=os.cpu_count(),
        platform=platform.platform(),
        system=dict(system_view()),
    )


def write_provenance(
    run_dir: Path,
    profile: Profile,
    server: ServerInfo,
    script_shas: dict[str, str],
    scope: WatchScope,
    machine: MachineCheck,
    calibration: Calibration,
    need: MemoryNeed | None,
) -> None:
    """A run's head in its meta.json: the command, the code, the server, the client, the machine,
    and the checks before it (the machine's, the calibration, the memory need)."""
    unchecked = "not checked: " + ("a cluster" if server.is_cluster else "--skip-memory-check")
    write_meta(
        run_dir,
        RunMeta,
        command=invocation.command(),  # as typed; a published run says how to make it again
        protocols=protocol_record(profile.protocols),
        bullmq=_version("bullmq"),
        profile=profile.name,
        profile_resolved=resolved(profile),  # every key's value as the run used it
        **code_record(),
        server_name=server.name,  # redis or valkey, as the server says
        server_version=server.release,  # its own version (Valkey's own, not its Redis-compatible one)
        redis_version=server.version,
        redis_source=server.source,
        redis_binary=server.binary,
        redis_url=server.url,
        # A cluster's masters: address, slot ranges, version (empty for a single server).
        redis_cluster=[m.as_meta() for m in server.masters],
        **machine_record(),
        redis_py=_version("redis"),
        hiredis=HIREDIS_AVAILABLE,
        hiredis_version=_version("hiredis"),
        locust=_version("locust"),
        pyperf=_version("pyperf"),
        script_shas=script_shas,
        packages=installed_packages(),
        machine_watch=scope.note,  # what the contention guard can see
        machine_before=machine.as_meta(),
        calibration=calibration.as_meta(),
        memory_need=need.as_meta() if need is not None else unchecked,
    )
