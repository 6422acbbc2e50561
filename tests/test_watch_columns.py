"""The columns present in every CSV a stage writes: every row ends with the machine watch of its
window, and every load row also says whether its load process saturated and how much of a core
Redis used. A worker driver is judged saturated by the rule a Locust process is; compare, the
report and its findings read the columns, and a run from before them still loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from bench.harness.machine import SATURATED_CPU_PCT, MachineFields
from bench.paths import REPO
from bench.report.columns import clean
from bench.report.compare.metrics import compare_runs
from bench.report.findings import hazard as hazard_finding
from bench.report.load import load_run
from bench.report.sections.bullmq_worker import worker_table
from bench.report.sections.sweep import _hazard
from bench.results.rows import columns_of, typed_columns
from bench.results.stages import FILES
from bench.stages.bullmq_worker.plan import Point
from bench.stages.bullmq_worker.rows import row_of
from bench.stages.bullmq_worker.worker_process import WorkerProcessResult
from bench.stages.finish_fetch.loadstats import Aggregate
from bench.stages.finish_fetch.summary import ServerFigures, derive
from bench.stages.finish_fetch.trial_settings import TrialSettings
from bench.stages.finish_fetch.wait_list import WaitSamples

WATCH = tuple(MachineFields.__annotations__)  # foreign_cpu_pct, steal_pct, contended
# The files whose rows are a load process's window: each says whether it saturated, and Redis's CPU
LOAD_FILES = ("finish_fetch", "finish_fetch_servers", "bullmq_worker")
# A published run from before bullmq_worker.csv's load columns and sweep_hazard.csv's watch
BEFORE = REPO / "docs" / "results" / "20261205-122315-default"


def test_every_csv_a_stage_writes_ends_with_the_machine_watch() -> None:
    assert WATCH == ("foreign_cpu_pct", "steal_pct", "contended")
    assert len(FILES) >= 12
    for file in FILES:
        assert columns_of(file.row)[-len(WATCH) :] == WATCH, file.row.FILE
        # as pandas reads them: two float columns, a bool one
        assert {"foreign_cpu_pct", "steal_pct"} <= typed_columns(file.row, float), file.row.FILE
        assert "contended" in typed_columns(file.row, bool), file.row.FILE


def test_every_load_row_says_whether_it_saturated_and_how_much_of_a_core_redis_used() -> None:
    rows = {file.frame: file.row for file in FILES}
    for frame in LOAD_FILES:
        assert "saturated" in typed_columns(rows[frame], bool), frame
        assert "redis_cpu_pct" in typed_columns(rows[frame], float), frame


@pytest.mark.parametrize("cpu_pct", [50.0, SATURATED_CPU_PCT - 0.5, SATURATED_CPU_PCT, 130.0])
def test_a_worker_driver_saturates_where_a_locust_process_does(cpu_pct: float) -> None:
    """The driver's own CPU over its window, judged as finish_fetch judges its busiest load process."""
    window_s = 2.0
    driven = WorkerProcessResult(
        "node_worker", 8, 2000, window_s, cpu_pct / 100 * window_s, {"evalsha": 2000}, {"evalsha": 90_000},
        redis_cpu_s=1.5, errors=[],
    )  # fmt: skip
    row = row_of(Point("node_worker", 8), 1, driven, 0.0, True, 3000)
    locust = Aggregate()
    locust.reset(1)
    counters = {"jobs": 2000, "cpu_us": round(cpu_pct * window_s * 1e4), "window_us": round(window_s * 1e6)}
    assert locust.absorb("worker-1", "local", {"epoch": 1, "counters": counters})
    trial = TrialSettings("fused", 2, 1, 10, 50, 0.0, 0.5, window_s, 0.0, "q")
    assert row.saturated is derive(trial, locust, window_s, ServerFigures(), WaitSamples()).saturated
    assert row.saturated is (cpu_pct >= SATURATED_CPU_PCT)  # either verdict is met by some case
    assert row.redis_cpu_pct == 75.0  # 1.5 s of Redis's CPU in a 2 s window


def _with_new_columns(run: Path) -> None:
    """The run's bullmq_worker.csv and sweep_hazard.csv as the suite writes them now: one Node
    Worker repetition saturated, Redis's CPU on every row, BullMQ's hazard call contended."""
    workers = pd.read_csv(run / "bullmq_worker.csv")
    hit = (workers["driver"] == "node_worker") & (workers["concurrency"] == 50) & (workers["rep"] == 1)
    workers.insert(workers.columns.get_loc("foreign_cpu_pct"), "saturated", hit)
    workers.insert(workers.columns.get_loc("foreign_cpu_pct"), "redis_cpu_pct", 60.0)
    workers.to_csv(run / "bullmq_worker.csv", index=False)
    hazard = pd.read_csv(run / "sweep_hazard.csv")
    hazard = hazard.assign(foreign_cpu_pct=[35.0, 2.0], steal_pct=0.0, contended=[True, False])
    hazard.to_csv(run / "sweep_hazard.csv", index=False)


def test_a_run_from_before_the_columns_loads_and_compare_and_the_report_read_them(tmp_path: Path) -> None:
    before = load_run(BEFORE)
    assert set(before.missing_columns["bullmq_worker"]) == {"saturated", "redis_cpu_pct"}
    assert set(before.missing_columns["sweep_hazard"]) == set(WATCH)
    for frame in ("bullmq_worker", "sweep_hazard"):  # unrecorded: nothing marks a row not clean
        assert clean(before.frames[frame]).all(), frame
    now = tmp_path / BEFORE.name
    shutil.copytree(BEFORE, now)
    _with_new_columns(now)
    after = load_run(now)
    assert not after.missing_columns.get("bullmq_worker") and not after.missing_columns.get("sweep_hazard")
    assert (~clean(after.frames["bullmq_worker"])).sum() == 1
    assert list(clean(after.frames["sweep_hazard"])) == [False, True]
    # compare reads the flags: the saturated repetition and the contended call are named
    read = ("bullmq_worker", "sweep_hazard")
    compared = compare_runs({f: before.frames[f] for f in read}, {f: after.frames[f] for f in read})
    notes = compared.rows.groupby("stage")["note"].agg(set)
    assert any("saturated in B" in n for n in notes["bullmq_worker"]), notes["bullmq_worker"]
    assert any("contended in B" in n for n in notes["sweep_hazard"]), notes["sweep_hazard"]
    # the report: Redis's CPU beside the per-job figures, a saturated repetition in its reps cell
    table = worker_table(after.frames["bullmq_worker"]).set_index(["concurrency", "worker"])
    assert set(table["Redis CPU %"]) == {"60"}
    assert table.loc[(50, "Node Worker"), "reps"] == "2 (1 saturated)"
    assert set(worker_table(before.frames["bullmq_worker"])["Redis CPU %"]) == {"—"}
    hazard = "\n".join(_hazard(after))
    assert "1 call(s) contended" in hazard and "| **contended** |" in hazard
    # and the findings quote no contended call: the run from before has its figure, this one none
    quoted, withheld = hazard_finding(before), hazard_finding(after)
    assert quoted is not None and "its client gave up after 7.6 s" in " ".join(quoted.sentences)
    assert withheld is not None
    assert withheld.sentences == ("BullMQ's stalled check was not measured cleanly.",)
