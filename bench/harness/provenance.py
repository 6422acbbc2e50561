"""What made a run, as meta.json records it: code, server, client libraries, machine."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import subprocess
from collections.abc import Iterable, Sequence
from email.message import Message
from email.parser import Parser
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
from bench.harness.watch_scope import WatchScope
from bench.paths import REPO
from bench.protocol.base import protocol_named
from bench.protocol.bullmq_package import installed_version
from bench.results.files import write_meta
from bench.results.meta import RunMeta
from bench.results.rows import JsonObject


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _headers(dist: metadata.Distribution) -> Message:
    """The headers of a distribution's metadata (what ``dist.metadata`` parses, read the same way),
    without its long description: parsing that twice a distribution was most of a run's start."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("")
    return Parser().parsestr(text or "", headersonly=True)


def installed_packages() -> dict[str, str]:
    """Every distribution installed beside the suite, name (lower case) -> version."""
    headers = (_headers(d) for d in metadata.distributions())
    found = {str(h["Name"]).lower().replace("_", "-"): h["Version"] for h in headers if h["Name"]}
    return dict(sorted(found.items()))


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def protocol_record(names: Sequence[str]) -> dict[str, Any]:
    """Per protocol: where its scripts come from (its package's version, None for lua/), and
    each step's file and SHA1 (the name Redis runs it under: the SHA1 of its source)."""
    record: dict[str, Any] = {}
    for name in names:
        protocol = protocol_named(name)
        record[name] = {
            "version": protocol.version(),
            "script_files": dict(protocol.script_files()),
            "script_shas": {
                step: hashlib.sha1(source.encode()).hexdigest()
                for step, source in protocol.script_sources().items()
            },
        }
    return record


CPU = Path("/sys/devices/system/cpu")
ASLR = {"0": "off (0)", "1": "partial (1)", "2": "full (2)"}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_list(cpus: Iterable[int]) -> str:
    """0,1,2,5 -> "0-2,5" (the kernel's own notation)."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _per_cpu(name: str, root: Path) -> str | None:
    """One cpufreq setting over all CPUs: "performance", or "0: powersave, 1: performance"."""
    values: dict[str, list[int]] = {}
    for folder in sorted(root.glob("cpu[0-9]*")):
        if (value := _read(folder / "cpufreq" / name)) is not None:
            values.setdefault(value, []).append(int(folder.name[3:]))
    if not values:
        return None
    if len(values) == 1:
        return next(iter(values))
    return ", ".join(f"{cpu_list(cpus)}: {value}" for value, cpus in values.items())


def _turbo(root: Path) -> str | None:
    if (no_turbo := _read(root / "intel_pstate" / "no_turbo")) is not None:
        return "off" if no_turbo == "1" else "on"
    if (boost := _read(root / "cpufreq" / "boost")) is not None:
        return "on" if boost == "1" else "off"
    return None


def _kernel_option(cmdline: str | None, name: str) -> str | None:
    return next((w.split("=", 1)[1] for w in (cmdline or "").split() if w.startswith(f"{name}=")), None)


def system_view(root: Path = CPU, proc: Path = Path("/proc")) -> dict[str, str | None]:
    """The system settings that change timings, as `pyperf system show` sees them, read straight
    from /sys and /proc without root (pyperf's own reader is internal, and tunes as well as shows);
    None where the machine has none (a VM often exposes no cpufreq)."""
    cmdline = _read(proc / "cmdline")
    isolated = _read(root / "isolated")
    nohz_full = _read(root / "nohz_full")
    try:
        affinity: str | None = cpu_list(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    aslr = _read(proc / "sys" / "kernel" / "randomize_va_space")
    return {
        "cpu_scaling_driver": _per_cpu("scaling_driver", root),
        "cpu_governor": _per_cpu("scaling_governor", root),
        "cpu_turbo": _turbo(root),
        "isolated_cpus": isolated or (None if isolated is None else "none"),
        "nohz_full": (nohz_full or "none") if nohz_full is not None else _kernel_option(cmdline, "nohz_full"),
        "rcu_nocbs": _kernel_option(cmdline, "rcu_nocbs"),
        "cpu_affinity": affinity,
        "aslr": ASLR.get(aslr, aslr) if aslr is not None else None,
        "perf_event_max_sample_rate": _read(proc / "sys" / "kernel" / "perf_event_max_sample_rate"),
    }


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
    return CodeRecord(
        git_sha=_git("rev-parse", "HEAD") or None,
        git_dirty=bool(_git("status", "--porcelain", "--untracked-files=no")),
    )


def machine_record() -> MachineRecord:
    """meta.json's word on the machine and the Python: the same for a run, an experiment, a Locust run."""
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
        bullmq=installed_version(),
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
        redis_py=installed_version("redis"),
        hiredis=HIREDIS_AVAILABLE,
        hiredis_version=installed_version("hiredis"),
        locust=installed_version("locust"),
        pyperf=installed_version("pyperf"),
        script_shas=script_shas,
        packages=installed_packages(),
        machine_watch=scope.note,  # what the contention guard can see
        machine_before=machine.as_meta(),
        calibration=calibration.as_meta(),
        memory_need=need.as_meta() if need is not None else unchecked,
    )
