"""The race audit section: audit violations, anomalies per stalled job, every setting."""

from __future__ import annotations

from bench.report.load import RunData
from bench.report.markdown import bullmq_note, figure, flag_rows, markdown_table, present
from bench.report.plots.race import race_anomalies
from bench.report.plots.style import protocol_labelled
from bench.report.sections.head import section_head


def race_section(data: RunData) -> list[str]:
    lines, frame = section_head(data, "race", "Race audit", "setting(s)")
    if frame is None:
        return lines
    lines += bullmq_note(frame)
    violations = frame[frame["audit_violations"].fillna(0) > 0]
    if not violations.empty:
        variants = ", ".join(sorted(set(protocol_labelled(violations)["variant"])))
        lines += [f"> **Audit violations** (a job lost or in two places) in {len(violations)} setting(s): "
                  f"{variants}.", ""]  # fmt: skip
    lines += figure(race_anomalies(protocol_labelled(frame), data.path), "no anomaly columns")
    lines += ["All settings:", "", markdown_table(flag_rows(present(data, "race", frame))), ""]
    return lines
