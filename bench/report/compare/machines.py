"""What the two runs of a comparison ran on, said before any verdict: their machine
calibrations side by side, a machine that was busy at the start, and every system setting and
package version that differs."""

from __future__ import annotations

import math
from collections.abc import Mapping

from bench.report.verdict import ratio
from bench.results.meta import RunMeta

CALIBRATION_DIFFERS = 0.10  # a calibration figure this far apart: the machines (or moments) differ


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _shown(value: object) -> str:
    number = _num(value)
    if number is None:
        return "—" if value is None else str(value)
    return f"{number:.3g}" if abs(number) < 100 else f"{number:,.0f}"


def calibration_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """The two runs' calibrations side by side with B/A, and a line when they differ."""
    cal_a, cal_b = _calibration(meta_a), _calibration(meta_b)
    if not cal_a and not cal_b:
        return ["calibration: absent from both runs (runs made before it was recorded)"]
    lines = ["| calibration | A | B | B/A |", "|---|---|---|---|"]
    differ = []
    for key in dict.fromkeys([*cal_a, *cal_b]):
        if key == "took_s":  # how long the calibration took: not a figure of the machine
            continue
        va, vb = _num(cal_a.get(key)), _num(cal_b.get(key))
        r = ratio(va, vb) if va is not None and vb is not None else math.nan
        lines.append(f"| {key} | {_shown(cal_a.get(key))} | {_shown(cal_b.get(key))} | {_shown(r)} |")
        if not math.isnan(r) and abs(r - 1) > CALIBRATION_DIFFERS:
            differ.append(f"{key} x{r:.2f}")
    for name, cal in (("A", cal_a), ("B", cal_b)):
        if not cal:
            lines.append(f"calibration: absent from run {name}")
    if differ:
        lines.append(
            f"the machines (or moments) differ: {', '.join(differ)}; absolute figures are not "
            "comparable, ratios within each run are"
        )
    return lines


def _calibration(meta: RunMeta) -> Mapping[str, object]:
    return meta.calibration


def _versions(meta: RunMeta) -> dict[str, str]:
    return {str(k): str(v) for k, v in meta.packages.items()}


def package_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """Every installed package whose version differs between the runs, or that only one has."""
    va, vb = _versions(meta_a), _versions(meta_b)
    if not va or not vb:
        missing = " and ".join(n for n, v in (("A", va), ("B", vb)) if not v)
        return [f"packages: not recorded in run {missing}; versions cannot be compared"]
    lines = []
    for name in sorted(va.keys() | vb.keys(), key=str.lower):
        a, b = va.get(name), vb.get(name)
        if a == b:
            continue
        if a is None:
            lines.append(f"package only in B: {name} {b}")
        elif b is None:
            lines.append(f"package only in A: {name} {a}")
        else:
            lines.append(f"package changed: {name} {a} -> {b}")
    return lines


def machine_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """What the machine looked like before each run, and the system settings that differ."""
    lines = []
    for name, meta in (("A", meta_a), ("B", meta_b)):
        before = meta.machine_before
        if before.get("contended"):
            busiest = ", ".join(str(b) for b in before.get("busiest") or []) or "other work"
            lines.append(f"run {name} started on a busy machine: {busiest}")
    sys_a, sys_b = meta_a.system, meta_b.system
    if sys_a and sys_b:
        for key in dict.fromkeys([*sys_a, *sys_b]):
            if sys_a.get(key) != sys_b.get(key):
                lines.append(f"system changed: {key}: {sys_a.get(key)} -> {sys_b.get(key)}")
    return lines


def context_lines(meta_a: RunMeta, meta_b: RunMeta) -> list[str]:
    """All compare says about the two runs' machines and software before its first verdict."""
    return [
        *calibration_lines(meta_a, meta_b),
        *machine_lines(meta_a, meta_b),
        *package_lines(meta_a, meta_b),
    ]
