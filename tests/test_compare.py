"""compare's verdicts need evidence: an A/A comparison on a real smoke run, single-sample metrics,
significance over repetitions, contended points, and what it says about the two machines.

The A/A test makes one real run (smoke's stages, smaller) and compares it with a twin in which
every measured value has moved against it by one standard error of its own
repetitions (and every once-per-point value by half as much again): noise of
the size the run itself shows, always in the unfavourable direction. That must
give no `worse`, and a point the twin marks contended gets no verdict however
far it moved.

Why a twin, not two real back-to-back runs, now that every window carries the
contention flag: tried on this shared 2-core machine (three back-to-back pairs
of smoke runs, 382-410 rows each), every point of every run was contended
(foreign CPU 85-150% of a core), so every row was `unstable` and the test
asserted nothing; the flag makes a real A/A pass on a loaded machine, but
vacuously. On a quiet machine it would test something compare cannot see: a
sweep point's spread is pyperf's values inside one process against one
redis-server, far tighter than the change between two runs' processes and
servers, so a quiet real A/A fails on process-to-process variance (147
`worse` in one), not on compare. And a second smoke run doubles the suite's
longest fixture. The twin tests compare's rule exactly, on real data, whatever
the machine does: its points are judged as if quiet (the run's own contended
flags cleared in both), so a loaded machine cannot make the test vacuous.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.paths import REPO
from bench.report.cli import compare_main, learn_main
from bench.report.compare.learnt import LEARNT_FILE, Learnt, learn, read_learnt, write_learnt
from bench.report.compare.metrics import STAGE_METRICS, compare_runs
from bench.report.compare.page import context_lines
from bench.report.load import FRAMES, load_run
from bench.report.publish import AA_DIR
from bench.report.verdict import NOT_JUDGED, SHOWN, Sample, verdict
from bench.results.meta import RunMeta
from tests.helpers import finish_fetch_row, idle_hog, steady

STAGES = "finish_fetch,script_cost,sweep,race"  # the report stage adds nothing to compare
FIXTURES = Path(__file__).parent / "data"


# ---- the significance test -------------------------------------------------------------------


def test_a_thirty_percent_drop_over_three_clean_windows_a_side_is_worse() -> None:
    assert verdict(steady(1000), steady(700), higher_is_better=True) == "worse"
    assert verdict(steady(100), steady(130), higher_is_better=False) == "worse"
    assert verdict(steady(100), steady(114), higher_is_better=False) == "same"  # within 15%
    # the same drop measured with pyperf's median ± stdev over three repetitions
    assert verdict(Sample.with_stdev(10.0, 0.2, n=3), Sample.with_stdev(13.0, 0.2, n=3), False) == "worse"


def test_a_change_beyond_the_learnt_drift_is_claimed_only_beyond_both_runs_spread() -> None:
    noisy, half = Sample.of([700, 1000, 1300]), Sample.of([350, 500, 650])
    assert half.hi < noisy.lo  # ranges apart: beyond both runs' spread
    assert verdict(noisy, half, higher_is_better=True) == "worse"
    assert verdict(half, noisy, higher_is_better=True) == "better"
    # +20%, ranges overlapping: the runs' own spread could make it
    assert verdict(Sample.of([100, 108, 92]), Sample.of([120, 135, 105]), higher_is_better=False) == "same"
    # -12% with ranges apart: within a learnt drift of 15%, beyond one of 10%
    assert verdict(steady(1000), steady(880), higher_is_better=True) == "same"
    assert verdict(steady(1000), steady(880), higher_is_better=True, beyond=0.10) == "worse"


def test_a_timed_figure_on_fewer_than_three_clean_windows_a_side_is_never_judged() -> None:
    # a halving, tight: worse on clean windows; not judged where either side's are not clean
    assert verdict(steady(1000), steady(500), True) == "worse"
    for clean in ((True, False), (False, True), (False, False)):
        assert verdict(steady(1000), steady(500), True, clean=clean) == NOT_JUDGED
    two = Sample.of([1000, 1010])
    assert verdict(two, Sample.of([500, 505]), True) == NOT_JUDGED  # two windows: too few
    assert verdict(Sample.of([5.0]), Sample.of([10.0]), False) == NOT_JUDGED
    # a count the code fixes is judged however busy the machine was
    assert verdict(Sample.of([1.0]), Sample.of([2.0]), False, exact=True, clean=(False, False)) == "worse"


def sweep_row(**values: object) -> dict[str, object]:
    row: dict[str, object] = {"variant": "atomic", "scenario": "healthy", "active_size": 1000, "reps": 3}
    row.update(sweep_ms_median=2.0, sweep_ms_stdev=0.02, us_per_active_job=2.0, round_trips=1)
    row.update(server_us=1800, hold_ms_max=2.1, probe_p99_us=90, probe_max_us=2200, probe_busy=0)
    row.update(values)
    return row


def test_compare_judges_a_sweep_time_and_shows_its_maxima_and_single_values() -> None:
    a = {"sweep": pd.DataFrame([sweep_row()])}
    b = {"sweep": pd.DataFrame([sweep_row(sweep_ms_median=4.8, us_per_active_job=4.8, hold_ms_max=9.0,
                                          probe_max_us=9000, server_us=2500, round_trips=2)])}  # fmt: skip
    rows = compare_runs(a, b, Learnt()).rows.set_index("metric")
    assert rows.loc["sweep_ms_median", "verdict"] == "worse"  # three repetitions, ranges apart
    assert "us_per_active_job" not in rows.index  # the sweep time over the size: judged once
    for maximum in ("hold_ms_max", "probe_max_us"):
        assert (rows.loc[maximum, "verdict"], rows.loc[maximum, "kind"]) == (SHOWN, "maximum"), maximum
    for once in ("server_us", "round_trips", "probe_p99_us"):  # one value a point: one event
        assert (rows.loc[once, "verdict"], rows.loc[once, "kind"]) == (SHOWN, "once"), once
    # The same B, contended: nothing is judged, and the note says why.
    b["sweep"]["contended"] = True
    flagged = compare_runs(a, b, Learnt()).rows.set_index("metric")
    assert flagged.loc["sweep_ms_median", "verdict"] == NOT_JUDGED
    assert set(flagged["verdict"]) == {NOT_JUDGED, SHOWN}
    assert flagged["note"].str.contains("contended in B").all()


def _cycles(maxima: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dataclasses.asdict(finish_fetch_row(rep=n + 1, load=0.0, cycle_max_us=m))
            for n, m in enumerate(maxima)
        ]
    )


def test_a_windows_slowest_cycle_is_shown_and_never_judged() -> None:
    """One event sets a maximum: an A/A pair of smoke runs moved one x3.35."""
    a = _cycles([5500, 5563, 5620])
    for factor in (1.54, 3.35, 10.0, 0.1):
        b = _cycles([m * factor for m in (5500, 5563, 5620)])
        rows = compare_runs({"finish_fetch": a}, {"finish_fetch": b}, Learnt()).rows.set_index("metric")
        assert rows.loc["cycle_max_us", "verdict"] == SHOWN, factor
        assert rows.loc["cycle_max_us", "note"].startswith("a maximum: one event")


def test_a_short_sweep_that_moved_by_under_2_ms_is_the_same_and_a_long_one_doubled_is_worse() -> None:
    """Two real quiet smoke runs moved a 0.2 ms sweep to 0.42 ms and a 3.9 ms one to 2.1 ms."""
    short = [sweep_row(active_size=10, sweep_ms_median=0.206, sweep_ms_stdev=0.02)]
    moved = [sweep_row(active_size=10, sweep_ms_median=0.420, sweep_ms_stdev=0.1)]
    rows = compare_runs({"sweep": pd.DataFrame(short)}, {"sweep": pd.DataFrame(moved)}).rows
    assert rows.set_index("metric")["verdict"]["sweep_ms_median"] == "same"
    long = [sweep_row(active_size=10_000, sweep_ms_median=20.0, sweep_ms_stdev=0.2)]
    doubled = [sweep_row(active_size=10_000, sweep_ms_median=40.0, sweep_ms_stdev=0.4)]
    rows = compare_runs({"sweep": pd.DataFrame(long)}, {"sweep": pd.DataFrame(doubled)}).rows
    assert rows.set_index("metric")["verdict"]["sweep_ms_median"] == "worse"


# ---- The hot path's script cost (script_cost.csv) ----------------------------------------


def test_script_cost_against_itself_is_same_at_every_step_and_protocol() -> None:
    a = load_run(FIXTURES / "20240501-100000-smoke").frames
    rows = compare_runs(a, a).rows
    costs = rows[rows["stage"] == "script_cost"]
    assert set(costs["metric"]) == {"server_us_per_call", "commands_per_call"}
    assert len(set(costs["point"])) == 6  # two protocols, three steps
    assert "protocol=echomq-deadline step=extendLock" in set(costs["point"])
    assert set(costs["verdict"]) == {"same"}


def test_script_cost_is_judged_over_its_repetitions_and_a_single_one_is_shown() -> None:
    a = load_run(FIXTURES / "20240501-100000-smoke").frames
    b = load_run(FIXTURES / "20240502-100000-smoke").frames
    costs = compare_runs(a, b).rows.set_index(["stage", "point", "metric"])["verdict"]
    deadline_fused = ("script_cost", "protocol=echomq-deadline step=fused cycle", "server_us_per_call")
    assert costs[deadline_fused] == "worse"  # +30% over three tight repetitions
    # One repetition each: the same +30% is no verdict; a command count still is.
    judged = compare_runs(first_rep_only(a), first_rep_only(b)).rows.set_index(["point", "metric"])
    assert judged.loc[deadline_fused[1:], "verdict"] == SHOWN
    two_call = ("protocol=echomq-deadline step=two-call cycle", "commands_per_call")
    assert judged.loc[two_call, "verdict"] == "worse"


def first_rep_only(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The run's frames with script_cost cut to its first repetition."""
    return {"script_cost": frames["script_cost"].query("rep == 1")}


# ---- the machines and packages, before any verdict --------------------------------------------


def test_context_lines_show_calibrations_side_by_side_and_name_changed_packages() -> None:
    meta_a = {
        "calibration": {"python_loop_ns": 40.0, "ping_p50_us": 50.0, "evalsha_us": 3.0},
        "packages": {"redis": "5.0.1", "locust": "2.24.0", "gone": "1.0"},
        "system": {"aslr": "full (2)", "cpu_governor": "performance"},
    }
    meta_b = {
        "calibration": {"python_loop_ns": 60.0, "ping_p50_us": 51.0, "evalsha_us": 3.0},
        "packages": {"redis": "5.1.0", "locust": "2.24.0", "new": "0.1"},
        "system": {"aslr": "full (2)", "cpu_governor": "powersave"},
        "machine_before": {"contended": True, "busiest": ["pid 7 python uses 85% of a core"]},
    }
    text = "\n".join(context_lines(RunMeta.from_json(meta_a), RunMeta.from_json(meta_b)))
    assert "| calibration | A | B | B/A |" in text
    assert "| python_loop_ns | 40 | 60 | 1.5 |" in text
    assert "| ping_p50_us | 50 | 51 | 1.02 |" in text
    assert "the machines (or moments) differ: python_loop_ns x1.50" in text
    assert "package changed: redis 5.0.1 -> 5.1.0" in text
    assert "package only in A: gone 1.0" in text and "package only in B: new 0.1" in text
    assert "locust" not in text
    assert "system changed: cpu_governor: performance -> powersave" in text
    assert "run B started on a busy machine: pid 7 python uses 85% of a core" in text
    old = "\n".join(context_lines(RunMeta(), RunMeta()))
    assert "calibration: absent from both runs" in old and "packages: not recorded" in old


# ---- A/A on a real smoke run --------------------------------------------------------------------


# Smaller than smoke, with what the A/A needs: three repetitions of each finish_fetch point (the
# three clean windows a side a timed verdict needs; split two and one for an A/A pair, whose
# counts are judged on one), two of each sweep point (a spread to judge), two strategies, sweep
# sizes and scenarios, and race settings measured once (no spread: no verdict).
TINY = """
protocols = echomq
strategies = fused, two_call
repetitions = 3
workers = 2
concurrency = 4
producers = 1
batch-size = 20
payload-bytes = 50
warmup-s = 0.3
measure-s = 0.5
rtt-ms = 0
fidelity-calls = 0
sweep-variants = atomic, app_side
sweep-scenarios = healthy, all_stalled
sweep-sizes = 10, 100
sweep-reps = 2
probe-rate-hz = 200
sweep-control-calls = 100
race-variants = all
race-sweepers = 2
race-jobs = 30
race-delay-ms = 0
race-reps = 1
race-workers = 1
"""


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `python -m bench run` of a tiny profile (the stages that compare reads), at 80
    columns, a CPU hog beside it (so its CONTENDED lines are printed too); what it printed is kept
    beside the run folder (printed.txt) for the width test."""
    results = tmp_path_factory.mktemp("aa")
    profile = results.parent / "aa-tiny.conf"
    profile.write_text(TINY)
    with idle_hog():  # it takes the CPU the run leaves (so the run is contended), little of the others'
        out = subprocess.run(
            [sys.executable, "-m", "bench", "run", "--profile", str(profile), "--stages", STAGES,
             "--results", str(results)],
            cwd=REPO, capture_output=True, text=True, timeout=150, env={**os.environ, "COLUMNS": "80"},
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (results.parent / "printed.txt").write_text(out.stdout + out.stderr)
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return run


@pytest.mark.timeout(160)  # the first to ask for smoke_run pays for its three stages
def test_every_line_a_run_prints_fits_its_80_columns(smoke_run: Path) -> None:
    """Every stage's table, note, goal and warning, and the progress lines, within $COLUMNS (80),
    a CPU hog beside the run: its CONTENDED lines fold too, and name what was high."""
    printed = (smoke_run.parent.parent / "printed.txt").read_text().splitlines()
    assert any(line.startswith("[") or "finish_fetch" in line for line in printed)
    for line in printed:
        if not line.startswith("results: "):  # a path is printed whole, so it can be copied
            assert len(line) <= 80, line
    contended = [n for n, line in enumerate(printed) if line.startswith("CONTENDED: ")]
    for n in contended:  # the cause named, with both figures, on the line or the one folded under it
        said = " ".join(" ".join(printed[n : n + 3]).split())  # a folded line's indent
        assert "foreign CPU up to" in said and "steal up to" in said, said


def compare_failing(run_a: Path, run_b: Path) -> int:
    """`compare A B --fail-on-regression`'s exit code, the two runs side by side in one folder."""
    return compare_main([run_a.name, run_b.name, "--results", str(run_a.parent), "--fail-on-regression"])


def _against(value: float, step: float, higher_is_better: bool) -> float:
    return value - step if higher_is_better else value + step


# Every file load_run reads, by its frame's name.
CSVS = {stage: row.FILE for stage, row in FRAMES.items()}


def judged_as_quiet(run: Path, copy: Path) -> None:
    """A copy of ``run`` with every contended flag cleared: its points get verdicts, whatever the
    shared machine did during the real run (the machine columns themselves are kept)."""
    shutil.copytree(run, copy)
    meta = json.loads((copy / "meta.json").read_text())
    meta["run_id"] = copy.name
    (copy / "meta.json").write_text(json.dumps(meta))
    for stage, frame in load_run(copy).frames.items():
        if stage in CSVS:  # the stages' own CSVs (a per-master file has no contended flag)
            frame.assign(contended=False).to_csv(copy / CSVS[stage], index=False)


def noisy_twin(run: Path, twin: Path) -> None:
    """``run`` with every value moved against it by its own noise (see the module docstring)."""
    shutil.copytree(run, twin)
    meta = json.loads((twin / "meta.json").read_text())
    meta["run_id"] = twin.name
    (twin / "meta.json").write_text(json.dumps(meta))
    data = load_run(run)
    metrics = {stage: {m.column: m for m in ms} for stage, ms in STAGE_METRICS.items()}

    ff = data.frames["finish_fetch"].copy()
    ff = ff.astype({column: float for column in metrics["finish_fetch"] if column in ff.columns})
    for _, group in ff.groupby(["strategy", "workers", "concurrency", "job_ms", "rtt_ms"]):
        for column, metric in metrics["finish_fetch"].items():
            values = group[column].dropna()
            if len(values) < 2:
                continue
            step = values.std() / math.sqrt(len(values))  # one standard error of the mean
            ff.loc[group.index, column] = _against(values, step, metric.higher_is_better)
    ff.to_csv(twin / "finish_fetch.csv", index=False)

    sweep = data.frames["sweep"].copy()
    for column, metric in metrics["sweep"].items():
        if column in ("sweep_ms_median", "us_per_active_job") or metric.exact:
            continue
        sweep[column] = sweep[column] * 1.5  # once per point: half as much again
    reps = sweep["reps"].clip(lower=1)
    sweep_step = sweep["sweep_ms_stdev"] / reps.pow(0.5)
    scale = sweep["us_per_active_job"] / sweep["sweep_ms_median"]
    sweep["sweep_ms_median"] = sweep["sweep_ms_median"] + sweep_step
    sweep["us_per_active_job"] = sweep["sweep_ms_median"] * scale
    sweep.to_csv(twin / "sweep_cost.csv", index=False)

    costs = data.frames["script_cost"].astype({"server_us_per_call": float})
    for _, group in costs.groupby(["protocol", "step"]):
        values = group["server_us_per_call"]
        costs.loc[group.index, "server_us_per_call"] = values + values.std() / math.sqrt(len(values))
    costs.to_csv(twin / "script_cost.csv", index=False)

    race = data.frames["race"].copy()
    for column in metrics["race"]:
        race[column] = race[column] + 3
    race.to_csv(twin / "race.csv", index=False)


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(160)  # the first to ask for smoke_run pays for its three stages
def test_a_real_smoke_run_against_its_noisy_twin_gives_no_worse(
    smoke_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet = smoke_run.parent / "29991231-235958-smoke"
    twin = smoke_run.parent / "29991231-235959-smoke"
    judged_as_quiet(smoke_run, quiet)
    noisy_twin(quiet, twin)
    assert compare_failing(quiet, twin) == 0
    out = capsys.readouterr().out
    assert "worse 0," in out
    # The calibration comes before the first verdict, side by side (the twin's is the same).
    assert out.index("| calibration | A | B | B/A |") < out.index("| stage | point | metric |")
    for figure in ("python_loop_ns", "ping_p50_us", "evalsha_us"):
        assert f"| {figure} |" in out
    assert "package changed" not in out
    rows = compare_runs(load_run(quiet).frames, load_run(twin).frames).rows
    assert (rows["verdict"] == "same").any()  # real verdicts were given, not all waved through
    # Every metric measured once per point went 50% the wrong way and got no verdict.
    once = rows[(rows["stage"] == "race") | rows["metric"].isin(["hold_ms_max", "probe_max_us", "server_us"])]
    assert not once.empty and set(once["verdict"]) <= {SHOWN, "same", NOT_JUDGED}


def test_a_contended_window_is_never_worse_and_three_clean_ones_a_side_are_judged() -> None:
    a = load_run(FIXTURES / "20240501-100000-smoke").frames
    b = {stage: frame.copy() for stage, frame in a.items()}
    ff = b["finish_fetch"]
    hit = (ff["strategy"] == "fused") & (ff["rtt_ms"] == 0)
    ff.loc[hit, "jobs_per_s"] = ff.loc[hit, "jobs_per_s"] * 0.7  # 30% down: worse
    point = "strategy=fused workers=2 rtt_ms=0"

    def said() -> Any:
        return compare_runs(a, b, Learnt()).rows.set_index(["point", "metric"]).loc[(point, "jobs_per_s")]

    assert said()["verdict"] == "worse"
    ff.loc[hit & (ff["rep"] == 2), ["contended", "foreign_cpu_pct"]] = [True, 95.0]  # one window
    assert said()["verdict"] == NOT_JUDGED  # two clean windows left in B: too few
    assert "contended in B" in said()["note"] and "clean windows 3 of 3 in A, 2 of 3 in B" in said()["note"]
    extra = ff[hit & (ff["rep"] == 1)].assign(rep=4, contended=False)  # a window measured again
    b["finish_fetch"] = ff = pd.concat([ff, extra], ignore_index=True)
    assert said()["verdict"] == "worse"  # on its three clean windows
    ff.loc[ff["strategy"] == "fused", ["contended", "foreign_cpu_pct"]] = [True, 95.0]
    rows = compare_runs(a, b, Learnt()).rows
    assert said()["verdict"] == NOT_JUDGED and "worse" not in set(rows["verdict"])


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(160)  # the first to ask for smoke_run pays for its three stages
def test_a_real_smoke_run_records_its_calibration_and_software(smoke_run: Path) -> None:
    meta = json.loads((smoke_run / "meta.json").read_text())
    calibration = meta["calibration"]
    assert calibration["python_loop_ns"] > 0 and calibration["ping_p50_us"] > 0
    assert calibration["evalsha_us"] is not None and calibration["evalsha_us"] > 0
    assert calibration["took_s"] > 0  # recorded; quick by its fixed work (tests/test_calibration.py)
    assert {"redis", "locust", "pyperf", "psutil", "hiredis"} <= meta["packages"].keys()
    assert meta["system"]["aslr"] is not None
    assert "contended" in meta["machine_before"]
    assert meta["machine_watch"].startswith("client and the embedded redis-server")
    # Every measured row of every stage carries its window's machine watch.
    for stage, frame in load_run(smoke_run).frames.items():
        measured = frame[frame["skipped"] == ""] if stage == "sweep" else frame
        assert not measured.empty and measured["foreign_cpu_pct"].notna().all(), stage
        assert measured["steal_pct"].notna().all() and measured["contended"].notna().all(), stage


# ---- A/A: one real run's repetitions split in two ------------------------------------------------

REP_FILES = ("finish_fetch", "script_cost")  # the stages with a row a repetition


def split_in_two(run: Path, odd: Path, even: Path) -> None:
    """Two runs of identical code from one: the odd repetitions and the even ones. The sweep's
    rows (pyperf's median and stdev over processes) and the race's (one count a point) cannot be
    split and go to both halves as they are."""
    for half, keep in ((odd, 1), (even, 0)):
        shutil.copytree(run, half)
        meta = json.loads((half / "meta.json").read_text())
        meta["run_id"] = half.name
        (half / "meta.json").write_text(json.dumps(meta))
        frames = load_run(half).frames
        for stage in REP_FILES:
            frame = frames[stage]
            frame[frame["rep"] % 2 == keep].to_csv(half / CSVS[stage], index=False)


@pytest.mark.timeout(160)  # the first to ask for smoke_run pays for its three stages
def test_an_aa_pair_split_from_one_real_run_gives_no_worse_and_exit_0(
    smoke_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd, even = smoke_run.parent / "29991231-235951-smoke", smoke_run.parent / "29991231-235952-smoke"
    split_in_two(smoke_run, odd, even)  # the machine watch's flags kept: a real A/A
    rows = compare_runs(load_run(odd).frames, load_run(even).frames).rows
    assert not (rows["verdict"] == "worse").any(), rows[rows["verdict"] == "worse"].to_string()
    assert compare_failing(odd, even) == 0
    assert "worse 0," in capsys.readouterr().out
    # commands a job and a call are counts the code fixes: judged, busy machine or not
    exact = rows[rows["metric"].isin(["commands_per_job", "commands_per_call"])]
    assert not exact.empty and set(exact["verdict"]) == {"same"}
    assert "us_per_active_job" not in set(rows["metric"])  # the sweep time, judged once


@pytest.mark.timeout(160)  # the first to ask for smoke_run pays for its three stages
def test_a_doctored_drop_of_half_in_fused_jobs_per_s_is_worse_and_exit_1(
    smoke_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet = smoke_run.parent / "29991231-235953-smoke"
    doctored = smoke_run.parent / "29991231-235954-smoke"
    judged_as_quiet(smoke_run, quiet)
    # The sample injected, not what the shared machine made of it: each strategy's jobs/s 1%
    # apart around its own level, no window saturated, every rtt as nominal.
    ff = load_run(quiet).frames["finish_fetch"]
    level = {"fused": 10_000.0, "two_call": 8_000.0, "two_call_pipelined": 9_000.0}
    spread = [1 + 0.01 * (i % 3 - 1) for i in range(len(ff))]
    ff["jobs_per_s"] = [level[str(s)] * k for s, k in zip(ff["strategy"], spread, strict=True)]
    ff.assign(saturated=False, rtt_missed=False).to_csv(quiet / CSVS["finish_fetch"], index=False)
    shutil.copytree(quiet, doctored)
    fused = ff["strategy"] == "fused"
    ff.loc[fused, "jobs_per_s"] *= 0.5  # B's fused at half of A's
    ff.assign(saturated=False, rtt_missed=False).to_csv(doctored / CSVS["finish_fetch"], index=False)
    assert compare_failing(quiet, doctored) == 1
    capsys.readouterr()
    rows = compare_runs(load_run(quiet).frames, load_run(doctored).frames).rows
    jobs = rows[(rows["metric"] == "jobs_per_s") & rows["point"].str.startswith("strategy=fused ")]
    assert not jobs.empty and set(jobs["verdict"]) == {"worse"}
    # and the ratios within the run, which fell alike
    assert {"jobs_per_s", "fused/two_call jobs/s"} <= set(rows.loc[rows["verdict"] == "worse", "metric"])
    assert set(rows.loc[rows["verdict"] == "worse", "metric"]) <= {
        "jobs_per_s",
        "fused/two_call jobs/s",
        "fused/two_call_pipelined jobs/s",
    }


# ---- A/A on a noisy cloud VM's pair (tests/data/make_fixtures.py NOISY_MODEL) -----------------

NOISY_A, NOISY_B = FIXTURES / "20240505-100000-smoke", FIXTURES / "20240506-100000-smoke"
JUDGED = ("same", "better", "worse")


def test_a_noisy_aa_pair_claims_nothing_and_judges_only_clean_windows() -> None:
    """The same truths, a third of the windows contended (steal takes 20-60% of their work), the
    rtt-0 points saturated in both runs: nothing better or worse; the counts all judged same."""
    rows = compare_runs(load_run(NOISY_A).frames, load_run(NOISY_B).frames, Learnt()).rows
    claimed = rows[rows["verdict"].isin(["better", "worse"])]
    assert claimed.empty, claimed.to_string()
    counts = rows[rows["kind"] == "count"]
    assert not counts.empty and (counts["verdict"] == "same").all()
    # every timed row at a point with a contended or saturated window on either side has fewer
    # than three clean windows there (smoke's three repetitions): none judged
    noisy = rows[(rows["kind"] == "timed") & rows["note"].str.contains("contended|saturated")]
    assert not noisy.empty and (noisy["verdict"] == NOT_JUDGED).all(), noisy.to_string()
    assert (rows[(rows["kind"] == "timed") & (rows["note"] == "")]["verdict"] == "same").any()


def doctored(tmp_path: Path, name: str, change: Callable[[dict[str, pd.DataFrame]], None]) -> Path:
    """A copy of NOISY_A, under ``name``, with ``change`` made to its frames (written back)."""
    copy = tmp_path / name
    shutil.copytree(NOISY_A, copy)
    frames = load_run(copy).frames
    change(frames)
    for stage, frame in frames.items():
        frame.to_csv(copy / CSVS[stage], index=False)
    return copy


def test_a_halving_across_runs_is_worse_where_windows_are_clean_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def halve(frames: dict[str, pd.DataFrame]) -> None:
        ff = frames["finish_fetch"]
        ff.loc[ff["strategy"] == "fused", "jobs_per_s"] *= 0.5

    copy = doctored(tmp_path, "29991231-235960-smoke", halve)
    assert (
        compare_main([str(NOISY_A), str(copy), "--fail-on-regression", "--learnt", str(tmp_path / "none")])
        == 1
    )
    capsys.readouterr()
    rows = compare_runs(load_run(NOISY_A).frames, load_run(copy).frames, Learnt()).rows
    jobs = rows[(rows["metric"] == "jobs_per_s") & rows["point"].str.startswith("strategy=fused ")]
    clean = jobs[jobs["note"] == ""]
    assert not clean.empty and set(clean["verdict"]) == {"worse"}, jobs.to_string()
    assert set(jobs.loc[jobs["note"] != "", "verdict"]) == {NOT_JUDGED}  # noisy windows: never judged
    assert set(rows["verdict"]) <= {"worse", "same", NOT_JUDGED, SHOWN}


def test_a_fused_cut_to_seven_tenths_is_worse_on_the_ratio_within_the_run(tmp_path: Path) -> None:
    """The ratio fused/two_call is a figure of its own, judged beyond its own learnt drift, which is
    far smaller than absolute jobs/s's: a cut that the jobs/s drift hides shows on the ratio."""
    a = load_run(FIXTURES / "20240501-100000-smoke").frames
    b = {stage: frame.copy() for stage, frame in a.items()}
    ff = b["finish_fetch"]
    ff.loc[ff["strategy"] == "fused", "jobs_per_s"] *= 0.7
    learnt = Learnt({"finish_fetch jobs_per_s": 0.40, "finish_fetch fused/two_call jobs/s": 0.10})
    rows = compare_runs(a, b, learnt).rows.set_index(["point", "metric"])["verdict"]
    assert rows[("strategy=fused workers=2 rtt_ms=0", "jobs_per_s")] == "same"  # within 40%
    assert rows[("workers=2 rtt_ms=0", "fused/two_call jobs/s")] == "worse"


def test_the_drift_is_learnt_from_aa_pairs_and_a_calibration_drift_never_widens_it(tmp_path: Path) -> None:
    a = load_run(FIXTURES / "20240501-100000-smoke")
    b = {stage: frame.copy() for stage, frame in a.frames.items()}
    ff = b["finish_fetch"]
    ff["jobs_per_s"] = ff["jobs_per_s"] * ff["rep"].map({1: 1.06, 2: 1.08, 3: 1.10})  # an A/A pair, +8%
    learnt = learn([compare_runs(a.frames, b, Learnt()).rows], (("a1", "b1"),), "c0ffee")
    assert learnt.drift["finish_fetch jobs_per_s"] == pytest.approx(0.08, abs=0.005)
    assert learnt.points["finish_fetch jobs_per_s"] >= 3 and "finish_fetch cycle_max_us" not in learnt.drift
    # kept and read back; compare prints it with its source
    path = tmp_path / "learnt.json"
    write_learnt(learnt, path)
    assert read_learnt(path) == learnt
    # B's machine calibrations drifted by 40%: the threshold stays half again the learnt 8%, and
    # -15% is worse
    copy = tmp_path / "29991231-235961-smoke"
    shutil.copytree(FIXTURES / "20240501-100000-smoke", copy)
    meta = json.loads((copy / "meta.json").read_text())
    meta["calibration"] = {
        k: v * 1.4 if isinstance(v, float) else v for k, v in meta.get("calibration", {}).items()
    }
    (copy / "meta.json").write_text(json.dumps(meta))
    frame = load_run(copy).frames["finish_fetch"]
    frame["jobs_per_s"] *= 0.85
    frame.to_csv(copy / CSVS["finish_fetch"], index=False)
    out = tmp_path / "page.md"
    assert (
        compare_main(
            [str(FIXTURES / "20240501-100000-smoke"), str(copy), "--learnt", str(path), "--output", str(out)]
        )
        == 0
    )
    page = out.read_text()
    assert (
        "learnt from 1 A/A pairs of commit c0ffee (a1 / b1)" in page and "finish_fetch jobs_per_s 12%" in page
    )
    rows = compare_runs(a.frames, load_run(copy).frames, learnt).rows
    jobs = rows[(rows["metric"] == "jobs_per_s") & (rows["note"] == "")]
    assert not jobs.empty and set(jobs["verdict"]) == {"worse"}


def test_an_instruction_count_beyond_half_a_percent_is_worse_within_it_same(tmp_path: Path) -> None:
    def dearer(by: float) -> Callable[[dict[str, pd.DataFrame]], None]:
        def change(frames: dict[str, pd.DataFrame]) -> None:
            counts = frames["instructions"]
            counts.loc[counts["step"] == "fused cycle", "instructions_per_call"] *= by

        return change

    a = load_run(NOISY_A).frames
    for by, expected in ((1.03, "worse"), (1.003, "same"), (0.97, "better")):
        copy = doctored(tmp_path, f"2999123{len(str(by))}-23595{int(by * 1000) % 10}-smoke", dearer(by))
        rows = compare_runs(a, load_run(copy).frames).rows.set_index(["stage", "point", "metric"])
        said = rows.loc[("instructions", "step=fused cycle", "instructions_per_call"), "verdict"]
        assert said == expected, (by, said)
        shutil.rmtree(copy)


def test_learn_keeps_the_drift_and_the_pairs_data_and_refuses_a_dirty_run(tmp_path: Path) -> None:
    runs = []
    for name, factor in (("20240601-100000-smoke", 1.0), ("20240601-100100-smoke", 1.06)):
        copy = tmp_path / "results" / name
        shutil.copytree(FIXTURES / "20240501-100000-smoke", copy)
        meta = json.loads((copy / "meta.json").read_text())
        (copy / "meta.json").write_text(json.dumps({**meta, "run_id": name, "git_dirty": False}))
        frame = load_run(copy).frames["finish_fetch"]
        frame["jobs_per_s"] *= factor
        frame.to_csv(copy / CSVS["finish_fetch"], index=False)
        runs.append(str(copy))
    out, keep = tmp_path / "learnt.json", tmp_path / "aa"
    assert learn_main([*runs, "--output", str(out), "--keep", str(keep)]) == 0
    learnt = read_learnt(out)
    assert learnt.pairs == (("20240601-100000-smoke", "20240601-100100-smoke"),)
    assert learnt.drift["finish_fetch jobs_per_s"] == pytest.approx(0.06, abs=1e-6)
    kept = sorted(p.name for p in (keep / "20240601-100000-smoke").iterdir())
    assert "meta.json" in kept and "finish_fetch.csv" in kept and not [k for k in kept if k.endswith(".png")]
    with pytest.raises(BenchError, match="A/A pairs"):
        learn_main([runs[0], "--output", str(out), "--keep", str(keep)])
    meta = json.loads((Path(runs[1]) / "meta.json").read_text())
    (Path(runs[1]) / "meta.json").write_text(json.dumps({**meta, "git_dirty": True}))
    with pytest.raises(BenchError, match="one committed tree"):
        learn_main([*runs, "--output", str(out), "--keep", str(keep)])


def test_the_committed_drift_names_its_pairs_and_their_data_is_kept() -> None:
    learnt = read_learnt(LEARNT_FILE)
    assert len(learnt.pairs) >= 3 and len(learnt.commit) == 40
    for pair in learnt.pairs:
        for run_id in pair:
            kept = AA_DIR / run_id
            assert (kept / "meta.json").is_file() and (kept / "finish_fetch.csv").is_file(), run_id
            assert load_run(kept).meta.git_sha == learnt.commit  # one committed tree
    # the families a gate leans on were measured, each beyond its floor once the margin is on
    assert {"finish_fetch jobs_per_s", "finish_fetch fused/two_call jobs/s"} <= set(learnt.drift)
    assert all(
        learnt.points[name] >= 3 for name in ("finish_fetch jobs_per_s", "finish_fetch fused/two_call jobs/s")
    )


def test_every_frame_compare_matches_on_has_its_metrics_and_two_servers_runs_compare() -> None:
    """A frame with key columns but no metrics crashed compare (KeyError: finish_fetch_servers)."""
    from bench.report.compare.metrics import STAGE_KEYS

    assert set(STAGE_KEYS) <= set(STAGE_METRICS)
    published = REPO / "docs" / "results"
    servers = sorted(p.name for p in published.iterdir() if p.name.endswith("-servers"))[:2]
    assert len(servers) == 2, servers
    assert compare_main([*servers, "--results", str(published)]) == 0
