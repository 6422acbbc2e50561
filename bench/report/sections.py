"""The report's sections: the run, finish-then-fetch, BullMQ's own worker, sweep cost, the race audit.

Every table carries the protocol (echomq: lua/; bullmq: the bullmq package's own
Lua), and every figure tells them apart (``plots.protocol_labelled``)."""

from __future__ import annotations

import math

import pandas as pd

from bench.fits import headline_ratio, loglog_fit
from bench.hdr import summary
from bench.report import latency, plots
from bench.report.compare import STAGE_KEYS, samples
from bench.report.load import RunData, merged_histograms
from bench.report.machine import beside_saturated, contended_note
from bench.report.markdown import figure, flag_rows, fmt, markdown_table, missing_note, percent, present
from bench.report.plots import protocol_labelled
from bench.report.price import price_section
from bench.report.ratios import POINT_COLUMNS, paired_ratios, shown_point_columns, values_by_rep

# What the bullmq protocol runs, said once wherever its numbers are shown.
BULLMQ_NOTE = (
    "bullmq is BullMQ's own Lua and argument builders from the installed bullmq package, run with a "
    "BullMQ Worker's default options: lock 30 s, every completed job kept, no metrics, no limiter."
)


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


def bullmq_note(frame: pd.DataFrame) -> list[str]:
    if "protocol" in frame.columns and (frame["protocol"] == "bullmq").any():
        return [f"*{BULLMQ_NOTE}*", ""]
    return []


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


def finish_fetch_section(data: RunData) -> list[str]:
    lines = ["## Finish-then-fetch: fused against two_call and two_call_pipelined", ""]
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
    lines += bullmq_note(frame)
    lines += _finish_fetch_summary(frame)
    lines += figure(plots.jobs_per_s(protocol_labelled(frame), data.path), "no jobs_per_s values")
    lines += _pace_section(frame)
    lines += price_section(data)
    if frame["concurrency"].nunique(dropna=True) > 1:  # a line against concurrency needs two of them
        plot = plots.ratio_against_concurrency(paired_ratios(frame), data.path)
        lines += figure(plot, "no fused/two_call or fused/two_call_pipelined pairs")
    lines += _fidelity_section(data.meta.get("finish_fetch_fidelity"))
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
        points = frame[list(POINT_COLUMNS)].drop_duplicates()
        unpointed = any(not plots.split_variant(v)[1] for _, v in histograms)
        if len(points) > 1 and unpointed:  # older HDR file names carry the strategy, not the point
            lines += [
                f"*The histograms are merged over all {len(points)} workers/rtt points of the run.*",
                "",
            ]
        lines += ["Merged HDR histograms (µs, all repetitions):", "", markdown_table(pd.DataFrame(table)), ""]
    else:
        lines += ["*No HDR files for finish_fetch; latency drawn from the CSV's percentile columns.*", ""]
        lines += figure(
            plots.latency_from_columns(protocol_labelled(frame), data.path), "no cycle percentile columns"
        )
    shown = beside_saturated(latency.shown_columns(present(data, "finish_fetch", frame)))
    lines += ["All repetitions:", "", markdown_table(flag_rows(shown)), ""]
    return lines


def _finish_fetch_summary(frame: pd.DataFrame) -> list[str]:
    keys = STAGE_KEYS["finish_fetch"]
    points = samples("finish_fetch", frame)
    if not points:
        return ["*No points: the key columns (strategy, workers, rtt_ms) are missing.*", ""]
    shown = {"strategy", *shown_point_columns(frame)}
    rows = []
    for key, metrics in points.items():
        jobs = metrics.get("jobs_per_s")
        row: dict[str, object] = {k: v for k, v in zip(keys, key, strict=True) if k in shown}
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
        others = " and ".join(f"fused / {o}" for o in dict.fromkeys(paired_ratios(frame)["other"]))
        lines += [
            f"{others} jobs/s (the median of the repetition pairs, A B C order):",
            "",
            markdown_table(ratios),
            "",
        ]
    return lines


def _fused_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Per point: the median of the repetition-paired fused/other ratios, with their min-max
    (bench.fits.paired_ratio, as the stage's terminal table prints it), a column pair per
    other strategy."""
    if frame["rep"].isna().all():
        return pd.DataFrame()
    ratios = paired_ratios(frame)
    if ratios.empty:
        return ratios
    shown = shown_point_columns(frame)
    several = ratios["other"].nunique() > 1
    rows = []
    for point, group in ratios.groupby(shown, sort=True):
        row: dict[str, object] = dict(zip(shown, point, strict=True))
        for r in group.itertuples(index=False):
            name = f"fused/{r.other}: " if several else ""
            row[f"{name}median of pairs"] = r.median
            row[f"{name}[min-max]"] = f"[{r.lo:.2f}-{r.hi:.2f}]"
        row["pairs"] = int(group["pairs"].min())
        rows.append(row)
    return pd.DataFrame(rows)


PACE_COLUMNS = {
    "jobs_per_s": "jobs/s",
    "round_trips_per_job": "rt/job",
    "commands_per_job": "cmd/job",
    "server_commands_per_job": "cmd/job (commandstats)",
    "server_us_per_job": "Redis µs/job",
    "redis_ceiling_jobs_per_s": "Redis ceiling jobs/s",
    "limit_share": "limit's share",
    "locust_raw_jobs_ratio": "Locust/raw jobs/s",
    "loadgen_cpu_us_per_job": "Locust CPU µs/job",
    "raw_cpu_us_per_job": "raw CPU µs/job",
}


def _pace_section(frame: pd.DataFrame) -> list[str]:
    """Per point and strategy: what Redis could do, what was done, and which side set the pace."""
    if "limit" not in frame.columns or not (frame["limit"].fillna("") != "").any():
        return []
    shown = ["strategy", *shown_point_columns(frame)]
    rows = []
    for key, group in frame.groupby(shown, sort=True):
        row: dict[str, object] = dict(zip(shown, key, strict=True))
        for column, title in PACE_COLUMNS.items():
            values = group[column] if column in group else pd.Series(dtype=float)
            row[title] = values.mean() if not values.isna().all() else math.nan
        named = group["limit"][group["limit"] != ""]
        row["limit"] = named.mode().iloc[0] if not named.empty else "—"  # what most repetitions named
        rows.append(row)
    return [
        "### Which side set the pace",
        "",
        "Means over the repetitions. The Redis ceiling is 1e6 / Redis µs per job (INFO commandstats, "
        "producers' addJob included): the jobs/s Redis could do were its own time the only cost. "
        "The limit is the side that used the largest share of its capacity: the client (the busiest "
        "load process's CPU), the network (simulated round trips x rtt per worker connection), the "
        "job time (job-ms per slot) or Redis (its CPU); latency when no side used 70% of its "
        "capacity (each connection waits on its exchanges; more jobs in flight would help, and on a "
        "shared machine other processes may have taken the difference). Commands per job are "
        "counted at the client and cross-checked by the server; round trips per job fall below 1 "
        "when a flush of the "
        "auto-pipelined connection carries several jobs' calls. Locust/raw compares Locust's jobs/s "
        "with the same loops run without Locust (the raw driver) at the same point.",
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
    ]


def _fidelity_section(fidelity: object) -> list[str]:
    """The latency-fidelity check from meta.json: what the client library and the harness add."""
    if not isinstance(fidelity, dict):
        return []
    bench_note = str(fidelity.get("redis_benchmark_note") or "")
    rows = [
        ("redis-benchmark (C client)", fidelity.get("redis_benchmark_p50_us"), bench_note),
        ("bare redis-py, plain loop", fidelity.get("redis_py_p50_us"), ""),
        ("the raw driver's timed path, plain loop", fidelity.get("raw_path_p50_us"), ""),
        ("the same path under Locust", fidelity.get("locust_path_p50_us"), fidelity.get("locust_note", "")),
    ]
    table = pd.DataFrame(
        [(way, math.nan if p50 is None else p50, note) for way, p50, note in rows],
        columns=["way", "p50 µs", "note"],
    )
    lines = [
        "### Latency fidelity",
        "",
        f"The p50 of one trivial EVALSHA (`return 1`) at one client, {fmt(fidelity.get('calls'))} calls "
        "each way, in the same run:",
        "",
        markdown_table(table),
        "",
    ]
    redis_py, locust = fidelity.get("redis_py_p50_us"), fidelity.get("locust_path_p50_us")
    if isinstance(redis_py, int | float) and isinstance(locust, int | float):
        lines += [f"The harness under Locust adds {locust - redis_py:+.0f} µs to the bare redis-py p50 "
                  "(goal: at most 20 µs).", ""]  # fmt: skip
    return lines


def sweep_section(data: RunData) -> list[str]:
    lines = ["## Sweep cost against active-list size", ""]
    frame = data.frames.get("sweep")
    if frame is None:
        return [*lines, "*Absent: this run has no sweep_cost.csv.*", ""]
    lines += missing_note(data, "sweep")
    lines += contended_note(frame, "point(s)")
    lines += bullmq_note(frame)
    skipped = frame[frame["skipped"] != ""]
    measured = frame[frame["skipped"] == ""]
    lines += figure(plots.sweep_time(protocol_labelled(measured), data.path), "no measured sweep points")
    lines += figure(plots.probe_max(protocol_labelled(measured), data.path), "no probe_max_us values")
    slopes = _slopes(measured)
    if not slopes.empty:
        lines += ["Slope of log(sweep time) against log(size) (1 = linear, 2 = quadratic):", "",
                  markdown_table(slopes), ""]  # fmt: skip
    if not skipped.empty:
        lines += [f"**Skipped points ({len(skipped)})**, not measured:", ""]
        named = protocol_labelled(skipped)
        points = named[["variant", "scenario", "active_size", "skipped"]].itertuples(index=False)
        lines += [f"- {v} / {s} / {fmt(n)}: {why}" for v, s, n, why in points]
        lines.append("")
    busy = measured[measured["probe_busy"].fillna(0) > 0]
    if not busy.empty:
        lines += [f"> **The probe got BUSY replies at {len(busy)} point(s)**: Redis refused other clients "
                  "while a script ran.", ""]  # fmt: skip
    shown = present(data, "sweep", frame)
    order = [c for c in ("scenario", "active_size", "protocol", "variant") if c in shown.columns]
    shown = shown.sort_values(order)
    shown["skipped"] = shown["skipped"].map(lambda why: f"**skipped**: {why}" if why else "")
    lines += ["All points:", "", markdown_table(flag_rows(shown)), ""]
    lines += _hazard(data)
    return lines


def _hazard(data: RunData) -> list[str]:
    """The client-default hazard: BullMQ's sweep past its client's timeout, against ours."""
    frame = data.frames.get("sweep_hazard")
    if frame is None or frame.empty:
        return []
    lines = ["### The client-default hazard: a sweep held past the socket timeout", ""]
    lines += [
        "One all-stalled BullMQ sweep a row, sent once by a client: `bullmq` is BullMQ's own connection "
        "(redis-py's socket timeout, re-sent on a timeout: `Retry(ExponentialBackoff(cap=20, base=1), 20)`), "
        "`suite` is the suite's client, which never re-sends. *server_executions* counts the script's runs "
        "on the server for the one call, *server_rejected* the re-sends Redis refused (BUSY), *probe_busy* "
        "the BUSY replies another client got meanwhile; *reply_matches* says whether the call returned "
        "exactly the jobs that moved.",
        "",
    ]
    for row in frame.to_dict("records"):
        reply = "raised" if pd.isna(row["reply_ids"]) else f"returned {fmt(row['reply_ids'])} ids"
        verdict = "matches" if row["reply_matches"] is True else "**does not match**"
        error = str(row["error"] or "")
        lines.append(
            f"- {row['client']}, {fmt(row['stalled_jobs'])} stalled, "
            f"timeout {fmt(row['socket_timeout_s'])} s: "
            f"{fmt(row['server_executions'])} execution(s) and {fmt(row['server_rejected'])} refused for one "
            f"call; it {reply} for {fmt(row['moved_ids'])} moved ({verdict}); other clients got "
            f"{fmt(row['probe_busy'])} BUSY" + (f"; the caller saw {error}" if error else "")
        )
    lines += ["", markdown_table(present(data, "sweep_hazard", frame)), ""]
    return lines


def _slopes(frame: pd.DataFrame) -> pd.DataFrame:
    """The stage's own fit (bench.fits.loglog_fit) as a table: over every size, and
    between the two largest, where the growth at scale shows most plainly."""
    table = []
    for (protocol, variant, scenario), group in frame.groupby(["protocol", "variant", "scenario"]):
        fit = loglog_fit(zip(group["active_size"], group["sweep_ms_median"], strict=True))
        if fit is None:
            continue
        table.append({
            "protocol": protocol, "variant": variant, "scenario": scenario,
            "sizes": f"{fmt(fit.from_x)}..{fmt(fit.to_x)}",
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
    lines += bullmq_note(frame)
    violations = frame[frame["audit_violations"].fillna(0) > 0]
    if not violations.empty:
        variants = ", ".join(sorted(set(protocol_labelled(violations)["variant"])))
        lines += [f"> **Audit violations** (a job lost or in two places) in {len(violations)} setting(s): "
                  f"{variants}.", ""]  # fmt: skip
    lines += figure(plots.race_anomalies(protocol_labelled(frame), data.path), "no anomaly columns")
    lines += ["All settings:", "", markdown_table(flag_rows(present(data, "race", frame))), ""]
    return lines


def bullmq_worker_section(data: RunData) -> list[str]:
    """BullMQ's own asyncio Worker beside the suite's loops over the same scripts."""
    frame = data.frames.get("bullmq_worker")
    if frame is None:
        return []  # absent, or not run: the run section's list says which
    lines = ["## BullMQ's own worker against the suite's loops on BullMQ's scripts", ""]
    lines += missing_note(data, "bullmq_worker")
    lines += contended_note(frame, "run(s)")
    about = data.meta.get("bullmq_worker") or {}
    options = about.get("options") if isinstance(about, dict) else None
    lines += [
        "BullMQ's asyncio `Worker` and the suite's synchronous fused and two_call loops each process a "
        "pre-filled queue in a process of their own, timed from completion "
        f"{fmt(about.get('window_from', 1000))} "
        "to the last. What a BullMQ Python user gets today is the Worker; what the fused call would give "
        "them is the fused loop.",
        "",
    ]
    if options:
        lines += [f"*{options}.*", ""]
    failed = int((~frame["audit_ok"].fillna(True).astype(bool)).sum())
    if failed:
        lines += [f"> **Audit FAILED in {failed} run(s)**: a job not completed exactly once.", ""]
    rows = []
    for key, metrics in samples("bullmq_worker", frame).items():
        row: dict[str, object] = dict(zip(STAGE_KEYS["bullmq_worker"], key, strict=True))
        jobs = metrics.get("jobs_per_s")
        row["reps"] = jobs.n if jobs else 0
        row["jobs/s mean"] = jobs.mean if jobs else math.nan
        row["jobs/s min..max"] = f"{fmt(jobs.lo)}..{fmt(jobs.hi)}" if jobs else "—"
        for column in ("client_cpu_us_per_job", "redis_calls_per_job", "redis_us_per_job"):
            row[column] = metrics[column].mean if column in metrics else math.nan
        rows.append(row)
    lines += ["Per driver, mean over repetitions:", "", markdown_table(pd.DataFrame(rows)), ""]
    base = frame[(frame["driver"] == "bullmq_worker") & (frame["concurrency"] == 1)]
    ratios = []
    for loop in ("fused", "two_call"):
        other = frame[frame["driver"] == loop]
        ratio = headline_ratio(values_by_rep(other), values_by_rep(base))  # the one A/B definition
        if ratio:
            ratios.append({"suite loop": loop, "÷ BullMQ Worker, concurrency 1": ratio.median,
                           "[min-max]": f"[{ratio.lo:.2f}-{ratio.hi:.2f}]",
                           "pairs": ratio.pairs})  # fmt: skip
    if ratios:
        lines += ["jobs/s of the suite's loops over BullMQ's Worker (per repetition pair):", "",
                  markdown_table(pd.DataFrame(ratios)), ""]  # fmt: skip
    lines += figure(plots.worker_drivers(frame, data.path), "no jobs_per_s values")
    lines += ["All runs:", "", markdown_table(flag_rows(present(data, "bullmq_worker", frame))), ""]
    return lines
