"""report, compare and runs on the fixture runs of tests/data (made by tests/data/make_fixtures.py)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bench.__main__ import main as bench_main
from bench.errors import BenchError
from bench.report.cli import compare_main, report_main, runs_main
from bench.report.compare.learnt import Learnt
from bench.report.compare.metrics import compare_runs
from bench.report.load import load_run, parse_hdr_name
from bench.report.render import write_report
from bench.report.verdict import Sample, verdict
from bench.results.files import hdr_name
from bench.results.finish_fetch import FinishFetchRow
from bench.results.race import RaceRow
from bench.results.rows import columns_of
from bench.results.sweep import SweepCostRow
from tests.data.make_fixtures import CHANGES, PARTIAL, RUN_A, RUN_B, write_concurrency_run
from tests.helpers import steady

DATA = Path(__file__).parent / "data"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = (
    "finish_fetch_jobs.png",
    "finish_fetch_latency.png",
    "finish_fetch_ratio_rtt.png",
    "sweep_time.png",
    "sweep_probe_max.png",
    "race_anomalies.png",
)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results/ folder holding copies of the fixture runs (the report writes into a run folder)."""
    for name in (RUN_A, RUN_B, PARTIAL):
        shutil.copytree(DATA / name, tmp_path / name)
    return tmp_path


# ---- verdicts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b_over_a", "higher_is_better", "expected"),
    [
        (1.20, True, "better"),
        (1.20, False, "worse"),
        (0.80, True, "worse"),
        (0.80, False, "better"),
        (1.02, True, "same"),
        (0.98, False, "same"),
        (1.10, True, "same"),  # tight repetitions, spreads apart, within two runs' floor of 15%
        (1.18, True, "better"),  # beyond 15% and the runs' own 1%, spreads apart
        (0.82, False, "better"),
    ],
)
def test_verdict_for_known_ratios(b_over_a: float, higher_is_better: bool, expected: str) -> None:
    assert verdict(steady(100.0), steady(100.0 * b_over_a), higher_is_better) == expected


def test_a_change_inside_the_spread_of_repetitions_is_same() -> None:
    a = Sample.of([50, 54, 46])  # cv 8%
    b = Sample.of([54, 58, 50])  # +8%, ranges overlap
    assert a.cv is not None and a.cv < 0.10
    assert verdict(a, b, higher_is_better=False) == "same"
    # +20% with tight repetitions is a real change; +8% is inside the spread between two runs.
    assert verdict(steady(50), steady(60), higher_is_better=False) == "worse"
    assert verdict(steady(50), steady(54), higher_is_better=False) == "same"


def test_a_noisy_run_is_claimed_changed_only_where_the_ranges_are_apart() -> None:
    noisy = Sample.of([500, 600, 400])
    assert noisy.cv == pytest.approx(0.2)
    # 10% apart, inside the noisy run's own range: no change to claim
    assert verdict(noisy, steady(550), higher_is_better=True) == "same"
    assert verdict(steady(550), noisy, higher_is_better=True) == "same"
    # +40% on the means, the ranges overlapping: the same
    assert verdict(noisy, Sample.of([700, 560, 840]), higher_is_better=True) == "same"
    # twice as fast, the ranges apart: a verdict however noisy the run
    assert verdict(noisy, steady(1000), higher_is_better=True) == "better"


def test_counts_from_and_to_zero() -> None:
    zero, some = Sample.of([0]), Sample.of([3])
    # A count the code fixes (exact) is judged on one value; a measured one is not.
    assert verdict(zero, some, higher_is_better=False, exact=True) == "worse"
    assert verdict(some, zero, higher_is_better=False, exact=True) == "better"
    assert verdict(zero, some, higher_is_better=False) == "not judged"
    assert verdict(Sample.of([0, 0, 0]), Sample.of([3, 3, 3]), higher_is_better=False) == "worse"


def test_sweep_spread_comes_from_its_stdev() -> None:
    a = Sample.with_stdev(10.0, 2.0, n=3)  # cv 20%
    assert a.cv == pytest.approx(0.2)
    assert (
        verdict(a, Sample.with_stdev(11.0, 0.1, n=3), higher_is_better=False) == "same"
    )  # inside its spread
    assert verdict(Sample.with_stdev(10.0, 0.5, n=3), Sample.with_stdev(10.8, 0.5, n=3), False) == "same"
    assert verdict(Sample.with_stdev(10.0, 0.1, n=3), Sample.with_stdev(12.0, 0.1, n=3), False) == "worse"
    # two repetitions: too few to judge
    assert verdict(Sample.with_stdev(10.0, 0.1), Sample.with_stdev(12.0, 0.1), False) == "not judged"


# ---- compare on the fixture runs ------------------------------------------------------------


def test_compare_gives_each_known_change_its_verdict() -> None:
    a, b = load_run(DATA / RUN_A), load_run(DATA / RUN_B)
    rows = compare_runs(a.frames, b.frames, Learnt()).rows.set_index(["stage", "point", "metric"])
    for key, expected in CHANGES.items():
        assert rows.loc[key, "verdict"] == expected, key
    jobs = rows.loc[("finish_fetch", "strategy=fused workers=2 rtt_ms=0", "jobs_per_s")]
    assert jobs["a"] == pytest.approx(1000) and jobs["b"] == pytest.approx(1250)
    assert jobs["ratio"] == pytest.approx(1.25)
    # Nothing else changed between the two runs: the rest judged same, but the sweep's times over
    # two repetitions (too few), the maxima and the single values (shown)
    others = rows.drop(index=list(CHANGES))
    shown = others["kind"].isin(["maximum", "once"])
    assert set(others.loc[shown, "verdict"]) == {"shown"}
    sweep_times = others.index.get_level_values("stage") == "sweep"
    assert set(others.loc[~shown & sweep_times, "verdict"]) == {"not judged"}
    judged = others[~shown & ~sweep_times]
    # the fused/two_call ratios moved with fused's jobs/s (+25% at rtt 0, -25% at 1): figures of their own
    ratios = {rtt: ("finish_fetch", f"workers=2 rtt_ms={rtt}", "fused/two_call jobs/s") for rtt in (0, 1)}
    assert (rows.loc[ratios[0], "verdict"], rows.loc[ratios[1], "verdict"]) == ("better", "worse")
    judged = judged.drop(index=list(ratios.values()))
    assert set(judged["verdict"]) == {"same"}, judged[judged["verdict"] != "same"]


def test_compare_leaves_skipped_sweep_points_out_and_says_so() -> None:
    a, b = load_run(DATA / RUN_A), load_run(DATA / RUN_B)
    comparison = compare_runs(a.frames, b.frames)
    sweep_points = set(comparison.rows.loc[comparison.rows["stage"] == "sweep", "point"])
    assert "variant=app_side scenario=healthy active_size=1000" not in sweep_points
    assert "variant=app_side scenario=healthy active_size=100" in sweep_points
    assert any("skipped" in note for note in comparison.notes)


def test_compare_cli_prints_the_table_and_fails_on_regression(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [RUN_A, RUN_B, "--results", str(results)]
    assert compare_main(argv) == 0
    out = capsys.readouterr().out
    assert "| stage | point | metric | kind | A | B | B/A |" in out
    assert "changed: redis_version: 7.2.4 -> 7.4.1" in out
    assert "verdicts: better 2, worse 5" in out  # two of them script_cost's, one a ratio
    assert compare_main([*argv, "--fail-on-regression"]) == 1
    # Against itself nothing is worse, so CI passes.
    assert compare_main([RUN_A, RUN_A, "--results", str(results), "--fail-on-regression"]) == 0


def test_compare_with_a_partial_run_names_what_it_could_not_compare(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compare_main([RUN_A, PARTIAL, "--results", str(results), "--changed"]) == 0
    out = capsys.readouterr().out
    assert "note: sweep: absent from run B; not compared" in out
    assert "note: finish_fetch: only in run A: strategy=fused workers=2 rtt_ms=1" in out
    assert "run B is INCOMPLETE: interrupted (Ctrl-C)" in out
    assert "saturated in B" in out and "audit failed in B" in out
    assert "e2e_p99_us" not in out  # the partial run lacks that column: no row for it


# ---- report ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_report_writes_markdown_and_valid_pngs(results: Path) -> None:
    run = results / RUN_A
    report = write_report(run)
    text = report.read_text()
    for plot in PLOTS:
        data = (run / plot).read_bytes()
        assert data.startswith(PNG_SIGNATURE), plot
        assert len(data) > 10_000, plot  # a drawn figure, not an empty canvas
        assert f"]({plot})" in text, plot
    assert not list(run.glob(".*.png*")), "a temporary plot file was left behind"
    # Every figure has its caption line; the meta and each stage's table are there.
    assert text.count("![") == len(PLOTS)
    assert text.count("\n*") >= len(PLOTS)
    for expected in ("7.2.4 (PATH)", "a1b2c3d4e5f6", "| profile | smoke |", "Fixture CPU @ 2.00GHz, 2 cores"):
        assert expected in text
    assert "| status | complete |" in text
    assert "Absent from this run" not in text
    assert "**Skipped points (2)**" in text and "**skipped**: app_side capped at 100" in text
    assert "| 2 | 0 | 1.67 |" in text  # fused/two_call ratio at workers 2, rtt 0
    assert "| cycle | fused | 199 |" in text  # p50 of the merged histograms
    assert "INCOMPLETE" not in text and "saturated**" not in text


def test_a_partial_run_is_reported_with_what_it_has(results: Path, figures_undrawn: None) -> None:
    run = results / PARTIAL
    text = write_report(run).read_text()
    assert "> **Incomplete run**: interrupted (Ctrl-C). Stages done: finish_fetch." in text
    assert "stage sweep: sweep_cost.csv absent" in text
    assert "stage race: race.csv absent" in text
    assert "lacks column(s) e2e_p99_us" in text
    assert "**1 repetition(s) saturated**" in text and "**saturated**" in text
    assert "**Audit FAILED in 1 repetition(s)**" in text and "**FAILED**" in text
    assert "| e2e_p99_us |" not in text
    # No HDR files: the latency figure comes from the CSV's columns, and says so.
    assert "No HDR files" in text
    assert (run / "finish_fetch_latency.png").read_bytes().startswith(PNG_SIGNATURE)
    assert not (run / "sweep_time.png").exists() and not (run / "race_anomalies.png").exists()


def test_a_run_without_meta_is_reported_and_says_so(results: Path, figures_undrawn: None) -> None:
    run = results / RUN_B
    (run / "meta.json").unlink()
    (run / "race.csv").write_text(",".join(columns_of(RaceRow)) + "\n")  # a header and no rows
    text = write_report(run).read_text()
    assert "meta.json absent" in text
    assert "**INCOMPLETE**" in text
    assert "## Race audit" in text


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "holiday-photos"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a run")
    with pytest.raises(BenchError, match="not a run folder"):
        load_run(folder)
    assert bench_main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("echomq-bench: error:") and err.count("\n") == 1
    assert not (folder / "report.md").exists()
    with pytest.raises(BenchError, match="bench runs"):
        report_main(["no-such-run", "--results", str(tmp_path)])


def test_report_main_defaults_to_the_newest_run(
    results: Path, capsys: pytest.CaptureFixture[str], figures_undrawn: None
) -> None:
    assert report_main(["--results", str(results)]) == 0
    assert capsys.readouterr().out.strip() == str(results / PARTIAL / "report.md")


def test_columns_read_back_exactly(results: Path) -> None:
    run = load_run(results / RUN_A)
    expected = {
        "finish_fetch": columns_of(FinishFetchRow),
        "sweep": columns_of(SweepCostRow),
        "race": columns_of(RaceRow),
    }
    for stage, columns in expected.items():
        assert tuple(run.frames[stage].columns) == columns
    assert run.frames["finish_fetch"]["saturated"].dtype == "boolean"
    assert pd.api.types.is_numeric_dtype(run.frames["sweep"]["active_size"])
    assert len(run.hdr_files[("finish_fetch", "fused", "cycle")]) == 3


def test_hdr_names_parse_as_results_writes_them() -> None:
    assert parse_hdr_name(hdr_name("finish_fetch", "two_call", 12, "cycle")) == (
        "finish_fetch", "two_call", 12, "cycle",
    )  # fmt: skip
    assert parse_hdr_name("finish_fetch__fused__rx__cycle.hdr") is None
    assert parse_hdr_name("README.md") is None


# ---- runs -----------------------------------------------------------------------------------


def test_runs_lists_each_run_with_its_details(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (results / "not-a-run").mkdir()
    meta = json.loads((results / RUN_B / "meta.json").read_text())
    assert runs_main(["--results", str(results)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["run", "profile", "date", "server", "git", "stages", "status"]
    assert [line.split()[0] for line in lines[1:]] == [RUN_A, RUN_B, PARTIAL]
    row_b = lines[2]
    assert "smoke" in row_b and "2024-05-02 10:00:00" in row_b and "Redis 7.4.1" in row_b
    assert meta["git_sha"][:10] in row_b and "complete" in row_b
    assert "INCOMPLETE: interrupted (Ctrl-C)" in lines[3]
    assert "not-a-run" not in "\n".join(lines)


def test_runs_on_an_empty_results_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runs_main(["--results", str(tmp_path / "nothing-here")]) == 0
    assert "no runs in" in capsys.readouterr().out


def test_ratio_is_nan_only_when_both_are_zero() -> None:
    a = {"race": pd.DataFrame([{"variant": "atomic", "sweepers": 2, "stalled_jobs": 10, "delay_ms": 0,
                                "double_recoveries": 0}])}  # fmt: skip
    rows = compare_runs(a, a).rows
    assert len(rows) == 1 and math.isnan(rows.iloc[0]["ratio"]) and rows.iloc[0]["verdict"] == "shown"


def test_the_in_run_report_says_complete_with_the_finish_time(results: Path, figures_undrawn: None) -> None:
    from bench.harness.context import Progress, RunContext
    from bench.harness.profile import load_profile
    from bench.harness.server import ServerInfo
    from bench.protocol.connection import RedisSettings
    from bench.run import report_stage as run_stage

    run = results / RUN_A
    meta = json.loads((run / "meta.json").read_text())
    meta.update(complete=False, reason=None, finished=None)  # as run.py leaves it until the end
    (run / "meta.json").write_text(json.dumps(meta))
    server = ServerInfo(url="redis://127.0.0.1:1", source="PATH", binary=None, version="7.2.4")
    ctx = RunContext(load_profile("smoke"), RedisSettings.from_url(server.url), server, run, Progress())
    run_stage(ctx)  # reads only the folder: no server is contacted
    text = (run / "report.md").read_text()
    finished = json.loads((run / "meta.json").read_text())["finished"]
    assert finished and "| status | complete |" in text and f" / {finished} |" in text
    assert "Incomplete run" not in text and "still running" not in text and "INCOMPLETE" not in text
    assert all((run / plot).is_file() for plot in PLOTS)


# ---- the machine, contended points, and what end to end means --------------------------------


def _edit(run: Path, name: str, change) -> None:
    frame = pd.read_csv(run / name)
    change(frame)
    frame.to_csv(run / name, index=False)


def test_the_report_lists_the_machine_and_says_which_points_were_contended(
    results: Path, figures_undrawn: None
) -> None:
    run = results / RUN_A

    def busy_rep(frame: pd.DataFrame) -> None:
        frame.loc[1, ["contended", "foreign_cpu_pct"]] = [True, 87.5]

    _edit(run, "finish_fetch.csv", busy_rep)
    _edit(run, "sweep_cost.csv", busy_rep)
    _edit(run, "race.csv", busy_rep)
    text = write_report(run).read_text()
    # The calibration, the system view and the guard's scope, from meta.json.
    assert "## Machine" in text
    for row in (
        "| contention guard watches | client and the embedded redis-server, on this machine |",
        "| before the run (1 s) | quiet: foreign CPU 1.50% of a core, steal 0% |",
        "| Python loop, ns an iteration (the client's CPU) | 38.50 |",
        "| PING round trip p50 at one connection, µs | 48.20 |",
        "| system: aslr | full (2) |",
        "| rows contended (other work in their windows) | finish_fetch 1/12, sweep 1/18, race 1/4, "
        "script_cost 0/18 |",
    ):
        assert row in text, row
    # Each stage says it as plainly as saturated, and flags the row.
    for what in ("1 repetition(s)", "1 point(s)", "1 setting(s)"):
        assert f"> **{what} contended**: other work used the machine during their windows " in text, what
    assert "(foreign CPU up to 87.50% of a core, steal up to " in text  # both figures, whichever was high
    assert text.count("**contended**") == 3
    header = next(line for line in text.splitlines() if line.startswith("| strategy | rep |"))
    assert "| saturated | contended | audit_ok |" in header  # contended beside saturated
    # Closed loop: end to end is named backlog wait, with Little's law, everywhere it is shown.
    assert "**End to end is backlog wait here, not queue latency.**" in text and "Little's law" in text
    assert "| backlog_wait_p50_us | backlog_wait_p99_us |" in header and "e2e_p50_us" not in header
    assert "| backlog wait | fused |" in text and "| e2e | fused |" not in text


def test_open_loop_end_to_end_is_queue_latency_below_saturation_only(
    results: Path, figures_undrawn: None
) -> None:
    run = results / RUN_A

    def open_loop(frame: pd.DataFrame) -> None:
        frame["target_rate"] = 500.0
        frame.loc[3, ["saturated", "e2e_p50_us"]] = [True, 987_654.0]  # fell behind the offered rate

    _edit(run, "finish_fetch.csv", open_loop)
    text = write_report(run).read_text()
    assert "backlog wait here" not in text and "| queue latency | fused |" in text
    assert "**End to end is queue latency only where the offered rate was met.** The 1 saturated" in text
    header = next(line for line in text.splitlines() if line.startswith("| strategy | rep |"))
    assert "| queue_latency_p50_us | queue_latency_p99_us |" in header
    assert "987,654" not in text  # the saturated repetition's wait is no latency of the queue


def test_compare_changed_leaves_out_shown_rows_and_shows_each_runs_headline(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compare_main([RUN_A, RUN_B, "--results", str(results), "--changed"]) == 0
    out = capsys.readouterr().out
    table = [
        line for line in out.splitlines() if line.startswith("| finish_fetch") or line.startswith("| sweep")
    ]
    assert table and not any("| shown |" in line for line in table)
    assert "maxima and single values, shown and never judged, left out: " in out
    assert "verdicts: better 2, worse 5, same " in out  # still counted
    # The headline, defined once: the median of each run's A B pairs with [min-max].
    assert "| fused/two_call jobs/s | A | B | ranges |" in out
    assert "| workers=2 rtt_ms=0 | 1.67 [1.67-1.67] | 2.06 [2.06-2.06] | apart |" in out
    assert out.index("| fused/two_call jobs/s |") < out.index("| stage | point | metric |")


@pytest.mark.slow
def test_a_run_with_jobs_in_flight_shows_three_strategies_the_pace_and_the_fidelity(
    tmp_path: Path, figures_undrawn: None
) -> None:
    run = write_concurrency_run(tmp_path)
    text = write_report(run).read_text()
    assert "fused against two_call and two_call_pipelined" in text
    # the ratio table: a column pair for each other strategy, a row a (workers, concurrency, rtt) point
    assert "| workers | concurrency | rtt_ms | fused/two_call: median of pairs |" in text
    assert "fused/two_call_pipelined: median of pairs" in text
    assert "| 4 | 8 | 1 | 1.57 |" in text  # 3600 / 2300 at every pair
    assert "### Which side set the pace" in text and "Redis ceiling jobs/s" in text
    assert "| fused | steady | 4 | 8 | 0 | " in text and "| client |" in text  # no regime column: steady
    assert "### Latency fidelity" in text and "| redis-benchmark (C client) | 55 |" in text
    assert "adds +8 µs to the bare redis-py p50" in text
    # Locust, the raw driver and the reference side by side, with the driver goals judged
    assert "### Locust, the raw driver and the reference" in text
    assert "- goal raw CPU per job <= 1.25x the reference's (c8, c32): met (worst: " in text
    assert "- goal limit redis at c32 rtt0 (fused, two_call; echomq, bullmq): not measured" in text
    plot = run / "finish_fetch_ratio_concurrency.png"
    assert plot.read_bytes().startswith(PNG_SIGNATURE) and "](finish_fetch_ratio_concurrency.png)" in text
    assert "Absent from this run" not in text.split("## Finish-then-fetch")[1].split("## Sweep")[0]


def test_compare_names_a_point_by_what_sets_it_apart(tmp_path: Path) -> None:
    run = load_run(write_concurrency_run(tmp_path))
    points = set(compare_runs(run.frames, run.frames).rows["point"])
    assert "strategy=fused workers=4 concurrency=8 rtt_ms=1" in points
    assert "strategy=two_call_pipelined workers=4 rtt_ms=0" in points  # concurrency 1, job_ms 0 unsaid


def test_a_contended_cell_is_marked_in_every_table_that_shows_it(
    tmp_path: Path, figures_undrawn: None
) -> None:
    """fused at 8 jobs in flight over 1 ms measured in contended windows only, two_call at 1 over
    0 ms saturated: each report table and the results page marks those cells (c, s) with a note,
    and no other."""
    from bench.report.results_page import finish_fetch_table

    run = write_concurrency_run(tmp_path)
    path = run / "finish_fetch.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    at_point = {"concurrency": frame["concurrency"].astype(int), "rtt_ms": frame["rtt_ms"].astype(float)}
    busy = (frame["strategy"] == "fused") & (at_point["concurrency"] == 8) & (at_point["rtt_ms"] == 1.0)
    full = (frame["strategy"] == "two_call") & (at_point["concurrency"] == 1) & (at_point["rtt_ms"] == 0.0)
    frame.loc[busy, "contended"], frame.loc[busy, "foreign_cpu_pct"] = "True", "60.0"
    frame.loc[full, "saturated"] = "True"
    frame.to_csv(path, index=False)
    text = write_report(run).read_text()
    lines = text.splitlines()

    def marks(lead: str) -> list[str]:
        """The last cell of each table row that starts with ``lead``."""
        return [line.split("|")[-2].strip() for line in lines if line.startswith(lead)]

    # the per-point table, the pace table and the driver table: a row a strategy and point
    assert marks("| fused | steady | 4 | 8 | 1 |") == ["c", "c", "c"]
    assert marks("| two_call | steady | 4 | 1 | 0 |") == ["s", "s", "s"]
    assert set(marks("| fused | steady | 4 | 1 | 0 |")) == {""}
    # the ratio table: a row a point, marked by either side's cell
    assert marks("| steady | 4 | 8 | 1 |") == ["c"] and marks("| steady | 4 | 1 | 0 |") == ["s"]
    assert text.count("*c: every window of the cell was contended") == 4  # a note under each of the four
    # the results page: the cell itself
    table = finish_fetch_table(load_run(run))
    assert table is not None
    at = table[(table["concurrency"] == 8) & (table["rtt_ms"] == 1.0)].iloc[0]
    assert str(at["fused jobs/s"]).endswith(" c") and not str(at["two_call jobs/s"]).endswith(("c", "s"))
    assert sorted(table.attrs["marks"]) == ["c", "s"]


def test_a_run_of_backlog_and_open_rows_names_enqueue_to_finish_by_each_rows_regime() -> None:
    from bench.report import latency

    frame = pd.DataFrame(
        {
            "regime": ["backlog", "backlog", "open", "open"],
            "target_rate": [0.0, 0.0, 500.0, 500.0],
            "saturated": [True, False, True, False],
            "e2e_p50_us": [9000.0, 9000.0, 700.0, 800.0],
        }
    )
    assert latency.meaning(frame) is latency.MIXED
    assert latency.meaning(frame[frame["regime"] == "open"]) is latency.OPEN
    assert latency.meaning(frame[frame["regime"] == "backlog"]) is latency.CLOSED
    shown = latency.shown_columns(frame)["enqueue_to_finish_p50_us"].tolist()
    # a saturated open row measured no queue latency; a saturated closed row's backlog wait stays
    assert shown[0] == 9000.0 and math.isnan(shown[2]) and shown[3] == 800.0
    assert "named by each row's regime" in " ".join(latency.note(frame))
