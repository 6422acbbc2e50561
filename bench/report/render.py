"""A run's report.md, section by section (sections/), with its plots (plots/) beside it in the
run folder; every table and figure tells the protocols apart."""

from __future__ import annotations

from pathlib import Path

from bench.report.load import RunData, load_run
from bench.report.quiet import machine_section
from bench.report.sections.bullmq_worker import bullmq_worker_section
from bench.report.sections.findings import findings_section
from bench.report.sections.finish_fetch import finish_fetch_section
from bench.report.sections.instructions import instructions_section
from bench.report.sections.meta import meta_section
from bench.report.sections.race import race_section
from bench.report.sections.servers import servers_section
from bench.report.sections.sweep import sweep_section
from bench.results.files import write_atomic


def render(data: RunData) -> str:
    lines = meta_section(data)
    lines[2:2] = findings_section(data)  # after the title: the answer first
    lines += machine_section(data)
    lines += finish_fetch_section(data)
    lines += bullmq_worker_section(data)
    lines += sweep_section(data)
    lines += race_section(data)
    lines += instructions_section(data)
    lines += servers_section(data)
    return "\n".join(lines).rstrip() + "\n"


def write_report(path: Path) -> Path:
    """Write report.md and the plots into the run folder; returns report.md's path."""
    report = path / "report.md"
    write_atomic(report, render(load_run(path)))
    return report
