"""The report's opening: what the run found, in words; and the model beside the measured jobs/s."""

from __future__ import annotations

import math

import pandas as pd

from bench.report.columns import closed_loop
from bench.report.findings import findings_lines
from bench.report.load import RunData
from bench.report.markdown import figure, fmt, markdown_table
from bench.report.model import MISS, TERMS, Machine, machine_of, misses, modelled
from bench.report.plots.finish_fetch import measured_against_predicted
from bench.report.predict import grid, what_if


def findings_section(data: RunData) -> list[str]:
    if not (lines := findings_lines(data)):
        return []
    return [
        "## What we found",
        "",
        "Each sentence is made by a rule from this run's clean cells.",
        "A cell that was contended or saturated gives no figure here.",
        "The glossary in docs/method.md defines the terms.",
        "",
        *lines,
        "",
    ]


def _beside(machine: Machine) -> str:
    """What the client's processes share their cores with, in one sentence."""
    if not math.isfinite(machine.cores):
        return "the run does not say its machine's cores."
    if not machine.redis_beside:
        return f"together they use {machine.cores:g} cores at most; Redis ran on another machine."
    return f"together they use what Redis leaves of the machine's {machine.cores:g} cores."


def model_section(data: RunData) -> list[str]:
    """Measured against predicted jobs/s, point by point; the misses named; the what-if table."""
    if (frame := data.frame("finish_fetch")) is None:
        return []
    frame = closed_loop(frame)
    if frame.empty:  # an open-loop run only: the model has no row to explain
        return []
    machine = machine_of(data.meta)
    table = modelled(frame, machine)
    if table["predicted_jobs_per_s"].isna().all():
        return []
    # a held job is a point of its own: its rows are never pooled with the no-op job's
    keys = ["protocol", "strategy", "workers", "concurrency", "rtt_ms"]
    keys += ["job_ms"] if "job_ms" in table else []
    rows = []
    for key, group in table.groupby(keys, sort=True):
        ok = group[group["clean"]]
        use = ok if not ok.empty else group
        rows.append({
            **dict(zip(keys, key, strict=True)),
            "slots": float(key[2]) * float(key[3]),  # type: ignore[arg-type]  # workers x concurrency
            "rtt paid ms": use["rtt_paid_ms"].median(),
            "round trips per job": use["round_trips_per_job"].median(),
            "load processes": use["load_processes"].median(),
            "client µs per job": use["loadgen_cpu_us_per_job"].median(),
            "client cores": use["client_cores"].median(),
            "Redis CPU µs per job": use["redis_us"].median(),
            "Redis ceiling jobs/s": 1e6 / use["redis_us"].median(),
            "measured jobs/s": use["jobs_per_s"].median(),
            "predicted jobs/s": use["predicted_jobs_per_s"].median(),
            "error": f"{use['model_error'].median():+.0%}",
            "largest term": TERMS.get(str(use["model_term"].mode().iloc[0]), "—"),
            "clean reps": f"{len(ok)} of {len(group)}",
        })  # fmt: skip
    missed = misses(table)
    clean_rows = table[table["clean"]]
    worst = clean_rows["model_error"].abs().max() if not clean_rows.empty else float("nan")
    lines = [
        "### Measured against predicted",
        "",
        "The model is the closed-loop law of each row's own parts.",
        "A worker connection is one customer of the loop.",
        "An exchange waits the rtt paid and the job time, then queues for the client's CPU and for Redis.",
        "Its parts: worker connections, round trips per job, the rtt paid, the job time, "
        "the client's CPU per job, its load processes and Redis's CPU per job.",
        f"A load process uses one core at most; {_beside(machine)}",
        "Mean-value analysis of that loop predicts the jobs/s. Nothing is fitted.",
        f"Over the clean rows the worst error is {fmt(100 * worst)}%; "
        f"{int((clean_rows['model_error'].abs() <= MISS).sum())} of {len(clean_rows)} are within {MISS:.0%}.",
        "",
    ]
    if missed.empty:
        lines += [f"No clean row is missed by more than {MISS:.0%}.", ""]
    else:
        lines += [f"Clean rows missed by more than {MISS:.0%}:", ""]
        for row in missed.itertuples():
            where = f"{row.protocol} {row.strategy}, {row.concurrency:g} in flight, rtt {row.rtt_ms:g} ms"
            term = TERMS.get(str(row.model_term), str(row.model_term))
            lines.append(
                f"- {where}, rep {row.rep:g}: {row.model_error:+.0%}; the term that disagrees is {term}."
            )
        lines.append("")
    lines += [markdown_table(pd.DataFrame(rows)), ""]
    lines += figure(measured_against_predicted(table, data.path), "no predicted jobs/s")
    measured = set(
        zip(frame["concurrency"].fillna(1).astype(int), frame["rtt_ms"].astype(float), strict=True)
    )
    guesses = what_if(data, [p for p in grid(data) if (p.concurrency, p.rtt_ms) not in measured])
    if not guesses.empty:
        lines += [
            "### What fusing buys at other points (predicted)",
            "",
            "The same model, at points this run did not measure.",
            "Each line takes its parts from the measured cell it names.",
            "`echomq-bench predict RUN --rtt-ms 5 --concurrency 16` prints any other point.",
            "",
            markdown_table(guesses),
            "",
        ]
    return lines
