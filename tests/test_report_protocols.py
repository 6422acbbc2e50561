"""The report and compare with two protocols: the protocol in every table and figure, rows matched by it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from bench.report.compare.metrics import compare_runs, point_label
from bench.report.load import load_run
from bench.report.plots.style import colour, line_style, ordered, protocol_labelled, split_label
from bench.report.render import write_report
from bench.report.sections.script_cost import (
    commands_text,
    parse_commands,
    script_cost_lines,
    script_cost_table,
)
from bench.results.bullmq_worker import BullmqWorkerRow
from bench.results.files import write_csv, write_json
from bench.results.finish_fetch import FinishFetchRow
from bench.results.race import RaceRow
from bench.results.rows import columns_of, row_dict
from bench.results.script_cost import ScriptCostRow
from bench.results.sweep import SweepCostRow, SweepHazardRow

PNG = b"\x89PNG\r\n\x1a\n"
RUN = "20240101-000000-smoke"


def finish_rows(scale: float = 1.0) -> list[FinishFetchRow]:
    base = FinishFetchRow(
        run_id="20240101-000000-smoke", protocol="echomq", profile="smoke",
        strategy="fused", rep=1, workers=2, producers=1, rtt_ms=0.0, batch_size=20, payload_bytes=0,
        target_rate=0.0, warmup_s=0.3, measure_s=1.0, duration_s=1.0, jobs=1000,
        jobs_per_s=1000.0, round_trips_per_job=1.0, server_calls_per_job=1.0, server_us_per_job=40.0,
        cycle_p50_us=200, cycle_p90_us=300, cycle_p99_us=400, cycle_p999_us=500, cycle_max_us=600,
        e2e_p50_us=900, e2e_p99_us=2000, loadgen_cpu_pct=50.0, saturated=False, audit_ok=True,
    )  # fmt: skip
    rows = []
    for rep, wobble in enumerate((1.0, 1.01, 0.99), 1):
        for protocol, speed in (("echomq", 1.0), ("bullmq", 0.8 * scale)):
            for variant, share in (("fused", 1.6), ("two_call", 1.0)):
                rate = 1000.0 * share * speed * wobble
                rows.append(
                    dataclasses.replace(base, strategy=variant, rep=rep, jobs_per_s=rate, protocol=protocol)
                )
    return rows


def write_run(path: Path, bullmq_scale: float = 1.0) -> Path:
    path.mkdir(parents=True)
    write_json(
        path / "meta.json",
        {
            "run_id": path.name, "profile": "smoke", "complete": True,
            "stages_planned": ["finish_fetch", "sweep", "race", "bullmq_worker", "report"],
            "protocols": {"echomq": {"version": None}, "bullmq": {"version": "3.4.4"}},
            "bullmq_worker": {
                "window_from": 1000, "window_s": 1.0, "options": "BullMQ Worker defaults: lock 30 s",
                "python_bullmq": "3.4.4",
                "node": {"bullmq": "6.7.0", "ioredis": "5.11.1", "node": "20.20.2",
                         "scripts_called": {"moveToFinished-14.lua": "69666e69dd"}},
            },
        },
    )  # fmt: skip
    write_csv(path / "finish_fetch.csv", columns_of(FinishFetchRow), map(row_dict, finish_rows(bullmq_scale)))
    sweep = [
        SweepCostRow(
            "20240101-000000-smoke",
            protocol,
            "smoke",
            variant,
            "all_stalled",
            size,
            100,
            500.0,
            reps=3,
            sweep_ms_median=size * k,
            sweep_ms_stdev=0.01,
            us_per_active_job=1.0,
            round_trips=1.0,
            server_us=100.0,
            hold_ms_max=1.0,
            probe_p99_us=100,
            probe_max_us=200,
            probe_busy=0,
        )
        for size in (10, 100, 1000)
        for protocol, variant, k in (
            ("echomq", "atomic", 0.01),
            ("echomq", "app_side", 0.2),
            ("bullmq", "atomic", 0.012),
        )
    ]
    write_csv(path / "sweep_cost.csv", columns_of(SweepCostRow), map(row_dict, sweep))
    race = [
        RaceRow(RUN, "echomq", "smoke", "atomic", 4, 100, 0.0, 2, 50, 1000, 1, 0, 0, 0, 0),
        RaceRow(RUN, "echomq", "smoke", "app_side", 4, 100, 0.0, 2, 50, 1000, 1, 90, 30, 0, 0),
        RaceRow(RUN, "bullmq", "smoke", "atomic", 4, 100, 0.0, 2, 50, 1000, 1, 0, 0, 0, 0),
    ]
    write_csv(path / "race.csv", columns_of(RaceRow), map(row_dict, race))
    ok = True
    workers = [
        BullmqWorkerRow("bullmq", driver, conc, 0, rep, 4000, 2.0, rate * bullmq_scale, cpu, calls, 60.0, ok)
        for rep in (1, 2)
        for driver, conc, rate, cpu, calls in (
            ("bullmq_worker", 1, 2000.0, 450.0, 2.0), ("bullmq_worker", 8, 2200.0, 400.0, 2.0),
            ("fused", 1, 5400.0, 120.0, 1.0), ("two_call", 1, 3300.0, 180.0, 2.0),
        )
    ]  # fmt: skip
    workers += [  # BullMQ's Node package, manual processing: fused over two-call 1.60, then 1.50
        BullmqWorkerRow("bullmq", driver, 1, 0, rep, 20000, 2.0, rate * bullmq_scale, 60.0, calls, 50.0, ok,
                        redis_cpu_pct=45.0)
        for driver, calls, rates in (("node_manual_fused", 1.0, (8000.0, 9000.0)),
                                     ("node_manual_two_call", 2.0, (5000.0, 6000.0)))
        for rep, rate in zip((1, 2), rates, strict=True)
    ]  # fmt: skip
    write_csv(path / "bullmq_worker.csv", columns_of(BullmqWorkerRow), map(row_dict, workers))
    hazard = [
        SweepHazardRow("bullmq", "bullmq", 40000, 5.0, 7.4, 2, 0, 310, 7_000_000, 0, 40000, False, ""),
        SweepHazardRow(
            "bullmq",
            "suite",
            40000,
            5.0,
            5.0,
            1,
            0,
            300,
            6_900_000,
            None,
            40000,
            False,
            "TimeoutError: Timeout reading from socket",
        ),
    ]
    write_csv(path / "sweep_hazard.csv", columns_of(SweepHazardRow), map(row_dict, hazard))
    costs = [
        ScriptCostRow(RUN, protocol, "smoke", step, rep, 200, us + extra_us, n + extra_n, commands)
        for rep in (1, 2)
        for protocol, extra_us, extra_n, more in (
            ("echomq", 0.0, 0, ""),
            ("echomq-deadline", 4.0, 2, ", zadd 1, zrem 1"),
        )
        for step, us, n, commands in (
            ("fused cycle", 30.0, 9, "evalsha 1, hset 3, lmove 1, set 1" + more),
            ("two-call cycle", 40.0, 10, "evalsha 2, hset 3, lmove 1, set 1" + more),
        )
    ]
    write_csv(path / "script_cost.csv", columns_of(ScriptCostRow), map(row_dict, costs))
    return path


@pytest.mark.slow
def test_every_table_and_figure_shows_both_protocols(tmp_path: Path, figures_undrawn: None):
    run = write_run(tmp_path / "20261201-100000-smoke")
    text = write_report(run).read_text()
    assert "| protocols | echomq (lua/), bullmq 3.4.4 (its package's Lua) |" in text
    assert "BullMQ Worker's default options: lock 30 s, every completed job kept" in text
    assert "| protocol | strategy | regime | workers | rtt_ms |" in text  # per point, the protocol first
    assert "| echomq | steady | 2 | 0 | 1.60 |" in text and "| bullmq | steady | 2 | 0 | 1.60 |" in text
    assert "| bullmq | atomic | all_stalled |" in text  # the slope table
    assert "## BullMQ's own workers against the suite's loops on BullMQ's scripts" in text
    # one table: a row a concurrency and driver, fused over two-call paired by repetition
    assert (
        "| 1 | Node manual fused | 8,500 [8,000-9,000] | 1.00 | 50.0 | 60 | 45 | 1.55 [1.50-1.60] | 2.00 "
        "| 2 |" in text
    )
    assert "| 1 | suite fused loop | 5,400 [5,400-5,400] | 1.00 | 60.0 | 120 | — | 1.64 [1.64-1.64] |" in text
    assert "| 8 | Python Worker | 2,200 [2,200-2,200] | 2.00 |" in text
    assert "BullMQ's Node package 6.7.0 (ioredis 5.11.1, node 20.20.2); its Python port 3.4.4." in text
    assert (
        "- bullmq, 40,000 stalled, timeout 5 s: 2 executions and 0 refused for one call; it returned 0 ids"
        in text
    )
    assert "- suite, 40,000 stalled, timeout 5 s: 1 execution and" in text and "TimeoutError" in text
    assert "### The hot path's script cost: each protocol's scripts alone" in text
    line = (
        "- **echomq-deadline**, fused cycle: Redis µs a job beyond echomq: +4.00 µs [+4.00 to +4.00], "
        "too few repetitions to judge.\n"
        "  Its commands beyond echomq: zadd +1, zrem +1."
    )
    assert line in text
    assert "Absent from this run" not in text
    for plot in ("finish_fetch_jobs.png", "sweep_time.png", "race_anomalies.png", "bullmq_worker_jobs.png"):
        assert (run / plot).read_bytes().startswith(PNG), plot
        assert f"]({plot})" in text


def test_compare_matches_rows_by_protocol(tmp_path: Path):
    a = load_run(write_run(tmp_path / "a"))
    b = load_run(write_run(tmp_path / "b", bullmq_scale=1.2))  # only bullmq's numbers change
    rows = compare_runs(a.frames, b.frames).rows.set_index(["stage", "point", "metric"])
    assert rows.loc[("finish_fetch", "strategy=fused workers=2 rtt_ms=0", "jobs_per_s"), "verdict"] == "same"
    bullmq = rows.loc[("finish_fetch", "protocol=bullmq strategy=fused workers=2 rtt_ms=0", "jobs_per_s")]
    assert bullmq["verdict"] == "better" and bullmq["ratio"] == pytest.approx(1.2)
    worker = rows.loc[("bullmq_worker", "protocol=bullmq driver=fused", "jobs_per_s")]
    assert worker["ratio"] == pytest.approx(1.2)
    assert (
        "sweep",
        "protocol=bullmq variant=atomic scenario=all_stalled active_size=1000",
        "sweep_ms_median",
    ) in rows.index
    assert (
        "sweep_hazard",
        "protocol=bullmq client=bullmq stalled_jobs=40000",
        "server_executions",
    ) in rows.index


def test_a_run_without_bullmq_says_its_worker_stage_did_not_run(tmp_path: Path, figures_undrawn: None):
    run = write_run(tmp_path / "r")
    (run / "bullmq_worker.csv").unlink()
    write_json(
        run / "meta.json", {"run_id": "r", "complete": True, "protocols": {"echomq": {"version": None}}}
    )
    assert (
        "stage bullmq_worker: not run (bullmq is not one of the run's protocols)"
        in write_report(run).read_text()
    )


def test_labels_colours_and_order_tell_protocols_apart():
    assert split_label("bullmq.fused-w4-rtt0") == ("bullmq", "fused-w4-rtt0")
    assert split_label("fused-w4-rtt0.5") == ("echomq", "fused-w4-rtt0.5")  # a dotted rtt is no protocol
    assert colour("bullmq.fused") != colour("fused") and colour("fused-w2-rtt0") == colour("fused")
    assert (line_style("atomic"), line_style("bullmq.atomic")) == ("-", "--")
    # A hyphenated protocol leads a known variant; its own shade and line, not bullmq's nor echomq's.
    assert split_label("echomq-deadline.atomic") == ("echomq-deadline", "atomic")
    assert split_label("echomq-deadline.fused-w4-rtt0.5") == ("echomq-deadline", "fused-w4-rtt0.5")
    assert line_style("echomq-deadline.atomic") not in ("-", "--")
    assert len({colour("atomic"), colour("bullmq.atomic"), colour("echomq-deadline.atomic")}) == 3
    assert ordered(["echomq-deadline.atomic", "bullmq.atomic", "atomic"]) == [
        "atomic", "bullmq.atomic", "echomq-deadline.atomic",
    ]  # fmt: skip
    assert ordered(["bullmq.atomic", "app_side", "atomic", "bullmq.fused", "fused"]) == [
        "fused", "bullmq.fused", "atomic", "bullmq.atomic", "app_side",
    ]  # fmt: skip
    assert point_label(("protocol", "variant"), ("echomq", "atomic")) == "variant=atomic"
    assert point_label(("protocol", "variant"), ("bullmq", "atomic")) == "protocol=bullmq variant=atomic"
    import pandas as pd

    frame = pd.DataFrame({"protocol": ["echomq", "bullmq"], "variant": ["atomic", "atomic"]})
    assert list(protocol_labelled(frame)["variant"]) == ["atomic", "bullmq.atomic"]


def test_the_throughput_plot_names_each_protocols_ratio_as_the_median_of_pairs():
    """The figure's ratio lines use the one headline definition (median of the repetition pairs
    [min-max]), a line a protocol, echomq's first; a ratio of means would read 2.00 here."""
    import pandas as pd

    from bench.report.plots.finish_fetch import _ratio_texts

    point = {"workers": 4, "queues": 1, "concurrency": 1, "job_ms": 0.0, "rtt_ms": 1.0}
    fused = {1: 100.0, 2: 300.0, 3: 200.0}
    two_call = {1: 50.0, 2: 100.0, 3: 100.0}  # pairs: 2.0, 3.0, 2.0 -> median 2.0; means: 2.4
    rows = [
        {**point, "protocol": protocol, "strategy": label, "rep": rep, "jobs_per_s": value}
        for protocol, prefix in (("bullmq", "bullmq."), ("echomq", ""))
        for strategy, values in (("fused", fused), ("two_call", two_call))
        for rep, value in values.items()
        for label in [prefix + strategy]
    ]
    texts = _ratio_texts(pd.DataFrame(rows))
    assert texts == [
        "echomq: fused/two_call 2.00 [2.00-3.00]",
        "bullmq: fused/two_call 2.00 [2.00-3.00]",
    ]


def test_a_script_cost_whose_rounds_differ_in_sign_is_same_within_noise_with_its_range():
    """A run pair: the deadline cycle +8 µs in one run, -0.3 µs in another. A script cost is
    the rounds' median difference with its [min-max] and a verdict, never a bare difference."""
    rows = [
        {"step": "fused cycle", "protocol": protocol, "rep": rep, "server_us_per_call": us,
         "commands": '{"evalsha": 1}'}
        for rep, (base, deadline) in enumerate(((40.0, 48.1), (44.0, 43.7), (41.0, 39.0)), 1)
        for protocol, us in (("echomq", base), ("echomq-deadline", deadline))
    ]  # fmt: skip
    table = script_cost_table(pd.DataFrame(rows))
    line, _ = script_cost_lines(table)
    assert "fused cycle: Redis µs a job beyond echomq: -0.30 µs [-2.00 to +8.10], same within noise" in line
    # A clear script cost, every round dearer beyond 5%: "more".
    dearer = [
        {**r, "protocol": protocol, "server_us_per_call": r["server_us_per_call"] * factor}
        for r in rows
        if r["protocol"] == "echomq"
        for protocol, factor in (("echomq", 1.0), ("echomq-deadline", 1.2))
    ]
    line, commands = script_cost_lines(script_cost_table(pd.DataFrame(dearer)))
    assert line.endswith("], more.") and commands.endswith(": same.")


def test_the_commands_cell_is_a_json_object_and_an_older_runs_text_still_reads():
    row = ScriptCostRow(
        run_id="r", protocol="echomq", profile="p", step="fused cycle", rep=1, calls=2,
        server_us_per_call=1.0, commands_per_call=1.5, commands={"evalsha": 1, "zadd": 0.5},
    )  # fmt: skip
    cell = row_dict(row)["commands"]
    assert json.loads(cell) == {"evalsha": 1, "zadd": 0.5}
    assert parse_commands(cell) == {"evalsha": 1.0, "zadd": 0.5}
    assert parse_commands("evalsha 1, zadd 0.5") == parse_commands(cell)  # a run from before
    assert commands_text(cell) == "evalsha 1, zadd 0.5"  # as the report's table shows it
