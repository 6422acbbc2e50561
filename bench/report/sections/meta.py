"""The report's first section: the run (status, versions, machine, protocols) and what it lacks."""

from __future__ import annotations

import pandas as pd

from bench.report.load import RunData
from bench.report.markdown import markdown_table
from bench.results.meta import RunMeta


def protocols_text(meta: RunMeta) -> str:
    """The run's protocols and where their scripts came from."""
    if not (record := meta.protocols):
        return "echomq (lua/)"
    parts = []
    for name, about in sorted(record.items(), key=lambda item: item[0] != "echomq"):  # the suite's first
        version = about.get("version") if isinstance(about, dict) else None
        parts.append(f"{name} {version} (its package's Lua)" if version else f"{name} (lua/)")
    return ", ".join(parts)


def meta_section(data: RunData) -> list[str]:
    meta = data.meta
    lines = [f"# echomq-bench run {data.run_id}", ""]
    if not data.complete:
        reason = meta.reason or "no reason recorded (the run may have been killed)"
        done = ", ".join(meta.stages_done) or "none"
        lines += [
            f"> **Incomplete run**: {reason}. Stages done: {done}. "
            "The numbers below cover only what was finished.",
            "",
        ]
    sha = str(meta.git_sha or "unknown")[:12]
    server = f"{meta.server_release or 'unknown'} ({meta.redis_source or 'source unknown'})"
    rows = [
        ("status", "complete" if data.complete else "**INCOMPLETE**"),
        ("profile", meta.profile),
        ("started / finished", f"{meta.started or '?'} / {meta.finished or '?'}"),
        ("git", f"{sha}{' (dirty: uncommitted changes)' if meta.git_dirty else ''}"),
        (meta.server, server),
        ("machine", f"{meta.cpu_model or '?'}, {meta.cores or '?'} cores"),
        ("Python / redis-py / hiredis", f"{meta.python} / {meta.redis_py} / {meta.hiredis}"),
        ("Locust / pyperf", f"{meta.locust} / {meta.pyperf}"),
        ("protocols", protocols_text(meta)),
    ]
    lines += ["## Run", "", markdown_table(pd.DataFrame(rows, columns=["", "value"])), ""]
    if data.absent:
        lines += ["## Absent from this run", "", *(f"- {line}" for line in data.absent), ""]
    return lines
