"""The report's sections: the run, finish-then-fetch, sweep cost, the race audit."""

from __future__ import annotations

import math

import pandas as pd

from bench.fits import loglog_fit
from bench.hdr import summary
from bench.report import headline, latency, plots
from bench.report.compare import STAGE_KEYS, samples
from bench.report.load import RunData, merged_histograms
from bench.report.machine import beside_saturated, contended_note
from bench.report.markdown import figure, flag_rows, fmt, markdown_table, missing_note, percent, present


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
    ]
    lines += ["## Run", "", markdown_table(pd.DataFrame(rows, columns=["", "value"])), ""]
    if data.absent:
        lines += ["## Absent from this run", "", *(f"- {line}" for line in data.absent), ""]
    return lines


def finish_fetch_section(data: RunData) -> list[str]:
    lines = ["## Finish-then-fetch: fused against two_call", ""]
    frame = data.frames.get("finish_fetch")
    if frame is None:
        return [*lines, "*Absent: this run has no finish_fetch.csv.*", ""]
    lines += missing_note(data, "finish_fetch")
    lines += contended_note(frame, "repetition(s)")
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
    e2e = latency.meaning(frame)
    lines += latency.note(frame)
    histograms, bad = merged_histograms(data, "finish_fetch")
    if bad:
        lines += [f"*Unreadable HDR files left out: {', '.join(bad)}.*", ""]
    if histograms:
        plot = plots.latency_percentiles(histograms, data.path, e2e.panel)
        table = [
            {"metric": e2e.hdr_metric if m == "e2e" else m, "strategy": v, **summary(h)}
            for (m, v), h in histograms.items()
        ]
        lines += figure(plot, "no histograms")
        points = frame[["workers", "rtt_ms"]].drop_duplicates()
        unpointed = any(not plots.split_variant(v)[1] for _, v in histograms)
        if len(points) > 1 and unpointed:  # older HDR file names carry the strategy, not the point
            lines += [
                f"*The histograms are merged over all {len(points)} workers/rtt points of the run.*",
                "",
            ]
        lines += ["Merged HDR histograms (µs, all repetitions):", "", markdown_table(pd.DataFrame(table)), ""]
    else:
        lines += ["*No HDR files for finish_fetch; latency drawn from the CSV's percentile columns.*", ""]
        lines += figure(plots.latency_from_columns(frame, data.path), "no cycle percentile columns")
    shown = beside_saturated(latency.shown_columns(present(data, "finish_fetch", frame)))
    lines += ["All repetitions:", "", markdown_table(flag_rows(shown)), ""]
    return lines


def _finish_fetch_summary(frame: pd.DataFrame) -> list[str]:
    keys = STAGE_KEYS["finish_fetch"]
    points = samples("finish_fetch", frame)
    if not points:
        return ["*No points: the key columns (strategy, workers, rtt_ms) are missing.*", ""]
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
    """Per point: the headline (bench.report.headline), as the stage's terminal table prints it."""
    rows = [
        {"workers": workers, "rtt_ms": rtt, "median of pairs": ratio.median,
         "[min-max]": f"[{ratio.lo:.2f}-{ratio.hi:.2f}]", "pairs": ratio.pairs}
        for (workers, rtt), ratio in headline.per_point(frame).items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def sweep_section(data: RunData) -> list[str]:
    lines = ["## Sweep cost against active-list size", ""]
    frame = data.frames.get("sweep")
    if frame is None:
        return [*lines, "*Absent: this run has no sweep_cost.csv.*", ""]
    lines += missing_note(data, "sweep")
    lines += contended_note(frame, "point(s)")
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
    shown = present(data, "sweep", frame).sort_values(["scenario", "active_size", "variant"])
    shown["skipped"] = shown["skipped"].map(lambda why: f"**skipped**: {why}" if why else "")
    lines += ["All points:", "", markdown_table(flag_rows(shown)), ""]
    return lines


def _slopes(frame: pd.DataFrame) -> pd.DataFrame:
    """The stage's own fit (bench.fits.loglog_fit) as a table: over every size, and
    between the two largest, where the growth at scale shows most plainly."""
    table = []
    for (variant, scenario), group in frame.groupby(["variant", "scenario"]):
        fit = loglog_fit(zip(group["active_size"], group["sweep_ms_median"], strict=True))
        if fit is None:
            continue
        table.append({
            "variant": variant, "scenario": scenario, "sizes": f"{fmt(fit.from_x)}..{fmt(fit.to_x)}",
            "slope (all sizes)": round(fit.slope, 3), "slope (two largest)": round(fit.slope_top_two, 3),
        })  # fmt: skip
    return pd.DataFrame(table)


def race_section(data: RunData) -> list[str]:
    lines = ["## Race audit", ""]
    frame = data.frames.get("race")
    if frame is None:
        return [*lines, "*Absent: this run has no race.csv.*", ""]
    lines += missing_note(data, "race")
    lines += contended_note(frame, "setting(s)")
    violations = frame[frame["audit_violations"].fillna(0) > 0]
    if not violations.empty:
        variants = ", ".join(sorted(set(violations["variant"])))
        lines += [f"> **Audit violations** (a job lost or in two places) in {len(violations)} setting(s): "
                  f"{variants}.", ""]  # fmt: skip
    lines += figure(plots.race_anomalies(frame, data.path), "no anomaly columns")
    lines += ["All settings:", "", markdown_table(flag_rows(present(data, "race", frame))), ""]
    return lines
