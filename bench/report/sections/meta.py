"""The report's first section: the run (status, versions, machine, protocols) and what it lacks."""

from __future__ import annotations

import pandas as pd

from bench.report.load import RunData
from bench.report.markdown import markdown_table


def protocols_text(meta: dict[str, object]) -> str:
    """The run's protocols and where their scripts came from."""
    record = meta.get("protocols")
    if not isinstance(record, dict) or not record:
        return "echomq (lua/)"
    parts = []
    for name, about in sorted(record.items(), key=lambda item: item[0] != "echomq"):  # the suite's first
        version = about.get("version") if isinstance(about, dict) else None
        parts.append(f"{name} {version} (its package's Lua)" if version else f"{name} (lua/)")
    return ", ".join(parts)


def meta_section(data: RunData) -> list[str]:
    meta = data.meta
    lines = [f"# echomq-bench run {data.run_id}", ""]
    if data.complete:
        status = "complete"
    else:
        status = "**INCOMPLETE**"
        reason = meta.get("reason") or "no reason recorded (the run may have been killed)"
        done = ", ".join(meta.get("stages_done") or []) or "none"
        lines += [
            f"> **Incomplete run**: {reason}. Stages done: {done}. "
            "The numbers below cover only what was finished.",
            "",
        ]
    finished = "?"
    sha = str(meta.get("git_sha") or "unknown")[:12]
    redis = f"{meta.get('redis_version', 'unknown')} ({meta.get('redis_source', 'source unknown')})"
    rows = [
        ("status", status),
        ("profile", meta.get("profile")),
        ("started / finished", f"{meta.get('started', '?')} / {meta.get('finished') or finished}"),
        ("git", f"{sha}{' (dirty: uncommitted changes)' if meta.get('git_dirty') else ''}"),
        ("Redis", redis),
        ("machine", f"{meta.get('cpu_model', '?')}, {meta.get('cores', '?')} cores"),
        (
            "Python / redis-py / hiredis",
            f"{meta.get('python')} / {meta.get('redis_py')} / {meta.get('hiredis')}",
        ),
        ("Locust / pyperf", f"{meta.get('locust')} / {meta.get('pyperf')}"),
        ("protocols", protocols_text(meta)),
    ]
    lines += ["## Run", "", markdown_table(pd.DataFrame(rows, columns=["", "value"])), ""]
    if data.absent:
        lines += ["## Absent from this run", "", *(f"- {line}" for line in data.absent), ""]
    return lines
