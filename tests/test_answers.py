"""The answers a README and a report open with (bench/report/answers.py, findings.findings_lines):
each figure labelled by what it counts, recomputed here by hand on fixture runs; an answer within
its word limit; a figure two runs disagree on called unstable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from bench.report.answers import (
    ANSWER_WORDS,
    Cell,
    cross_run_table,
    fusing_answer,
    fusing_cells,
    fusing_table,
    race_rates,
    sweep_answer,
    unstable,
)
from bench.report.findings import capacity, findings_lines, node_worker
from bench.report.load import load_run
from bench.report.publish import PUBLISHED_DIR
from tests.helpers import run_copy


def words(text: str) -> int:
    """The words of a line of prose: tokens with a letter or digit (a lone "/" or "-" is none)."""
    return sum(any(ch.isalnum() for ch in token) for token in text.split())


NEWEST = PUBLISHED_DIR / "20261205-122315-default"
OLDER = PUBLISHED_DIR / "20261205-075039-default"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return run_copy(NEWEST, tmp_path)


def test_each_answer_fits_its_words_and_the_rest_of_the_block_400() -> None:
    data = load_run(NEWEST)
    lines = findings_lines(data, [data, load_run(OLDER)])
    assert lines[0].startswith("**Fuse") and lines[2].startswith("**Use atomic_sliced")
    assert words(lines[0]) <= ANSWER_WORDS and words(lines[2]) <= ANSWER_WORDS
    rest = [line for line in lines[4:] if not line.startswith("|")]
    assert sum(words(line) for line in rest) <= 400
    assert lines[4].startswith("Conditions: jobs of 0 ms, 100-byte payloads;")
    assert "Redis and the load share 2 cores" in lines[4]


def test_the_published_answers_keep_to_their_words() -> None:
    """The README's answers, as make docs wrote them from the published runs, not only a fixture's."""
    from bench.paths import REPO

    answers = [line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("**")]
    assert len(answers) == 2
    assert [words(a) <= ANSWER_WORDS for a in answers] == [True, True]


def test_races_are_per_sweeper_count_and_per_stalled_job(run: Path) -> None:
    rates = race_rates(load_run(run)).set_index(["protocol", "variant", "sweepers"])
    frame = pd.read_csv(run / "race.csv")
    mine = frame[(frame["variant"] == "app_side_pipelined") & (frame["sweepers"] == 8)]
    stalled = int((mine["stalled_jobs"] * mine["reps"]).sum())  # 2 delays x 400 jobs x 2 reps
    row = rates.loc[("echomq", "app_side_pipelined", 8)]
    assert row["stalled"] == stalled == 1600
    assert row["double_recoveries"] == mine["double_recoveries"].sum()
    assert row["double_recoveries_per_stalled"] == pytest.approx(mine["double_recoveries"].sum() / 1600)
    assert row["requeued_after_finish_per_stalled"] == pytest.approx(
        mine["requeued_after_finish"].sum() / 1600
    )
    # one sweeper count's rate is never pooled with another's
    two = rates.loc[("echomq", "app_side_pipelined", 2)]
    assert two["double_recoveries_per_stalled"] < row["double_recoveries_per_stalled"] / 3
    # the answer names one setting, its delay too: runs pool delays alike only where the same were clean
    settings = race_rates(load_run(run), by_delay=True).set_index(
        ["protocol", "variant", "sweepers", "delay_ms"]
    )
    unpaused = mine[mine["delay_ms"] == 0]
    rate = unpaused["double_recoveries"].sum() / (unpaused["stalled_jobs"] * unpaused["reps"]).sum()
    assert settings.loc[
        ("echomq", "app_side_pipelined", 8, 0.0), "double_recoveries_per_stalled"
    ] == pytest.approx(rate)
    said = sweep_answer(load_run(run))
    assert f"app_side_pipelined: {rate:.1f} extra recoveries per stalled job, 8 sweepers, no pause." in said


def test_capacity_counts_the_add_and_says_what_it_is_without_it(run: Path) -> None:
    data = load_run(run)
    (text,) = capacity(data).sentences
    frame = pd.read_csv(run / "finish_fetch.csv")
    paced = frame[(frame["limit"] == "redis") & ~frame["contended"] & ~frame["saturated"]]
    mine = paced[(paced["protocol"] == "echomq") & (paced["strategy"] == "fused")]
    with_add = (mine["jobs_per_s"] / (mine["redis_cpu_pct"] / 100)).median()
    counts = pd.read_csv(run / "instructions.csv").set_index(["protocol", "step"])[
        "server_instructions_per_call"
    ]
    add, job = counts[("echomq", "addJob")], counts[("echomq", "fused cycle")]
    assert f"echomq fused {with_add:,.0f} / {with_add * (add + job) / job:,.0f}" in text
    assert text.startswith("Jobs/s with / without each job's add:")
    assert "bullmq two_call" in text  # fused and two_call apart


def test_two_runs_that_disagree_beyond_their_ranges_are_unstable(run: Path, tmp_path: Path) -> None:
    twin = tmp_path / "20261205-122316-default"
    shutil.copytree(run, twin)
    assert unstable([load_run(run), load_run(twin)]) == []
    frame = pd.read_csv(twin / "finish_fetch.csv")
    hit = (frame["protocol"] == "echomq") & (frame["strategy"] == "fused") & (frame["concurrency"] == 8)
    frame.loc[hit & (frame["rtt_ms"] == 1), "jobs_per_s"] *= 0.6
    frame.to_csv(twin / "finish_fetch.csv", index=False)
    runs = [load_run(run), load_run(twin)]
    assert unstable(runs) == [("echomq", 8, 1.0, 0.0)]
    assert "unstable at 1 cells" in fusing_answer(runs[0], runs)
    table = cross_run_table(runs).set_index("figure")
    assert table.loc["fused / two_call, echomq, 8 in flight, rtt 1 ms", "held"] == "unstable"
    assert table.loc["fused / two_call, echomq, 1 in flight, rtt 1 ms", "held"] == ""


def test_a_run_that_drained_no_backlog_is_not_pooled_into_the_fusing_figures(
    run: Path, tmp_path: Path
) -> None:
    # a closed loop where producers set the pace: its jobs/s ratio is near 1 by design, not a loss
    steady = Path(shutil.copytree(run, tmp_path / "20261203-101406-default"))
    frame = pd.read_csv(steady / "finish_fetch.csv").query("regime != 'open'").assign(regime="steady")
    frame.loc[frame["strategy"] == "fused", "jobs_per_s"] *= 0.5  # it "lost" everywhere
    frame.to_csv(steady / "finish_fetch.csv", index=False)
    data, other = load_run(run), load_run(steady)
    assert fusing_cells(other) and not fusing_cells(other, pooled=True)  # its own report keeps them
    assert fusing_answer(data, [data, other]) == fusing_answer(data, [data])
    assert unstable([data, other]) == []  # pooled, its halved ratios would part from the run's


def test_the_fusing_answer_names_the_round_trips_its_cells_had(run: Path) -> None:
    data = load_run(run)
    assert "the jobs/s at rtt 1-5 ms" in fusing_answer(data)
    frame = pd.read_csv(run / "finish_fetch.csv")
    frame[frame["rtt_ms"] < 5].to_csv(run / "finish_fetch.csv", index=False)  # as make bench runs now
    said = fusing_answer(load_run(run))
    assert "the jobs/s at rtt 1 ms" in said and "5 ms" not in said


def test_a_held_job_gets_rows_of_its_own_and_the_answer_says_where_the_gain_fades() -> None:
    cells = [
        Cell("echomq", 8, 1.0, 0.0, 1.75, 1.65, 1.86, 2, "client", 1.18),
        Cell("echomq", 8, 1.0, 10.0, 1.05, 1.02, 1.08, 2, "job time", 1.12),
        Cell("echomq", 8, 0.0, 10.0, 1.01, 0.99, 1.03, 2, "job time", None),
    ]
    table = fusing_table(cells)
    assert list(table.columns) == ["protocol", "in flight", "job ms", "rtt 0 ms", "rtt 1 ms"]
    assert table.values.tolist() == [
        ["echomq", "8", "0", "—", "1.75 [1.65-1.86], client, rtt paid 1.18"],
        ["echomq", "8", "10", "1.01 [0.99-1.03], job time", "1.05 [1.02-1.08], job time, rtt paid 1.12"],
    ]


def test_where_redis_set_the_pace_the_cell_shows_what_the_counts_predict(run: Path) -> None:
    counts = pd.read_csv(run / "instructions.csv").set_index(["protocol", "step"])[
        "server_instructions_per_call"
    ]
    add = counts[("echomq", "addJob")]
    predicted = (add + counts[("echomq", "two-call cycle")]) / (add + counts[("echomq", "fused cycle")])
    cells = {(c.protocol, c.concurrency, c.rtt_ms): c for c in fusing_cells(load_run(run))}
    assert cells[("echomq", 32, 0.0)].pace == "redis"
    assert cells[("echomq", 32, 0.0)].text().endswith(f", counts predict {predicted:.2f}")
    assert cells[("echomq", 1, 0.0)].predicted is None  # the client set that pace


def test_the_node_workers_finding_says_nodes_own_fused_gain_from_clean_pairs(run: Path) -> None:
    """Each repetition's fused over its own two-call; a pair with a side not clean is left out
    (the blind recompute of 20261206-071620: 1.19x from unpaired medians, 1.10x from its pair)."""
    frame = pd.read_csv(run / "bullmq_worker.csv")
    two = (frame["driver"] == "node_manual_two_call") & (frame["concurrency"] == 8)
    frame.loc[two & (frame["rep"] == frame.loc[two, "rep"].max()), "contended"] = True
    frame.to_csv(run / "bullmq_worker.csv", index=False)
    clean_rows = frame[~frame["contended"]]
    by = clean_rows.set_index(["driver", "concurrency", "rep"])["jobs_per_s"]
    gains = []
    for c in (1, 8, 50):
        reps = sorted(set(by["node_manual_fused"][c].index) & set(by["node_manual_two_call"][c].index))
        ratios = [by["node_manual_fused"][c][r] / by["node_manual_two_call"][c][r] for r in reps]
        gains.append(f"{pd.Series(ratios).median():.2f}x at {c}" + (" (1 pair)" if len(ratios) == 1 else ""))
    (_, said) = node_worker(load_run(run)).sentences
    assert "1 pair" in gains[1]  # the pair left out leaves one: said, as the fusing table says it
    shown = ", ".join(gains)
    assert said == f"Node's own fused / two-call (clean pairs): {shown}."


def test_the_sweep_answer_holds_for_the_other_runs_sizes_and_says_where_they_differ(
    run: Path, tmp_path: Path
) -> None:
    stress = tmp_path / "20261205-130000-stress"
    shutil.copytree(run, stress)
    frame = pd.read_csv(stress / "sweep_cost.csv")
    sliced = (frame["protocol"] == "echomq") & (frame["variant"] == "atomic_sliced")
    frame.loc[sliced & (frame["active_size"] == 100_000), ["redis_hold_ms_max", "redis_slow_calls_max"]] = [
        3.5,
        1,
    ]
    frame.to_csv(stress / "sweep_cost.csv", index=False)
    said = sweep_answer(load_run(run), [load_run(stress)])
    assert said.startswith("**Use atomic_sliced or echomq-deadline atomic_sliced**")
    assert "stress: 3.5 ms at 100,000, atomic_sliced)." in said
    frame.loc[sliced & (frame["active_size"] == 100_000), "redis_hold_ms_max"] = 12.0  # past 10 ms
    frame.to_csv(stress / "sweep_cost.csv", index=False)
    said = sweep_answer(load_run(run), [load_run(stress)])
    assert said.startswith("**Use echomq-deadline atomic_sliced**")


def test_the_sweep_answer_says_how_each_figure_held_across_runs(run: Path, tmp_path: Path) -> None:
    """The advice counts the runs where it held; BullMQ's routine hold and the app-side race rate
    give their range over the runs; a run where the advised variant was slow is not counted held."""
    other = tmp_path / "20261205-130000-default"
    shutil.copytree(run, other)
    frame = pd.read_csv(other / "sweep_cost.csv")
    routine = (
        (frame["protocol"] == "bullmq") & (frame["variant"] == "atomic") & (frame["scenario"] == "healthy")
    )
    biggest = int(frame.loc[routine, "active_size"].max())
    at = routine & (frame["active_size"] == biggest)
    frame.loc[at, ["redis_hold_ms_max", "redis_slow_calls_max"]] = [999.0, 1]
    frame.to_csv(other / "sweep_cost.csv", index=False)
    data = load_run(run)
    mine = pd.read_csv(run / "sweep_cost.csv")
    own = mine[
        (mine["protocol"] == "bullmq") & (mine["variant"] == "atomic") & (mine["scenario"] == "healthy")
    ]
    own_ms = float(own.loc[own["active_size"] == biggest, "redis_hold_ms_max"].max())
    said = sweep_answer(data, runs=[data, load_run(other)])
    assert f"at {biggest:,} healthy jobs (2 runs: {round(own_ms):,}-999)." in said
    assert "(all 2 runs)." in said
    assert words(said) <= ANSWER_WORDS
    sliced = (frame["protocol"] == "echomq") & (frame["variant"] == "atomic_sliced")
    frame.loc[sliced, ["redis_hold_ms_max", "redis_slow_calls_max"]] = [50.0, 1]  # slow in that run
    frame.to_csv(other / "sweep_cost.csv", index=False)
    said = sweep_answer(data, runs=[data, load_run(other)])
    assert "(1 of 2 runs)." in said
    assert "runs" not in sweep_answer(data)  # no runs given: nothing said of them


def test_a_held_job_times_cell_reads_its_own_rows_only(run: Path, tmp_path: Path) -> None:
    """A job-ms-at cell shares its concurrency and rtt with the grid's: its pace and rtt paid are
    its own rows', never pooled with the grid cell's (the blind recompute of 20261206-051850)."""
    frame = pd.read_csv(run / "finish_fetch.csv")
    at = (frame["protocol"] == "echomq") & (frame["concurrency"] == 8) & (frame["rtt_ms"] == 1.0)
    at &= frame["regime"] == "backlog"
    held = frame[at].assign(job_ms=10.0, limit="job time", rtt_slept_ms=1.05)
    pd.concat([frame, held], ignore_index=True).to_csv(run / "finish_fetch.csv", index=False)
    cells = {(c.concurrency, c.rtt_ms, c.job_ms): c for c in fusing_cells(load_run(run))}
    assert cells[(8, 1.0, 10.0)].pace == "job time" and cells[(8, 1.0, 10.0)].rtt_paid_ms == 1.05
    assert cells[(8, 1.0, 0.0)].pace != "job time" and cells[(8, 1.0, 0.0)].rtt_paid_ms != 1.05
