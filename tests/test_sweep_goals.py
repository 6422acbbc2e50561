"""The sweep goals against small synthetic sweep_cost.csv files: met, missed (by how much, with
the control), not measured at a size the run lacks, and contended points left out as not
evidence. Content only, no timing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.report.load import load_run
from bench.report.sections.sweep import sweep_section
from bench.results.files import write_csv
from bench.results.rows import columns_of, row_dict
from bench.results.sweep import (
    GOALS,
    MET,
    MISSED,
    NOT_MEASURED,
    SweepControlRow,
    SweepCostRow,
    bullmq_ratios,
    judge_all,
)
from bench.stages.sweep.table import goal_text

DEFAULT_SIZES = (100, 10_000, 100_000)
STRESS_SIZES = (*DEFAULT_SIZES, 1_000_000)


def point(protocol: str, variant: str, scenario: str, size: int, **values: object) -> SweepCostRow:
    row = SweepCostRow(
        run_id="20240601-100000-stress", protocol=protocol, profile="stress", variant=variant,
        scenario=scenario, active_size=size, slice_size=100, probe_rate_hz=200.0, reps=3,
        sweep_ms_median=1.0, sweep_ms_stdev=0.01, us_per_active_job=1.0, round_trips=1,
    )  # fmt: skip
    return replace(row, **values)


def run_rows(
    sizes: tuple[int, ...],
    *,
    healthy_us: float = 40.0,
    stalled_us_per_id: float = 2.5,
    sliced_hold_ms: dict[int, float] | None = None,
) -> list[SweepCostRow]:
    """A run's goal rows: echomq-deadline healthy and all stalled, echomq's sliced sweep."""
    holds = sliced_hold_ms or {}
    rows = []
    for size in sizes:
        rows.append(point("echomq-deadline", "atomic", "healthy", size, server_us=healthy_us))
        rows.append(
            point("echomq-deadline", "atomic", "all_stalled", size, server_us=stalled_us_per_id * size)
        )
        for scenario in ("healthy", "all_stalled"):
            rows.append(point("echomq", "atomic_sliced", scenario, size, hold_ms_max=holds.get(size, 1.2)))
    return rows


def verdicts(rows: list[SweepCostRow]) -> dict[str, tuple[str, str, str]]:
    """goal name -> (verdict, at size, note), as the tables print them."""
    return {r.goal.name: (r.verdict, r.cells()[2], r.note) for r in judge_all([row_dict(x) for x in rows])}


HEALTHY, STALLED, SLICED, UNDER_1MS, UNDER_CONTROL, PER_ID, HEALTHY_PASS = (goal.name for goal in GOALS)
OLD_GOALS = (HEALTHY, STALLED, SLICED)


def test_a_default_run_leaves_the_million_goals_not_measured_and_says_its_largest_size() -> None:
    got = verdicts(run_rows(DEFAULT_SIZES, sliced_hold_ms={10_000: 2.5}))
    assert got[HEALTHY] == (NOT_MEASURED, "100,000", "largest size here: 100,000")
    assert got[STALLED] == (NOT_MEASURED, "100,000", "largest size here: 100,000")
    # A 2.5 ms call at one size misses the every-size goal, wherever the sizes stop.
    assert got[SLICED][:2] == (MISSED, "10,000")


def test_a_stress_run_meets_or_misses_each_goal_at_a_million() -> None:
    met = verdicts(run_rows(STRESS_SIZES, healthy_us=300.0, stalled_us_per_id=3.0))
    assert {name: met[name][0] for name in OLD_GOALS} == {HEALTHY: MET, STALLED: MET, SLICED: MET}
    assert met[HEALTHY][1] == "1,000,000"
    missed = verdicts(run_rows(STRESS_SIZES, healthy_us=1000.0, stalled_us_per_id=3.2))
    assert missed[HEALTHY][0] == MISSED  # "under 1 ms": 1 ms itself misses
    assert missed[STALLED][0] == MISSED


def test_the_sliced_goal_reads_redis_own_time_and_the_client_time_only_where_slowlog_cannot_tell() -> None:
    # The client saw 3.5 ms (a round trip and its own pauses); Redis held each call at most 1 ms.
    rows = [
        replace(r, redis_hold_ms_max=1.0) if r.variant == "atomic_sliced" else r
        for r in run_rows(STRESS_SIZES, sliced_hold_ms=dict.fromkeys(STRESS_SIZES, 3.5))
    ]
    assert verdicts(rows)[SLICED][0] == MET
    unknown = [replace(r, redis_hold_ms_max=None) if r.active_size == 10_000 else r for r in rows]
    assert verdicts(unknown)[SLICED][:2] == (MISSED, "10,000")  # the client's 3.5 ms there


def test_a_missed_sliced_goal_says_how_many_of_the_worst_sweeps_calls_were_slow() -> None:
    rows = [
        replace(r, redis_hold_ms_max=2.3, redis_slow_calls_max=3, round_trips=34_290)
        if r.variant == "atomic_sliced" and r.active_size == 1_000_000 and r.scenario == "all_stalled"
        else replace(r, redis_slow_calls_max=0, round_trips=50)
        if r.variant == "atomic_sliced"
        else r
        for r in run_rows(STRESS_SIZES)
    ]
    got = verdicts(rows)[SLICED]
    assert got == (MISSED, "1,000,000", "3 of 34,290 calls over the slowlog threshold")
    unknown = [replace(r, redis_slow_calls_max=None) for r in rows]
    assert verdicts(unknown)[SLICED] == (MISSED, "1,000,000", "")  # SLOWLOG could not count them
    met = [replace(r, redis_hold_ms_max=1.0) if r.variant == "atomic_sliced" else r for r in rows]
    assert verdicts(met)[SLICED] == (MET, "1,000,000", "")  # nothing to explain


def test_a_contended_point_is_not_evidence_either_way() -> None:
    rows = run_rows(STRESS_SIZES, sliced_hold_ms={10_000: 2.5})
    rows = [replace(r, contended=True) if r.variant == "atomic_sliced" and r.active_size == 10_000 else r
            for r in rows]  # fmt: skip
    rows = [replace(r, contended=True) if r.variant == "atomic" and r.scenario == "healthy"
            and r.active_size == 1_000_000 else r
            for r in rows]  # fmt: skip
    got = verdicts(rows)
    assert got[SLICED][0] == MET and "contended at 10,000: not evidence" in got[SLICED][2]
    assert got[HEALTHY] == (NOT_MEASURED, "100,000", "largest size here: 100,000; contended at "
                            "1,000,000: not evidence")  # fmt: skip


def test_a_goal_whose_protocol_did_not_run_is_left_out_and_a_skipped_point_is_not_a_figure() -> None:
    rows = [r for r in run_rows(STRESS_SIZES) if r.protocol == "echomq"]
    assert list(verdicts(rows)) == [SLICED]
    rows = run_rows(STRESS_SIZES, sliced_hold_ms={1_000_000: 9.0})
    erred = [replace(r, skipped="error: check failed") if r.hold_ms_max == 9.0 else r for r in rows]
    assert verdicts(erred)[SLICED] == (NOT_MEASURED, "100,000", "largest size here: 100,000")
    # One scenario's point at the size is enough: the other's error is no figure, not a miss.
    erred = [replace(r, skipped="error: check failed") if r.hold_ms_max == 9.0 and r.scenario == "healthy"
             else replace(r, hold_ms_max=1.2) if r.hold_ms_max == 9.0 else r for r in rows]  # fmt: skip
    assert verdicts(erred)[SLICED][0] == MET


def test_the_report_and_the_stage_print_the_same_goal_rows(tmp_path: Path) -> None:
    rows = run_rows(DEFAULT_SIZES, sliced_hold_ms={10_000: 2.5})
    run = tmp_path / "20240601-100000-default"
    run.mkdir()
    write_csv(run / "sweep_cost.csv", columns_of(SweepCostRow), map(row_dict, rows))
    text = "\n".join(sweep_section(load_run(run)))
    assert "**Goals**, judged on uncontended points only" in text and "issue" not in text
    assert f"| {SLICED} | 2.500 ms | 10,000 | **missed** |" in text
    assert f"| {HEALTHY} | 0.040 ms | 100,000 | not measured | largest size here: 100,000 |" in text
    assert f"| {STALLED} | 2.500 µs/id | 100,000 | not measured |" in text
    assert "*echomq-deadline's timed call* is the sweep that reclaims" in text
    assert "It leaves out the marking sweep before it" in text
    terminal = goal_text(rows, width=200)
    assert "missed" in terminal and "largest size here: 100,000" in terminal


def test_a_run_without_echomq_deadline_has_no_deadline_timing_line(tmp_path: Path) -> None:
    run = tmp_path / "20240601-100000-smoke"
    run.mkdir()
    rows = [r for r in run_rows(DEFAULT_SIZES) if r.protocol == "echomq"]
    write_csv(run / "sweep_cost.csv", columns_of(SweepCostRow), map(row_dict, rows))
    text = "\n".join(sweep_section(load_run(run)))
    assert "timed call" not in text and SLICED in text


# echomq-deadline's sliced pass: judged at the run's largest size, against the run's control.


def sliced_rows(
    sizes: tuple[int, ...],
    *,
    us_per_id: float = 8.0,
    healthy_us: float = 90.0,
    hold_ms: float = 1.9,
    slow_calls: int = 12,
    calls: int = 30_000,
) -> list[SweepCostRow]:
    """echomq-deadline's sliced pass, healthy and all stalled, at each size."""
    rows = []
    for size in sizes:
        rows.append(point("echomq-deadline", "atomic_sliced", "healthy", size, server_us=healthy_us))
        rows.append(
            point(
                "echomq-deadline", "atomic_sliced", "all_stalled", size, server_us=us_per_id * size,
                redis_hold_ms_max=hold_ms, redis_slow_calls_max=slow_calls, round_trips=calls,
            )
        )  # fmt: skip
    return rows


CONTROL: dict[str, object] = {
    "calls": 2000, "redis_us_median": 420, "redis_us_p999": 1700, "redis_us_max": 2300, "contended": False,
}  # fmt: skip
CONTROL_TEXT = "control: max 2.300 ms, 99.9th 1.700 ms, median 0.420 ms over 2,000 calls"


def sliced_verdicts(
    rows: list[SweepCostRow], control: dict[str, object] | None = CONTROL
) -> dict[str, tuple[str, ...]]:
    """The sliced pass's goals: name -> (verdict, measured, at size, note)."""
    found = judge_all([row_dict(r) for r in rows], [control] if control else [])
    mine = [r for r in found if (r.goal.protocol, r.goal.variant) == ("echomq-deadline", "atomic_sliced")]
    return {r.goal.name: (r.verdict, *r.cells()[1:3], r.note) for r in mine}


def test_the_sliced_pass_meets_its_goals_at_a_million_and_shows_the_control_it_was_held_to() -> None:
    got = sliced_verdicts(sliced_rows(STRESS_SIZES))
    assert got == {
        UNDER_1MS: (MET, "0.040 % over", "1,000,000", ""),  # 12 of 30,000 calls
        UNDER_CONTROL: (MET, "1.900 ms", "1,000,000", CONTROL_TEXT),
        PER_ID: (MET, "8.000 µs/id", "1,000,000", ""),
        HEALTHY_PASS: (MET, "0.090 ms", "1,000,000", ""),
    }


def test_a_missed_sliced_goal_says_by_how_much_and_what_the_control_showed() -> None:
    rows = sliced_rows(STRESS_SIZES, us_per_id=18.0, healthy_us=250.0, hold_ms=2.9, slow_calls=60)
    got = sliced_verdicts(rows)
    slow = "60 of 30,000 calls over the slowlog threshold"
    assert got[UNDER_1MS] == (MISSED, "0.200 % over", "1,000,000", f"missed by 0.100 % over (2.0x); {slow}; "
                              f"{CONTROL_TEXT}")  # fmt: skip
    assert got[UNDER_CONTROL] == (MISSED, "2.900 ms", "1,000,000", f"missed by 0.600 ms (1.3x); {slow}; "
                                  f"{CONTROL_TEXT}")  # fmt: skip
    assert got[PER_ID][0] == MISSED and got[PER_ID][3].startswith("missed by 3.000 µs/id (1.2x); ")
    assert got[HEALTHY_PASS][0] == MISSED and got[HEALTHY_PASS][3].startswith("missed by 0.050 ms (1.2x)")
    # 0.1% of the calls over 1 ms is 99.9% under: met
    assert sliced_verdicts(sliced_rows(STRESS_SIZES, slow_calls=30))[UNDER_1MS][0] == MET


def test_a_default_run_judges_the_sliced_pass_at_its_largest_size_and_says_which() -> None:
    got = sliced_verdicts(sliced_rows(DEFAULT_SIZES, us_per_id=20.0))
    assert got[PER_ID] == (MISSED, "20.000 µs/id", "100,000",
                           "missed by 5.000 µs/id (1.3x); 12 of 30,000 calls over the slowlog threshold; "
                           f"{CONTROL_TEXT}; judged at 100,000, the largest size here")  # fmt: skip
    assert got[HEALTHY_PASS] == (MET, "0.090 ms", "100,000", "judged at 100,000, the largest size here")


def test_the_control_goal_without_a_control_or_with_a_busy_one_or_below_what_slowlog_tells_is_no_verdict():
    rows = sliced_rows(STRESS_SIZES)
    assert sliced_verdicts(rows, None)[UNDER_CONTROL] == (NOT_MEASURED, "1.900 ms", "1,000,000",
                                                          "no control in this run")  # fmt: skip
    busy = {**CONTROL, "contended": True}
    assert sliced_verdicts(rows, busy)[UNDER_CONTROL][0] == NOT_MEASURED
    assert "contended: not evidence" in sliced_verdicts(rows, busy)[UNDER_CONTROL][3]
    # SLOWLOG logged no call of the pass: 1 ms bounds its longest, which says nothing against a
    # control whose worst was 0.8 ms, and meets one whose worst was 2.3 ms.
    quiet = sliced_rows(STRESS_SIZES, hold_ms=1.0, slow_calls=0)
    fast = {**CONTROL, "redis_us_max": 800}
    assert sliced_verdicts(quiet, fast)[UNDER_CONTROL][0] == NOT_MEASURED
    assert sliced_verdicts(quiet)[UNDER_CONTROL][0] == MET


def test_the_bullmq_ratio_is_its_redis_us_a_stalled_id_over_the_sliced_pass_at_each_size_both_ran() -> None:
    rows = sliced_rows((10_000, 30_000, 100_000), us_per_id=4.0)
    rows += [point("bullmq", "atomic", "all_stalled", n, server_us=us * n)
             for n, us in ((10_000, 60.0), (30_000, 172.0))]  # fmt: skip
    rows.append(point("bullmq", "atomic", "all_stalled", 100_000, skipped="over the cap"))
    ratios = bullmq_ratios([row_dict(r) for r in rows])
    assert [(r.size, r.cells()[3]) for r in ratios] == [(10_000, "15.0x"), (30_000, "43.0x")]


def test_the_report_shows_the_control_the_sliced_goals_and_the_bullmq_ratio(tmp_path: Path) -> None:
    run = tmp_path / "20240601-100000-stress"
    run.mkdir()
    rows = sliced_rows(STRESS_SIZES, us_per_id=18.0)
    rows.append(point("bullmq", "atomic", "all_stalled", 10_000, server_us=1_800_000.0))
    write_csv(run / "sweep_cost.csv", columns_of(SweepCostRow), map(row_dict, rows))
    control = SweepControlRow("20240601-100000-stress", "none", "stress", 2000, 70_000, 420, 1700, 2300, 3)
    write_csv(run / "sweep_control.csv", columns_of(SweepControlRow), [row_dict(control)])
    text = "\n".join(sweep_section(load_run(run)))
    assert f"| {PER_ID} | 18.000 µs/id | 1,000,000 | **missed** | missed by 3.000 µs/id (1.2x); " in text
    assert "in this run: max 2.300 ms, 99.9th 1.700 ms, median 0.420 ms over 2,000 calls." in text
    assert "| 10,000 | 180.00 | 18.00 | 10.0x |" in text
    # the sliced passes point by point: calls, longest in Redis, calls over 1 ms, Redis ms, µs an id
    sliced = "| echomq-deadline.atomic_sliced | all_stalled | 1,000,000 | 30,000 | 1.900 | 12 | 18,000.000 |"
    assert sliced + " 18.00 |" in text
    assert "| echomq-deadline.atomic_sliced | healthy | 1,000,000 | 1 | - | - | 0.090 | - |" in text
    terminal = goal_text(rows, [row_dict(control)], width=200)
    assert "missed by 3.000 µs/id" in terminal and "10.0x" in terminal and "18,000.000" in terminal
    quiet = [replace(r, redis_hold_ms_max=1.0, redis_slow_calls_max=0) for r in rows]
    assert "≤ 1.000" in goal_text(quiet, width=200) and "≤" not in terminal


def test_a_goal_whose_text_folds_is_kept_apart_from_the_next_by_a_blank_line() -> None:
    """At 100 columns a goal's text folds in its cell: a blank line between goals, so a folded
    line never reads as a goal of its own."""
    text = goal_text(run_rows(DEFAULT_SIZES, sliced_hold_ms={10_000: 2.5}), width=100)
    block = text.split("goals (uncontended points only, at the size each names):\n", 1)[1].split("\n\n\n")[0]
    goals = [chunk.splitlines() for chunk in block.split("\n\n")]
    assert len(goals) >= 4 and all(len(line) <= 100 for chunk in goals for line in chunk)
    assert any(len(chunk) > 1 for chunk in goals[1:])  # some goal folded at this width
    for chunk in goals[1:]:  # each after the header: one goal, its first line carrying its verdict
        assert any(v in chunk[0] for v in ("met", "missed", "not measured")), chunk
        assert not any(v in line for line in chunk[1:] for v in ("missed", "not measured")), chunk


def test_the_sliced_pass_table_keeps_each_scenario_whole_at_100_columns() -> None:
    """A million-id pass's figures are wide: the scenario's name stays on its row, never split."""
    rows = [
        point("echomq-deadline", "atomic_sliced", scenario, 1_000_000, round_trips=25_534,
              redis_hold_ms_max=9.013, redis_slow_calls_max=167, server_us=10_496_577.0,
              probe_p99_us=4_567.0, probe_max_us=18_239.0)
        for scenario in ("healthy", "all_stalled")
    ]  # fmt: skip
    text = goal_text(rows, width=100)
    table = text.split("the probe's tail:\n", 1)[1].split("\n\n")[0].splitlines()
    assert all(len(line) <= 100 for line in table)
    body = [line.split()[0] for line in table if "1,000,000" in line]
    assert body == ["healthy", "all_stalled"], table
