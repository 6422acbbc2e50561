"""Reports from result files: `python -m bench report | compare | runs`, and the run's last stage.

Reads only what a run folder holds (meta.json, the stage CSVs, hdr/*.hdr) and
writes report.md and PNG plots beside them. A folder from an older or partial
run is reported with what it has, and the report says what is absent.
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.errors import BenchError
from bench.harness.context import RunContext
from bench.hdr import merge, read_hdr, summary
from bench.report import plots
from bench.report.compare import STAGE_KEYS, VERDICTS, Comparison, compare_runs, context_lines, samples
from bench.results import (
    FINISH_FETCH_COLUMNS,
    HDR_DIR,
    RACE_COLUMNS,
    RESULTS_DIR,
    SWEEP_COST_COLUMNS,
    write_atomic,
)
from bench.sweep_cost.summary import slopes

# stage -> (file, columns of design.md)
STAGE_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "finish_fetch": ("finish_fetch.csv", FINISH_FETCH_COLUMNS),
    "sweep": ("sweep_cost.csv", SWEEP_COST_COLUMNS),
    "race": ("race.csv", RACE_COLUMNS),
}
TEXT_COLUMNS = frozenset({"variant", "scenario", "skipped"})
BOOL_COLUMNS = frozenset({"saturated", "audit_ok", "contended"})


def parse_hdr_name(name: str) -> tuple[str, str, int, str] | None:
    """hdr/<stage>__<variant>__r<rep>__<metric>.hdr (results.hdr_name) -> its four parts."""
    parts = name.removesuffix(".hdr").split("__")
    if len(parts) != 4 or not re.fullmatch(r"r\d+", parts[2]) or not name.endswith(".hdr"):
        return None
    return parts[0], parts[1], int(parts[2][1:]), parts[3]


@dataclass
class RunData:
    """One run folder as loaded: meta, a frame per stage present, and what is absent."""

    path: Path
    meta: dict[str, Any]
    frames: dict[str, pd.DataFrame]
    missing_columns: dict[str, list[str]] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)  # one line each: what the report cannot show
    hdr_files: dict[tuple[str, str, str], list[Path]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))


def resolve_run(name: str, results: Path | None = None) -> Path:
    """A run folder given as a path or as a run id under results/."""
    path = Path(name)
    if path.is_dir():
        return path
    candidate = (results or RESULTS_DIR) / name
    if candidate.is_dir():
        return candidate
    raise BenchError(f"no run folder {name!r} (nor {candidate}); `python -m bench runs` lists the runs")


def is_run(path: Path) -> bool:
    return (path / "meta.json").is_file() or any((path / f).is_file() for f, _ in STAGE_FILES.values())


def _bool(value: object) -> object:
    text = str(value).strip().lower()
    return True if text in ("true", "1", "yes") else False if text in ("false", "0", "no") else pd.NA


def _skipped(value: object) -> str:
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()
    return "" if text.lower() in ("", "false", "0", "nan", "none") else text


def read_stage(path: Path, columns: tuple[str, ...]) -> tuple[pd.DataFrame, list[str]]:
    """A stage CSV with its types fixed; missing columns are added empty and returned."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in columns if c not in frame.columns]
    for column in missing:
        frame[column] = ""
    for column in frame.columns:
        if column == "skipped":
            frame[column] = frame[column].map(_skipped)
        elif column in TEXT_COLUMNS:
            frame[column] = frame[column].astype(str)
        elif column in BOOL_COLUMNS:
            frame[column] = frame[column].map(_bool).astype("boolean")
        else:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame, missing


def load_run(path: Path) -> RunData:
    """Load a run folder; a folder with neither meta.json nor a result CSV is a BenchError."""
    if not path.is_dir():
        raise BenchError(f"{path} is not a folder; give a run folder or a run id")
    if not is_run(path):
        raise BenchError(f"{path} is not a run folder (no meta.json, no result CSV); give results/<run-id>")
    data = RunData(path, {}, {})
    meta_path = path / "meta.json"
    if meta_path.is_file():
        try:
            data.meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as exc:
            data.absent.append(f"meta.json unreadable ({exc}); machine, Redis and git details unknown")
    else:
        data.absent.append("meta.json absent: machine, Redis and git details unknown")
    for stage, (name, columns) in STAGE_FILES.items():
        csv_path = path / name
        if not csv_path.is_file():
            planned = data.meta.get("stages_planned")
            if isinstance(planned, list) and stage not in planned:
                data.absent.append(f"stage {stage}: not part of this run (left out with --stages)")
            else:
                data.absent.append(f"stage {stage}: {name} absent")
            continue
        try:
            frame, missing = read_stage(csv_path, columns)
        except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            data.absent.append(f"stage {stage}: {name} unreadable ({exc.__class__.__name__}: {exc})")
            continue
        data.frames[stage] = frame
        if missing:
            data.missing_columns[stage] = missing
            data.absent.append(f"stage {stage}: {name} lacks column(s) {', '.join(missing)}")
    for hdr in sorted((path / HDR_DIR).glob("*.hdr")):
        parsed = parse_hdr_name(hdr.name)
        if parsed:
            stage, variant, _, metric = parsed
            data.hdr_files.setdefault((stage, variant, metric), []).append(hdr)
    return data


def merged_histograms(data: RunData, stage: str) -> tuple[dict[tuple[str, str], Any], list[str]]:
    """(metric, variant) -> the merge of every repetition's histogram; and the files that failed."""
    merged: dict[tuple[str, str], Any] = {}
    bad: list[str] = []
    for (hdr_stage, variant, metric), files in sorted(data.hdr_files.items()):
        if hdr_stage != stage:
            continue
        histograms = []
        for file in files:
            try:
                histograms.append(read_hdr(file))
            except Exception:  # a torn or foreign file must not stop the report
                bad.append(file.name)
        if histograms:
            merged[(metric, variant)] = merge(histograms)
    return merged, bad


# ---- markdown -------------------------------------------------------------------------------


def fmt(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isinf(number):
            return "∞"
        if number.is_integer() and abs(number) < 1e15:
            return f"{int(number):,}"
        magnitude = abs(number)
        digits = 0 if magnitude >= 1000 else 1 if magnitude >= 100 else 2 if magnitude >= 1 else 3
        return f"{number:,.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub markdown table; numbers right-aligned."""
    if frame.empty:
        return "*(no rows)*"
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]  # fmt: skip
    align = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, align, *body])


def percent(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def figure(plot: plots.Plot | None, why_not: str) -> list[str]:
    if plot is None:
        return [f"*No figure: {why_not}.*", ""]
    return [f"![{plot.title}]({plot.file})", "", f"*{plot.title}: {plot.caption}*", ""]


def meta_section(data: RunData, in_run: bool) -> list[str]:
    meta = data.meta
    lines = [f"# echomq-bench run {data.run_id}", ""]
    if in_run and not meta.get("reason"):
        status = "complete so far (this report is the run's last stage)"
    elif data.complete:
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
    finished = "(still running)" if in_run else "?"
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
    ]
    lines += ["## Run", "", markdown_table(pd.DataFrame(rows, columns=["", "value"])), ""]
    if data.absent:
        lines += ["## Absent from this run", "", *(f"- {line}" for line in data.absent), ""]
    return lines


def _flag_rows(frame: pd.DataFrame) -> pd.DataFrame:
    shown = frame.copy()
    if "saturated" in shown:
        shown["saturated"] = shown["saturated"].map(lambda v: "**saturated**" if v is True else fmt(v))
    if "audit_ok" in shown:
        shown["audit_ok"] = shown["audit_ok"].map(lambda v: "**FAILED**" if v is False else fmt(v))
    return shown


def _present(data: RunData, stage: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The stage's columns without those the file lacked."""
    return frame.drop(columns=data.missing_columns.get(stage, []))


def _missing_note(data: RunData, stage: str) -> list[str]:
    missing = data.missing_columns.get(stage)
    if not missing:
        return []
    file = STAGE_FILES[stage][0]
    return [f"> **Column(s) absent from {file}**: {', '.join(missing)} (an older or partial run); "
            "what needs them is left out.", ""]  # fmt: skip


def finish_fetch_section(data: RunData) -> list[str]:
    lines = ["## Finish-then-fetch: fused against two_call", ""]
    frame = data.frames.get("finish_fetch")
    if frame is None:
        return [*lines, "*Absent: this run has no finish_fetch.csv.*", ""]
    lines += _missing_note(data, "finish_fetch")
    saturated = int(frame["saturated"].fillna(False).astype(bool).sum())
    failed = int((~frame["audit_ok"].fillna(True).astype(bool)).sum())
    if saturated:
        lines += [f"> **{saturated} repetition(s) saturated**: the load generator, not Redis, was the limit; "
                  "their jobs/s understate what Redis can do.", ""]  # fmt: skip
    verdicts = data.meta.get("finish_fetch_audit_failures") or {}
    if failed and verdicts:  # the audit's own words: a restart or a gone server is not a lost job
        lines += [f"> **Audit not passed in {failed} repetition(s)**; those repetitions' numbers are "
                  "not valid:", *(f"> - {run}: {verdict}" for run, verdict in sorted(verdicts.items())),
                  ""]  # fmt: skip
    elif failed:
        lines += [f"> **Audit FAILED in {failed} repetition(s)**: jobs lost or duplicated; "
                  "those repetitions' numbers are not valid.", ""]  # fmt: skip
    errors = data.meta.get("finish_fetch_errors") or {}
    if errors:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items()))
        lines += [f"> **{sum(errors.values())} calls failed** in the measured windows ({kinds}); "
                  "each run's summary counts them by kind, its log has the tracebacks.", ""]  # fmt: skip
    lines += _finish_fetch_summary(frame)
    lines += figure(plots.jobs_per_s(frame, data.path), "no jobs_per_s values")
    histograms, bad = merged_histograms(data, "finish_fetch")
    if bad:
        lines += [f"*Unreadable HDR files left out: {', '.join(bad)}.*", ""]
    if histograms:
        plot = plots.latency_percentiles(histograms, data.path)
        table = [{"metric": m, "variant": v, **summary(h)} for (m, v), h in histograms.items()]
        lines += figure(plot, "no histograms")
        points = frame[["workers", "rtt_ms"]].drop_duplicates()
        if len(points) > 1:  # HDR file names carry variant and rep, not the workers/rtt point
            lines += [
                f"*The histograms are merged over all {len(points)} workers/rtt points of the run.*",
                "",
            ]
        lines += ["Merged HDR histograms (µs, all repetitions):", "", markdown_table(pd.DataFrame(table)), ""]
    else:
        lines += ["*No HDR files for finish_fetch; latency drawn from the CSV's percentile columns.*", ""]
        lines += figure(plots.latency_from_columns(frame, data.path), "no cycle percentile columns")
    lines += ["All repetitions:", "", markdown_table(_flag_rows(_present(data, "finish_fetch", frame))), ""]
    return lines


def _finish_fetch_summary(frame: pd.DataFrame) -> list[str]:
    keys = STAGE_KEYS["finish_fetch"]
    points = samples("finish_fetch", frame)
    if not points:
        return ["*No points: the key columns (variant, workers, rtt_ms) are missing.*", ""]
    rows = []
    for key, metrics in points.items():
        jobs = metrics.get("jobs_per_s")
        row: dict[str, object] = dict(zip(keys, key, strict=True))
        row["reps"] = jobs.n if jobs else 0
        row["jobs/s mean"] = jobs.mean if jobs else math.nan
        row["jobs/s min..max"] = f"{fmt(jobs.lo)}..{fmt(jobs.hi)}" if jobs else "—"
        row["jobs/s cv"] = percent(jobs.cv) if jobs else "—"
        for column in ("round_trips_per_job", "server_us_per_job", "cycle_p50_us", "cycle_p99_us"):
            row[column] = metrics[column].mean if column in metrics else math.nan
        rows.append(row)
    lines = ["Per point, mean over repetitions:", "", markdown_table(pd.DataFrame(rows)), ""]
    ratios = _fused_ratios(frame)
    if not ratios.empty:
        lines += [
            "fused / two_call jobs/s (per repetition pair, A B A B order):",
            "",
            markdown_table(ratios),
            "",
        ]
    return lines


def _fused_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Ratio of means per point, and the min..max of the repetition-paired ratios."""
    if not {"fused", "two_call"} <= set(frame["variant"]) or frame["rep"].isna().all():
        return pd.DataFrame()
    rows = []
    for (workers, rtt), group in frame.groupby(["workers", "rtt_ms"], dropna=False):
        fused = group[group["variant"] == "fused"].set_index("rep")["jobs_per_s"]
        two = group[group["variant"] == "two_call"].set_index("rep")["jobs_per_s"]
        if fused.empty or two.empty:
            continue
        paired = (fused / two).dropna()
        rows.append({
            "workers": workers, "rtt_ms": rtt, "ratio of means": fused.mean() / two.mean(),
            "paired min..max": f"{fmt(paired.min())}..{fmt(paired.max())}" if not paired.empty else "—",
            "pairs": len(paired),
        })  # fmt: skip
    return pd.DataFrame(rows)


def sweep_section(data: RunData) -> list[str]:
    lines = ["## Sweep cost against active-list size", ""]
    frame = data.frames.get("sweep")
    if frame is None:
        return [*lines, "*Absent: this run has no sweep_cost.csv.*", ""]
    lines += _missing_note(data, "sweep")
    skipped = frame[frame["skipped"] != ""]
    measured = frame[frame["skipped"] == ""]
    lines += figure(plots.sweep_time(measured, data.path), "no measured sweep points")
    lines += figure(plots.probe_max(measured, data.path), "no probe_max_us values")
    slopes = _slopes(measured)
    if not slopes.empty:
        lines += ["Slope of log(sweep time) against log(size) (1 = linear, 2 = quadratic):", "",
                  markdown_table(slopes), ""]  # fmt: skip
    if not skipped.empty:
        lines += [f"**Skipped points ({len(skipped)})**, not measured:", ""]
        points = skipped[["variant", "scenario", "active_size", "skipped"]].itertuples(index=False)
        lines += [f"- {v} / {s} / {fmt(n)}: {why}" for v, s, n, why in points]
        lines.append("")
    busy = measured[measured["probe_busy"].fillna(0) > 0]
    if not busy.empty:
        lines += [f"> **The probe got BUSY replies at {len(busy)} point(s)**: Redis refused other clients "
                  "while a script ran.", ""]  # fmt: skip
    shown = _present(data, "sweep", frame).sort_values(["scenario", "active_size", "variant"])
    shown["skipped"] = shown["skipped"].map(lambda why: f"**skipped**: {why}" if why else "")
    lines += ["All points:", "", markdown_table(shown), ""]
    return lines


def _slopes(frame: pd.DataFrame) -> pd.DataFrame:
    """The stage's own fit (sweep_summary.slopes) as a table: over every size, and
    between the two largest, where the growth at scale shows most plainly."""
    rows: list[dict[str, Any]] = [
        {str(k): ("" if pd.isna(v) else v) for k, v in record.items()}
        for record in frame[["variant", "scenario", "active_size", "sweep_ms_median"]].to_dict("records")
    ]
    table = []
    for key, fit in slopes(rows).items():
        variant, scenario = key.split("/", 1)
        table.append({
            "variant": variant, "scenario": scenario,
            "sizes": f"{fmt(fit['from_size'])}..{fmt(fit['to_size'])}",
            "slope (all sizes)": fit["slope"], "slope (two largest)": fit["slope_top_two"],
        })  # fmt: skip
    return pd.DataFrame(table)


def race_section(data: RunData) -> list[str]:
    lines = ["## Race audit", ""]
    frame = data.frames.get("race")
    if frame is None:
        return [*lines, "*Absent: this run has no race.csv.*", ""]
    lines += _missing_note(data, "race")
    violations = frame[frame["audit_violations"].fillna(0) > 0]
    if not violations.empty:
        variants = ", ".join(sorted(set(violations["variant"])))
        lines += [f"> **Audit violations** (a job lost or in two places) in {len(violations)} setting(s): "
                  f"{variants}.", ""]  # fmt: skip
    lines += figure(plots.race_anomalies(frame, data.path), "no anomaly columns")
    lines += ["All settings:", "", markdown_table(_present(data, "race", frame)), ""]
    return lines


def render(data: RunData, in_run: bool = False) -> str:
    lines = meta_section(data, in_run)
    lines += finish_fetch_section(data)
    lines += sweep_section(data)
    lines += race_section(data)
    return "\n".join(lines).rstrip() + "\n"


def write_report(path: Path, in_run: bool = False) -> Path:
    """Write report.md and the plots into the run folder; returns report.md's path."""
    data = load_run(path)
    report = path / "report.md"
    write_atomic(report, render(data, in_run))
    return report


def run_stage(ctx: RunContext) -> None:
    report = write_report(ctx.run_dir, in_run=True)
    ctx.progress(f"wrote {report}")


def report_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench report", description="Write report.md and plots.")
    parser.add_argument("run", nargs="?", help="run folder or run id (default: the newest run)")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    if args.run:
        path = resolve_run(args.run, args.results)
    else:
        runs = list_runs(args.results)
        if not runs:
            raise BenchError(f"no runs in {args.results}; `make bench` makes one, or give a run folder")
        path = runs[-1].path
    print(write_report(path))
    return 0


# ---- compare and runs -----------------------------------------------------------------------


def compare_markdown(a: RunData, b: RunData, comparison: Comparison, changed_only: bool = False) -> str:
    lines = [f"A: {describe(a)}", f"B: {describe(b)}"]
    for key in ("git_sha", "git_dirty", "redis_version", "redis_source", "profile", "python", "redis_py",
                "hiredis", "cpu_model", "cores"):  # fmt: skip
        if a.meta.get(key) != b.meta.get(key):
            lines.append(f"changed: {key}: {a.meta.get(key)} -> {b.meta.get(key)}")
    for run, name in ((a, "A"), (b, "B")):
        if not run.complete:
            lines.append(f"run {name} is INCOMPLETE: {run.meta.get('reason') or 'no reason recorded'}")
    lines += ["", *context_lines(a.meta, b.meta), ""]
    rows = comparison.rows.copy()
    if changed_only:  # rows with a note (saturated, audit failed) stay: their numbers are suspect
        keep = (rows["verdict"] != "same") | (rows["note"] != "")
        lines.append(f"(rows judged same and without a note left out: {int((~keep).sum())})")
        rows = rows[keep]
    if not rows.empty:
        rows["ratio"] = rows["ratio"].map(
            lambda r: "—" if math.isnan(r) else "∞" if math.isinf(r) else f"{r:.3f}"
        )
        rows["cv_a"] = rows["cv_a"].map(percent)
        rows["cv_b"] = rows["cv_b"].map(percent)
        rows = rows.rename(columns={"a": "A", "b": "B", "ratio": "B/A", "cv_a": "cv A", "cv_b": "cv B"})
    lines += [markdown_table(rows), ""]
    lines += [f"note: {n}" for n in comparison.notes]
    counts = ", ".join(f"{v} {comparison.count(v)}" for v in VERDICTS)
    lines.append(f"verdicts: {counts}")
    return "\n".join(lines) + "\n"


def describe(run: RunData) -> str:
    meta = run.meta
    sha = str(meta.get("git_sha") or "?")[:10]
    return (
        f"{run.run_id} (profile {meta.get('profile', '?')}, Redis {meta.get('redis_version', '?')}, "
        f"git {sha}{'+dirty' if meta.get('git_dirty') else ''})"
    )


def compare_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench compare", description="Compare run B against run A."
    )
    parser.add_argument("run_a", help="the baseline: run folder or run id")
    parser.add_argument("run_b", help="the run to judge against A")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any row is worse")
    parser.add_argument("--changed", action="store_true", help="leave out the rows judged same")
    parser.add_argument("--output", type=Path, help="also write the table to this markdown file")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    a = load_run(resolve_run(args.run_a, args.results))
    b = load_run(resolve_run(args.run_b, args.results))
    comparison = compare_runs(a.frames, b.frames)
    text = compare_markdown(a, b, comparison, args.changed)
    print(text, end="")
    if args.output:
        write_atomic(args.output, text)
    if args.fail_on_regression and comparison.count("worse"):
        return 1
    return 0


@dataclass(frozen=True)
class RunSummary:
    path: Path
    meta: dict[str, Any]
    stages: tuple[str, ...]


def list_runs(results: Path) -> list[RunSummary]:
    """Run folders under ``results``, oldest first (run ids start with their time)."""
    if not results.is_dir():
        return []
    runs = []
    for path in sorted(p for p in results.iterdir() if p.is_dir() and is_run(p)):
        try:
            meta = json.loads((path / "meta.json").read_text()) if (path / "meta.json").is_file() else {}
        except (OSError, ValueError):
            meta = {}
        stages = tuple(s for s, (f, _) in STAGE_FILES.items() if (path / f).is_file())
        runs.append(RunSummary(path, meta, stages))
    return runs


def runs_table(runs: Sequence[RunSummary]) -> str:
    rows = []
    for run in runs:
        meta = run.meta
        if not meta:
            status = "no meta.json"
        elif meta.get("complete"):
            status = "complete"
        else:
            status = f"INCOMPLETE: {meta.get('reason') or 'no reason recorded'}"
        rows.append({
            "run": run.path.name, "profile": meta.get("profile", "?"),
            "date": str(meta.get("started", "?")).replace("T", " "),
            "redis": meta.get("redis_version", "?"), "git": str(meta.get("git_sha") or "?")[:10],
            "stages": ",".join(run.stages) or "-", "status": status,
        })  # fmt: skip
    frame = pd.DataFrame(rows)
    widths = {c: max(len(c), *(len(str(v)) for v in frame[c])) for c in frame.columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in frame.columns).rstrip()]
    lines += ["  ".join(str(v).ljust(widths[c]) for c, v in zip(frame.columns, row, strict=True)).rstrip()
              for row in frame.itertuples(index=False)]  # fmt: skip
    return "\n".join(lines)


def runs_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench runs", description="List the runs in results/.")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    runs = list_runs(args.results)
    if not runs:
        print(f"no runs in {args.results} (`make bench` makes one)")
        return 0
    print(runs_table(runs))
    return 0
