"""The finish-then-fetch section: jobs/s and fused ratios, the pace, fidelity, latency, every rep."""

from __future__ import annotations

import math

import pandas as pd

from bench.report import latency
from bench.report.cells import judged_frame, mark_notes, with_marks
from bench.report.columns import clean, flag
from bench.report.compare.metrics import STAGE_KEYS, norm_key, samples
from bench.report.load import RunData, merged_histograms
from bench.report.markdown import bullmq_note, figure, flag_rows, fmt, markdown_table, percent, present
from bench.report.plots.finish_fetch import (
    jobs_against_concurrency,
    jobs_per_s,
    ratio_against_concurrency,
    ratio_against_rtt,
)
from bench.report.plots.latency import (
    latency_from_columns,
    latency_percentiles,
    queue_latency_cdf,
    split_variant,
)
from bench.report.plots.style import protocol_labelled
from bench.report.predict import WHAT_IF_CONCURRENCY, Point, run_workers, what_if
from bench.report.quiet import beside_saturated
from bench.report.ratios import (
    POINT_COLUMNS,
    RTT_MISSED,
    paired_ratios,
    quoted,
    rtt_note,
    shown_point_columns,
)
from bench.report.sections.findings import model_section
from bench.report.sections.head import section_head
from bench.report.sections.script_cost import script_cost_section
from bench.report.sections.sweep import records
from bench.results.finish_fetch import HARNESS_ADDS_GOAL_US, Fidelity, FinishFetchMeta, goal_lines
from bench.results.hdr import summary

# finish_fetch_shards.csv's keys: a master's jobs/s and Redis µs per job a point, so a hot shard shows
SHARD_KEYS = ["protocol", "strategy", "workers", "queues", "concurrency", "job_ms", "rtt_ms", "master"]


def shards_section(frame: pd.DataFrame | None) -> list[str]:
    if frame is None or frame.empty or not set(SHARD_KEYS) <= set(frame.columns):
        return []
    if (frame["queues"] == 1).all() and frame["master"].nunique() == 1:
        return []
    # Keyed by the queues a master held too: each repetition names its queues afresh, so at one
    # queue the queue sits on another master each time; a master that held none is left out.
    held = frame[frame["master_queues"] > 0]
    table = (
        held.groupby([*SHARD_KEYS, "master_queues"], sort=True)
        .agg(
            reps=("rep", "nunique"),
            jobs_per_s=("jobs_per_s", "mean"),
            server_us_per_job=("server_us_per_job", "mean"),
        )
        .reset_index()
    )
    if table["protocol"].nunique() == 1:
        table = table.drop(columns="protocol")
    return [
        "Per master holding queues of the run, mean over the repetitions it held them in "
        "(finish_fetch_shards.csv; each master's Redis µs per job from its own INFO commandstats; "
        "finish_fetch_queues.csv has each queue):",
        "",
        markdown_table(table),
        "",
    ]


def finish_fetch_section(data: RunData) -> list[str]:
    title = "Finish-then-fetch: fused against two_call and two_call_pipelined"
    lines, frame = section_head(data, "finish_fetch", title, "repetition(s)")
    if frame is None:
        return lines
    saturated = int(flag(frame, "saturated").sum())
    failed = int((~frame["audit_ok"].fillna(True).astype(bool)).sum())
    if saturated:
        lines += [f"> **{saturated} repetition(s) saturated**: the load generator, not Redis, was the limit; "
                  "their jobs/s understate what Redis can do.", ""]  # fmt: skip
    section = data.meta.finish_fetch or FinishFetchMeta()
    if failed and (verdicts := section.audit_failures):  # the audit's own words: a restart is no lost job
        lines += [f"> **Audit not passed in {failed} repetition(s)**; those repetitions' numbers are "
                  "not valid:", *(f"> - {run}: {verdict}" for run, verdict in sorted(verdicts.items())),
                  ""]  # fmt: skip
    elif failed:
        lines += [f"> **Audit FAILED in {failed} repetition(s)**: jobs lost or duplicated; "
                  "those repetitions' numbers are not valid.", ""]  # fmt: skip
    if errors := section.errors:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items()))
        lines += [f"> **{sum(errors.values())} calls failed** in the measured windows ({kinds}); "
                  "each run's summary counts them by kind, its log has the tracebacks.", ""]  # fmt: skip
    lines += bullmq_note(frame)
    every = frame  # the goals and the all-repetitions table read every window
    frame, _ = judged_frame(frame, [*POINT_COLUMNS, "strategy"])  # a cell's clean windows
    lines += _finish_fetch_summary(frame)
    # throughput from the closed regimes: an open point's jobs/s is the rate it was offered
    closed = frame[frame["regime"] != "open"] if "regime" in frame.columns else frame
    lines += figure(jobs_per_s(protocol_labelled(closed), data.path), "no jobs_per_s values")
    lines += shards_section(data.frames.get("finish_fetch_shards"))
    lines += _pace_section(frame)
    lines += model_section(data)
    lines += _driver_section(frame, every)
    lines += script_cost_section(data)
    if frame["concurrency"].nunique(dropna=True) > 1:  # a line against concurrency needs two of them
        lines += figure(jobs_against_concurrency(closed, data.path), "no jobs/s at two concurrencies")
        plot = ratio_against_concurrency(quoted(paired_ratios(closed)), data.path)
        lines += figure(plot, "no fused/two_call or fused/two_call_pipelined pairs")
    levels = sorted({int(c) for c in frame["concurrency"].dropna()} or set(WHAT_IF_CONCURRENCY))
    rtts = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
    workers = run_workers(frame)
    guesses = what_if(data, [Point(workers, c, r) for c in levels for r in rtts])
    plot = ratio_against_rtt(quoted(paired_ratios(closed[clean(closed)])), guesses, data.path)
    lines += figure(plot, "no clean fused/two_call pairs")
    lines += _fidelity_section(section.fidelity)
    e2e = latency.meaning(frame)
    lines += latency.note(frame)
    histograms, bad = merged_histograms(data, "finish_fetch")
    if bad:
        lines += [f"*Unreadable HDR files left out: {', '.join(bad)}.*", ""]
    if histograms:
        # backlog wait measures the harness: only the open regime's end to end is drawn
        plot = latency_percentiles(histograms, data.path, e2e.panel, with_e2e=e2e is latency.OPEN)
        table = [
            {"metric": e2e.name if m == "e2e" else m, "strategy": v, **summary(h)}
            for (m, v), h in histograms.items()
        ]
        lines += figure(plot, "no histograms")
        if e2e is latency.OPEN:
            lines += figure(queue_latency_cdf(histograms, data.path), "no queue latency histograms")
        points = frame[list(POINT_COLUMNS)].drop_duplicates()
        unpointed = any(not split_variant(v)[1] for _, v in histograms)
        if len(points) > 1 and unpointed:  # older HDR file names carry the strategy, not the point
            lines += [
                f"*The histograms are merged over all {len(points)} workers/rtt points of the run.*",
                "",
            ]
        lines += ["Merged HDR histograms (µs, all repetitions):", "", markdown_table(pd.DataFrame(table)), ""]
    else:
        lines += ["*No HDR files for finish_fetch; latency drawn from the CSV's percentile columns.*", ""]
        lines += figure(
            latency_from_columns(protocol_labelled(frame), data.path), "no cycle percentile columns"
        )
    shown = beside_saturated(latency.shown_columns(present(data, "finish_fetch", every)))
    lines += ["All repetitions:", "", markdown_table(flag_rows(shown)), ""]
    return lines


def _finish_fetch_summary(frame: pd.DataFrame) -> list[str]:
    keys = STAGE_KEYS["finish_fetch"]
    if not (points := samples("finish_fetch", frame)):
        return ["*No points: the key columns (strategy, workers, rtt_ms) are missing.*", ""]
    shown = {"strategy", *shown_point_columns(frame)}
    rows = []
    by_key = {tuple(norm_key(v) for v in k): g for k, g in frame.groupby(list(keys), sort=True, dropna=False)}
    groups = [by_key.get(key, frame.iloc[0:0]) for key in points]
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
    rows = with_marks(rows, groups)
    lines = ["Per point, mean over repetitions:", "", markdown_table(pd.DataFrame(rows)), ""]
    lines += mark_notes(str(r.get("marks", "")) for r in rows)
    ratios = _fused_ratios(frame)
    if not ratios.empty:
        others = " and ".join(f"fused / {o}" for o in dict.fromkeys(paired_ratios(frame)["other"]))
        lines += [
            f"{others} jobs/s (the median of the repetition pairs, A B C order):",
            "",
            markdown_table(ratios),
            "",
            *mark_notes(ratios["marks"] if "marks" in ratios.columns else []),
            *rtt_note(paired_ratios(frame)),
        ]
    return lines


def _fused_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Per point: fused/other's median of the repetition pairs [min-max], a column pair an other."""
    if frame["rep"].isna().all():
        return pd.DataFrame()
    ratios = paired_ratios(frame)
    if ratios.empty:
        return ratios
    shown = shown_point_columns(frame)
    several = ratios["other"].nunique() > 1
    cells = dict(iter(frame.groupby(shown, sort=True)))  # the point's cells: their marks
    rows, groups = [], []
    for point, group in ratios.groupby(shown, sort=True):
        row: dict[str, object] = dict(zip(shown, point, strict=True))
        for r in group.itertuples(index=False):
            name = f"fused/{r.other}: " if several else ""
            quote = not r.rtt_missed  # else two networks: no figure
            row[f"{name}median of pairs"] = r.median if quote else RTT_MISSED
            row[f"{name}[min-max]"] = f"[{r.lo:.2f}-{r.hi:.2f}]" if quote else ""
        row["pairs"] = int(group["pairs"].min())
        rows.append(row)
        groups.append(cells.get(point, frame.iloc[0:0]))
    return pd.DataFrame(with_marks(rows, groups))


PACE_COLUMNS = {
    "jobs_per_s": "jobs/s",
    "round_trips_per_job": "rt/job",
    "commands_per_job": "cmd/job",
    "server_commands_per_job": "cmd/job (commandstats)",
    "server_us_per_job": "Redis µs/job",
    "redis_ceiling_jobs_per_s": "Redis ceiling jobs/s",
    "limit_share": "limit's share",  # LIMIT_SHARE
    "redis_mem_growth_bytes_per_1k_jobs": "Redis memory growth B/1k jobs",
    "locust_raw_jobs_ratio": "Locust/raw jobs/s",
    "loadgen_cpu_us_per_job": "Locust CPU µs/job",
    "raw_cpu_us_per_job": "raw CPU µs/job",
    "reference_cpu_us_per_job": "reference CPU µs/job",
    "raw_reference_cpu_ratio": "raw/reference CPU",
    "rtt_slept_ms": "rtt paid ms",
}

DRIVER_COLUMNS = {
    "jobs_per_s": "Locust jobs/s",
    "raw_jobs_per_s": "raw jobs/s",
    "reference_jobs_per_s": "reference jobs/s",
    "loadgen_cpu_us_per_job": "Locust CPU µs/job",
    "raw_cpu_us_per_job": "raw CPU µs/job",
    "reference_cpu_us_per_job": "reference CPU µs/job",
    "round_trips_per_job": "Locust rt/job",
    "raw_round_trips_per_job": "raw rt/job",
    "reference_round_trips_per_job": "reference rt/job",
}


def _driver_section(frame: pd.DataFrame, every: pd.DataFrame) -> list[str]:
    """Locust, the raw driver and the reference side by side, and the goals over ``every`` window."""
    if "reference_cpu_us_per_job" not in frame.columns or frame["reference_cpu_us_per_job"].isna().all():
        return []
    goals = goal_lines(records(every))
    return [
        "### Locust, the raw driver and the reference",
        "",
        "Medians over the repetitions. "
        "The reference is the least client work the suite's call builders allow. "
        "It is one process in lockstep, each round's calls in one redis-py pipeline. "
        "It drains a pre-filled queue at rtt 0, and its adds count in its CPU. "
        "The raw driver runs the Locust users' own loops without Locust, one thread per connection. "
        "What Locust or the raw driver costs beyond the reference is the harness. "
        "Goals on uncontended points:",
        "",
        *[f"- {line}" for line in goals],
        "",
        *_point_table(frame, DRIVER_COLUMNS, "median"),
    ]


LIMIT_SHARE = "limit's share"


def _point_table(frame: pd.DataFrame, columns: dict[str, str], how: str) -> list[str]:
    """A row a strategy and point: each column's ``how`` over the repetitions, the limit most named;
    the table, then its marks' notes."""
    shown = ["strategy", *shown_point_columns(frame)]
    rows, groups = [], []
    for key, group in frame.groupby(shown, sort=True):
        groups.append(group)
        row: dict[str, object] = dict(zip(shown, key, strict=True))
        for column, title in columns.items():
            values = group[column] if column in group else pd.Series(dtype=float)
            row[title] = values.agg(how) if not values.isna().all() else math.nan
        named = group["limit"][group["limit"].fillna("") != ""]
        row["limit"] = named.mode().iloc[0] if not named.empty else "—"  # what most repetitions named
        if LIMIT_SHARE in row and "limit_share" in group and not named.empty:
            # one meaning: the share of the limit shown, over the repetitions that named it
            row[LIMIT_SHARE] = group.loc[named[named == row["limit"]].index, "limit_share"].mean()
        rows.append(row)
    rows = with_marks(rows, groups)
    return [markdown_table(pd.DataFrame(rows)), "", *mark_notes(str(r.get("marks", "")) for r in rows)]


def _pace_section(frame: pd.DataFrame) -> list[str]:
    """Per point and strategy: what Redis could do, what was done, and which side set the pace."""
    if "limit" not in frame.columns or not (frame["limit"].fillna("") != "").any():
        return []
    return [
        "### Which side set the pace",
        "",
        "Means over the repetitions. "
        "The Redis ceiling is 1e6 / Redis µs per job (INFO commandstats, producers' addJob included). "
        "It is the jobs/s Redis could do were its own time the only cost. "
        "The limit is the side that used the largest share of its capacity. "
        "That is the client (the busiest load process's CPU), or the network (round trips x rtt per "
        "connection). "
        "Or it is the job time (job-ms per slot), or Redis (its CPU). "
        "It is latency when no side used 70%: each connection waits on its exchanges. "
        "Then more jobs in flight would help; on a shared machine other processes may have taken the rest. "
        "The table shows the limit most repetitions named, and its mean share over those repetitions. "
        "Commands per job are counted at the client and cross-checked by the server. "
        "Round trips per job fall below 1 when one flush of a connection carries several jobs' calls. "
        "Locust/raw compares Locust's jobs/s with the same loops run without Locust (the raw driver).",
        "",
        *_point_table(frame, PACE_COLUMNS, "mean"),
    ]


def _fidelity_section(fidelity: Fidelity | None) -> list[str]:
    """The latency-fidelity check from meta.json: what the client library and the harness add."""
    if fidelity is None:
        return []
    rows = [
        ("redis-benchmark (C client)", fidelity.redis_benchmark_p50_us, fidelity.redis_benchmark_note or ""),
        ("bare redis-py, plain loop", fidelity.redis_py_p50_us, ""),
        ("the raw driver's timed path, plain loop", fidelity.raw_path_p50_us, ""),
        ("the same path under Locust", fidelity.locust_path_p50_us, fidelity.locust_note),
    ]
    table = pd.DataFrame(
        [(way, math.nan if p50 is None else p50, note) for way, p50, note in rows],
        columns=["way", "p50 µs", "note"],
    )
    lines = [
        "### Latency fidelity",
        "",
        f"The p50 of one trivial EVALSHA (`return 1`) at one client, {fmt(fidelity.calls)} calls "
        "each way, in the same run:",
        "",
        markdown_table(table),
        "",
    ]
    adds, over = fidelity.harness_adds_us, fidelity.locust_adds_us
    if adds is not None:
        over_raw = f", {over:+.0f} µs to its own path outside Locust" if over is not None else ""
        lines += [f"The harness under Locust adds {adds:+.0f} µs to the bare redis-py p50 "
                  f"(goal: at most {HARNESS_ADDS_GOAL_US:g} µs){over_raw}.", ""]  # fmt: skip
    return lines
