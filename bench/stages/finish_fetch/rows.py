"""What one run leaves in the run folder (its row, histograms, masters' and queues' rows), and the
stage's ledger, which holds them and its meta.json section and writes them."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness.profile import FinishFetchOptions
from bench.protocol.spread import slot_of
from bench.results import files, hdr
from bench.results.files import HDR_DIR, hdr_name
from bench.results.finish_fetch import (
    FinishFetchMeta,
    FinishFetchQueueRow,
    FinishFetchRow,
    FinishFetchShardRow,
    rtt_missed,
)
from bench.results.rows import RunIds
from bench.stages.finish_fetch.locust_trial import STAGE, TrialResult
from bench.stages.finish_fetch.plan import Point, point_id
from bench.stages.finish_fetch.reference import Reference
from bench.stages.finish_fetch.remeasure import Budget, clean_line
from bench.stages.finish_fetch.summary import TrialSummary
from bench.stages.finish_fetch.table import TableRow


def _round(value: Any, digits: int) -> float | None:
    return round(float(value), digits) if value is not None else None


def row_of(run: TrialResult, opts: FinishFetchOptions, ids: RunIds) -> FinishFetchRow:
    """The run's row of finish_fetch.csv; audit_ok only when the queue audit passed and
    every process's last report arrived (a run cut short is not audited as whole); rtt_missed by
    its rtt paid as written; the machine watch of its window last."""
    s = run.summary
    d = s.figures
    cycle = s.percentiles_us.get("cycle", {})
    e2e = s.percentiles_us.get("e2e", {})
    paid = _round(d.simulated_rtt_mean_ms, 3)  # judged as written, so a reader of the CSV agrees
    return FinishFetchRow(
        **_point(run, ids),
        producers=s.settings.producers,
        batch_size=s.settings.batch_size,
        payload_bytes=opts.payload_bytes,
        target_rate=s.settings.target_rate,
        warmup_s=opts.warmup_s,
        measure_s=opts.measure_s,
        duration_s=_round(s.window_s, 3),
        jobs=d.jobs,
        jobs_per_s=_round(d.jobs_per_s, 1),
        round_trips_per_job=_round(d.round_trips_per_job, 4),
        server_calls_per_job=_round(d.server_calls_per_job, 4),
        server_us_per_job=_round(d.server_us_per_job, 2),
        cycle_p50_us=cycle.get("p50"),
        cycle_p90_us=cycle.get("p90"),
        cycle_p99_us=cycle.get("p99"),
        cycle_p999_us=cycle.get("p999"),
        cycle_max_us=cycle.get("max"),
        e2e_p50_us=e2e.get("p50"),
        e2e_p99_us=e2e.get("p99"),
        loadgen_cpu_pct=_round(d.loadgen_cpu_pct, 1),
        saturated=d.saturated,
        audit_ok=run.audit.ok and s.complete,
        commands_per_job=_round(d.commands_per_job, 4),
        server_commands_per_job=_round(d.server_commands_per_job, 4),
        fetches_alone_per_job=_round(d.fetches_alone_per_job, 4),
        loadgen_cpu_us_per_job=_round(d.loadgen_cpu_us_per_job, 1),
        redis_cpu_pct=_round(d.redis_cpu_pct, 1),
        redis_ceiling_jobs_per_s=_round(d.redis_ceiling_jobs_per_s, 0),
        limit=d.limit,
        limit_share=_round(d.limit_share, 3),
        redis_mem_growth_bytes_per_1k_jobs=_round(d.redis_mem_growth_bytes_per_1k_jobs, 0),
        rtt_slept_ms=paid,
        rtt_missed=rtt_missed(run.point.rtt_ms, paid),
        regime=s.settings.regime,
        load=run.point.load or None,
        e2e_p999_us=e2e.get("p999"),
        wait_samples=d.wait_samples,
        wait_empty_samples=d.wait_empty_samples,
    )


def write_histograms(run_dir: Path, run: TrialResult) -> None:
    """Each merged histogram of the run as hdr/finish_fetch__<variant id>__r<rep>__<metric>.hdr."""
    for metric, encoded in run.summary.histograms.items():
        # "call:moveToFinished+fetch" -> "call-moveToFinished-fetch": safe in a file name, no "__"
        safe = "".join(ch if ch.isalnum() else "-" for ch in metric).strip("-")
        name = hdr_name(STAGE, run.variant_id, run.rep, safe)
        hdr.write_hdr(run_dir / HDR_DIR / name, hdr.decode(encoded))


def _point(run: TrialResult, ids: RunIds) -> dict[str, Any]:
    p = run.point
    return {
        "run_id": ids.run_id, "protocol": ids.protocol, "profile": ids.profile, "strategy": run.strategy,
        "rep": run.rep, "workers": p.workers, "concurrency": p.concurrency, "job_ms": p.job_ms,
        "rtt_ms": p.rtt_ms, "queues": p.queues, **(run.machine.row_fields() if run.machine else {}),
    }  # fmt: skip


def shard_rows(run: TrialResult, ids: RunIds) -> list[FinishFetchShardRow]:
    return [
        FinishFetchShardRow(
            **_point(run, ids),
            master=master,
            master_queues=len(m["queues"]),
            jobs=m["jobs"],
            jobs_per_s=_round(m["jobs_per_s"], 1),
            server_calls=m["server_calls"],
            server_usec=m["server_usec"],
            server_us_per_job=_round(m["server_us_per_job"], 2),
        )
        for master, m in run.summary.shards.get("masters", {}).items()
    ]


def queue_rows(run: TrialResult, ids: RunIds) -> list[FinishFetchQueueRow]:
    return [
        FinishFetchQueueRow(
            **_point(run, ids),
            queue=name,
            slot=slot_of(name),
            master=q["master"],
            jobs=q["jobs"],
            jobs_per_s=_round(q["jobs_per_s"], 1),
        )
        for name, q in run.summary.shards.get("queues", {}).items()
    ]


class Ledger:
    """The stage's rows and meta.json section: each trial's, raw run's and reference's part added,
    and every file it touches written again (atomically) before the stage goes on."""

    def __init__(self, run_dir: Path, opts: FinishFetchOptions, budget: Budget) -> None:
        self.out = files.Ledger(run_dir, FinishFetchMeta)
        self.opts = opts
        self.budget = budget  # the windows measured again (remeasure.py): meta.json's remeasure
        self.extras: list[tuple[float, float]] = []  # what only the table shows, a row
        self.errors: Counter[str] = Counter()  # failed calls by kind, over every trial
        self.audits: dict[str, str] = {}  # the verdict of each run whose audit did not pass
        self.clean: dict[str, int] = {}  # each point's clean windows so far, by point id

    @property
    def rows(self) -> list[FinishFetchRow]:
        return self.out.rows(FinishFetchRow)

    @property
    def shown(self) -> list[TableRow]:
        """finish_fetch.csv's rows, with what only the table shows: the rtt paid, the client's CPU."""
        return [TableRow(row, *extra) for row, extra in zip(self.rows, self.extras, strict=True)]

    def trial(self, run: TrialResult, row: FinishFetchRow) -> str:
        """A Locust trial's row, histograms, masters, queues, failed calls, audit and clean window,
        written; its point's clean windows, in words."""
        figures = run.summary.figures
        self.extras.append((figures.simulated_rtt_mean_ms, figures.loadgen_cpu_us_per_job))
        write_histograms(self.out.run_dir, run)
        self.out.add(FinishFetchRow, [row])
        ids = RunIds(row.run_id, row.profile, row.protocol)
        self.out.add(FinishFetchShardRow, shard_rows(run, ids))
        self.out.add(FinishFetchQueueRow, queue_rows(run, ids))
        self.errors.update(figures.errors_by_kind)
        if not row.audit_ok:
            self.audits[f"{run.variant_id} r{run.rep}"] = _audit_note(run)
        key = point_id(run.protocol, run.strategy, run.point.at_rate(0.0))
        self.clean[key] = self.clean.get(key, 0) + row.clean
        self.out.meta(
            errors=dict(sorted(self.errors.items())),
            audit_failures=self.audits,
            clean={key: clean_line(n, self.opts.repetitions) for key, n in self.clean.items()},
            remeasure={
                "windows_a_point": self.budget.windows_a_point,
                "budget_s": round(self.budget.seconds, 1),
                "extra_windows": sum(self.budget.spent.values()),
                "extra_s": round(self.budget.spent_s, 1),
            },
        )
        return clean_line(self.clean[key], self.opts.repetitions)

    def audit(self, run: str, verdict: str) -> None:
        """A raw run's or a reference's audit that did not pass, and its verdict, written."""
        self.audits[run] = verdict
        self.out.meta(audit_failures=self.audits)

    def beside(
        self, protocol: str, point: Point, strategy: str, raw: TrialSummary, reference: Reference
    ) -> None:
        """The raw driver's and the reference's figures on the Locust rows at their point and strategy."""
        self.out.put(
            FinishFetchRow, [_beside(r, protocol, point, strategy, raw, reference) for r in self.rows]
        )


def _beside(
    row: FinishFetchRow, protocol: str, point: Point, strategy: str, raw: TrialSummary, reference: Reference
) -> FinishFetchRow:
    """A Locust run's row with the raw driver's and the reference's figures at its point and strategy."""
    at = (row.workers, row.concurrency, row.job_ms, row.rtt_ms, row.queues)
    if (row.protocol, row.strategy, row.regime, at) != (protocol, strategy, point.regime, point.position):
        return row
    d = raw.figures
    jobs_per_s, cpu = _round(d.jobs_per_s, 1), _round(d.loadgen_cpu_us_per_job, 1)
    reference_cpu = _round(reference.cpu_us_per_job, 1)
    ratio = row.jobs_per_s / jobs_per_s if row.jobs_per_s is not None and jobs_per_s else None
    return dataclasses.replace(
        row,
        raw_jobs_per_s=jobs_per_s,
        raw_cpu_us_per_job=cpu,
        raw_round_trips_per_job=_round(d.round_trips_per_job, 4),
        raw_commands_per_job=_round(d.commands_per_job, 4),
        locust_raw_jobs_ratio=_round(ratio, 3),
        reference_jobs_per_s=_round(reference.jobs_per_s, 1),
        reference_cpu_us_per_job=reference_cpu,
        reference_round_trips_per_job=_round(reference.round_trips_per_job, 4),
        raw_reference_cpu_ratio=_round(cpu / reference_cpu, 3) if cpu is not None and reference_cpu else None,
    )


def _audit_note(run: TrialResult) -> str:
    """Why the run's audit_ok is false, in the audit's own words."""
    if not run.audit.ok:
        return run.audit.verdict
    missing = ", ".join(run.summary.missing_processes)
    cut = run.stopped or (f"no final report from {missing}" if missing else "the summary is incomplete")
    return f"cut short ({cut}); the queue itself: {run.audit.verdict}"
