"""The system settings that change timings, as `pyperf system show` sees them, read without root.

Read straight from /sys and /proc (pyperf's own reader is internal and wants
to tune as well as show). Each entry is a short text, or None where the
machine does not have it (a VM often exposes no cpufreq at all).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

CPU = Path("/sys/devices/system/cpu")
ASLR = {"0": "off (0)", "1": "partial (1)", "2": "full (2)"}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_list(cpus: Iterable[int]) -> str:
    """0,1,2,5 -> "0-2,5" (the kernel's own notation)."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)


def _per_cpu(name: str, root: Path) -> str | None:
    """One cpufreq setting over all CPUs: "performance", or "0: powersave, 1: performance"."""
    values: dict[str, list[int]] = {}
    for folder in sorted(root.glob("cpu[0-9]*")):
        value = _read(folder / "cpufreq" / name)
        if value is not None:
            values.setdefault(value, []).append(int(folder.name[3:]))
    if not values:
        return None
    if len(values) == 1:
        return next(iter(values))
    return ", ".join(f"{cpu_list(cpus)}: {value}" for value, cpus in values.items())


def _turbo(root: Path) -> str | None:
    no_turbo = _read(root / "intel_pstate" / "no_turbo")
    if no_turbo is not None:
        return "off" if no_turbo == "1" else "on"
    boost = _read(root / "cpufreq" / "boost")
    if boost is not None:
        return "on" if boost == "1" else "off"
    return None


def _kernel_option(cmdline: str | None, name: str) -> str | None:
    for word in (cmdline or "").split():
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    return None


def system_view(root: Path = CPU, proc: Path = Path("/proc")) -> dict[str, str | None]:
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
