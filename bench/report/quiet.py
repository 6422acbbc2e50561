"""How quiet the machine was, in the report: meta.json's calibration, system settings, the guard's
scope and the check before the run; and the points the CSVs mark ``contended``."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from bench.report.columns import flag
from bench.report.load import RunData
from bench.report.markdown import fmt, markdown_table
from bench.results.meta import RunMeta

CALIBRATION = {
    "python_loop_ns": "Python loop, ns an iteration (the client's CPU)",
    "ping_p50_us": "PING round trip p50 at one connection, µs",
    "evalsha_us": "Redis's own µs per EVALSHA of `return 1`",
    "took_s": "calibration took, s",
}


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def machine_section(data: RunData) -> list[str]:
    """## Machine: the guard's scope, the check before the run, the calibration, the system view."""
    meta = data.meta
    rows: list[tuple[str, str]] = []
    if meta.machine_watch:
        rows.append(("contention guard watches", meta.machine_watch))
    if before := meta.machine_before:
        foreign, steal = fmt(before.get("foreign_cpu_pct")), fmt(before.get("steal_pct"))
        seen = f"foreign CPU {foreign}% of a core, steal {steal}%"
        named = before.get("busiest")
        busiest = ", ".join(str(b) for b in named) if isinstance(named, list) else ""
        verdict = "**busy**" if before.get("contended") else "quiet"
        rows.append(("before the run (1 s)", f"{verdict}: {seen}" + (f" ({busiest})" if busiest else "")))
    rows += memory_rows(meta)
    calibration: Mapping[str, object] = meta.calibration
    rows += [(label, fmt(calibration.get(key))) for key, label in CALIBRATION.items() if key in calibration]
    counted = [
        f"{stage} {int(flag(frame, 'contended').sum())}/{len(frame)}"
        for stage, frame in data.frames.items()
        if "contended" in frame.columns and "contended" not in data.missing_columns.get(stage, [])
    ]
    if counted:
        rows.append(("rows contended (other work in their windows)", ", ".join(counted)))
    system = meta.system
    rows += [(f"system: {key}", fmt(value) if value is not None else "—") for key, value in system.items()]
    lines = ["## Machine", ""]
    if not rows:
        return [*lines, "*meta.json holds no calibration nor system view (a run made before they were "
                "recorded).*", ""]  # fmt: skip
    lines += [markdown_table(pd.DataFrame(rows, columns=["", "value"])), ""]
    if not calibration:
        lines += ["*No calibration in meta.json (a run made before it was recorded).*", ""]
    return lines


def _mb(value: object) -> str:
    return f"{float(str(value)) / 1e6:.1f} MB"


def memory_rows(meta: RunMeta) -> list[tuple[str, str]]:
    """Redis memory: the server's peak against its maxmemory, and the need estimated before the run
    (meta.json's redis_memory, sampled around each stage, and memory_need)."""
    rows: list[tuple[str, str]] = []
    need = meta.memory_need
    samples = [
        _mapping(sample).get("used_memory_peak")
        for around in meta.redis_memory.values()
        for sample in _mapping(around).values()
    ]
    if peaks := [float(str(p)) for p in samples if p is not None]:
        since = " (since the server started)" if meta.redis_source == "REDIS_URL" else ""
        maxmemory = _mapping(need).get("maxmemory_bytes")
        limit = f"of maxmemory {_mb(maxmemory)}" if maxmemory else "(no maxmemory set)"
        rows.append(("Redis memory peak (used_memory_peak)", f"{_mb(max(peaks))} {limit}{since}"))
    if isinstance(need, Mapping):
        jobs, per_job = int(str(need.get("jobs") or 0)), need.get("bytes_per_job")
        rows.append((
            "Redis memory need, estimated before the run",
            f"~{_mb(need.get('need_bytes'))}: {jobs:,} jobs x {fmt(per_job)} B per job x margin, "
            f"against {need.get('limit')}",
        ))  # fmt: skip
    elif need is not None:
        rows.append(("Redis memory need, estimated before the run", str(need)))
    return rows


def beside_saturated(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns with ``contended`` moved beside ``saturated`` (or to the front of the flags)."""
    if "contended" not in frame.columns:
        return frame
    columns = [c for c in frame.columns if c != "contended"]
    at = columns.index("saturated") + 1 if "saturated" in columns else len(columns)
    return frame[[*columns[:at], "contended", *columns[at:]]]


def contended_note(frame: pd.DataFrame, what: str) -> list[str]:
    """The callout a stage section opens with when some of its points were contended."""
    busy = frame[flag(frame, "contended")]
    if busy.empty:
        return []
    worst = busy["foreign_cpu_pct"].max() if "foreign_cpu_pct" in busy.columns else None
    steal = busy["steal_pct"].max() if "steal_pct" in busy.columns else None
    # both figures: steal (the hypervisor's) is as often the cause as other processes
    shown = [f"foreign CPU up to {fmt(worst)}% of a core"] if pd.notna(worst) else []
    shown += [f"steal up to {fmt(steal)}%"] if pd.notna(steal) else []
    most = f" ({', '.join(shown)})" if shown else ""
    return [
        f"> **{len(busy)} {what} contended**: other work used the machine during their windows{most}; "
        "their numbers are not a quiet machine's, and compare never judges them.",
        "",
    ]
