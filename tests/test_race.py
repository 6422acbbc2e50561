"""The race audit: its counters against a known state, the atomic sweeps at zero, the app-side gaps shown."""

from __future__ import annotations

import csv
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main as bench_main
from bench.errors import BenchError
from bench.harness.server import EmbeddedRedis
from bench.protocol.audit import audit
from bench.protocol.connection import RedisSettings
from bench.protocol.queue import Producer, Queue
from bench.protocol.sweep import SWEEPERS, AppSideSweeper, Sweeper, has_gap
from bench.results.race import RaceRow
from bench.results.rows import RunIds, columns_of, row_dict
from bench.stages.race import trial
from bench.stages.race.count import Anomalies, count_anomalies, read_state
from bench.stages.race.plan import Point, RacePlan, points_of, variant_names
from bench.stages.race.rows import RaceOutcome, row_of
from bench.stages.race.trial import RaceLog, run_trial
from tests.helpers import race_anomalies

ATOMIC = [name for name in SWEEPERS if not has_gap(name)]
WITH_GAP = [name for name in SWEEPERS if has_gap(name)]


def test_an_unknown_variant_is_a_one_line_error_naming_the_choices(capsys):
    with pytest.raises(BenchError) as caught:
        variant_names(["atomic", "nope"])
    message = str(caught.value)
    assert "\n" not in message and "'nope'" in message
    assert all(name in message for name in SWEEPERS)
    # The command says the same in one line, before any server starts.
    assert bench_main(["race", "--variants", "nope", "--jobs", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("echomq-bench: error: unknown race variant 'nope'")


def test_all_means_every_registered_sweeper_and_atomic_runs_at_delay_zero_only():
    assert variant_names(["all"]) == tuple(SWEEPERS)
    plan = RacePlan(tuple(SWEEPERS), (2, 4), 10, (0.0, 3.0), reps=1, workers=0)
    cells = points_of(plan)
    for name in ATOMIC:
        assert sorted((c.sweepers, c.delay_ms) for c in cells if c.variant == name) == [(2, 0.0), (4, 0.0)]
    for name in WITH_GAP:
        assert len([c for c in cells if c.variant == name]) == 4


@pytest.mark.parametrize("sweepers", [1, 17])
def test_sweepers_outside_2_to_16_is_an_error(sweepers: int):
    with pytest.raises(BenchError, match=r"outside 2\.\.16"):
        RacePlan(("atomic",), (sweepers,), 10, (0.0,), reps=1, workers=0).check()


def test_a_deadline_that_passes_is_an_error_that_stops_the_run():
    log = RaceLog(["1", "2"], fetch_budget=0, deadline=time.monotonic() - 1)
    assert log.past_deadline() and log.past_deadline()  # every thread sees it; one error counts
    assert log.stop.is_set() and log.errors == ["deadline passed with 2 stalled jobs unreclaimed"]


def test_the_counters_against_a_hand_built_state(queue: Queue):
    produced = Producer(queue).add_batch(7)  # ids 1..7
    c, k = queue.client, queue.keys
    c.delete(k.wait)
    c.rpush(k.wait, "1", "2", "2", "3", "4")  # 2 twice; 3 also failed; 4 also completed
    c.zadd(k.failed, {"3": 1})
    c.zadd(k.completed, {"4": 1, "6": 1, "7": 1})
    c.rpush(k.active, "6", "99")  # 6 completed and active: nothing counted explains it; 99 unknown
    for job_id, atm in {"1": 1, "2": 1, "3": 2, "4": 1, "6": 1, "7": 3}.items():
        c.hset(k.job(job_id), "atm", atm)
    # 5 is lost. 7 was reclaimed twice and a worker finished a copy: only the returns show it.
    reclaims = Counter({"1": 1, "2": 2, "3": 2, "4": 1, "7": 2})
    finishes = Counter({"4": 1, "6": 1, "7": 1})

    found = count_anomalies(
        read_state(queue, produced), audit(queue, produced), reclaims, finishes, fetched_finished=2
    )

    assert (found.double_by_returns, found.double_by_state) == (3, 2)  # 2, 3, 7 / 2, 3
    assert found.double_recoveries == 3
    assert found.lost_attempt_updates == 2  # 2 wrote atm 1 twice; 4's finish was overwritten
    assert found.requeued_after_finish == 1 + 2  # 4 in completed and wait, plus two fetches
    assert found.audit_violations == 3  # 5 missing, 99 unknown, 6 in two places unexplained
    assert found.finished == 3


def test_an_outcome_is_one_race_csv_row_of_its_counts_summed_over_reps():
    setting = Point("app_side", sweepers=2, stalled_jobs=10, delay_ms=1.0, workers=0)
    counts = Anomalies(double_recoveries=3, audit_violations=1) + Anomalies(lost_attempt_updates=2)
    outcome = RaceOutcome(setting, reps=2, counts=counts)
    row = row_of(outcome, RunIds("20240101-000000-smoke", "smoke"))
    assert isinstance(row, RaceRow)
    assert row_dict(row) == {
        "run_id": "20240101-000000-smoke", "protocol": "echomq", "profile": "smoke",
        "variant": "app_side", "sweepers": 2, "stalled_jobs": 10, "delay_ms": 1.0, "workers": 0,
        "slice_size": 50, "max_stalled": 1000, "reps": 2,
        "double_recoveries": 3, "lost_attempt_updates": 2, "requeued_after_finish": 0, "audit_violations": 1,
        "foreign_cpu_pct": "", "steal_pct": "", "contended": False,  # no window watched
    }  # fmt: skip
    assert tuple(row_dict(row)) == columns_of(RaceRow)
    assert outcome.per_10k == 10_000 * 6 / 20


def run_reps(settings: RedisSettings, setting: Point, reps: int):
    return [run_trial(settings, setting) for _ in range(reps)]


@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "workers"])
@pytest.mark.parametrize("variant", ATOMIC)
def test_atomic_sweeps_with_8_sweepers_show_no_anomaly(settings: RedisSettings, variant: str, workers: int):
    setting = Point(
        variant, sweepers=8, stalled_jobs=100, delay_ms=0.0, workers=workers, deadline_s=20, slice_size=10
    )
    for found in run_reps(settings, setting, reps=3):
        assert (found.errors, found.unrecovered) == (0, 0)
        assert found.reclaimed == 100 and found.sweeps >= 8  # each sweeper swept at least once
        assert found.finished == (100 if workers else 0)  # every live job finished during the sweeps
        assert race_anomalies(found) == (0, 0, 0, 0)


@pytest.mark.parametrize("sweepers", [2, 8])
def test_the_deadline_sweeps_limited_passes_race_clean(settings: RedisSettings, sweepers: int):
    # echomq-deadline's sweep as a pass of many calls (atomic_sliced): 10 expired deadlines a call,
    # so each pass spans calls that the other sweepers' calls and the workers' finishes interleave
    setting = Point(
        "atomic_sliced", sweepers=sweepers, stalled_jobs=100, delay_ms=0.0, workers=2, deadline_s=20,
        slice_size=10, protocol="echomq-deadline",
    )  # fmt: skip
    for found in run_reps(settings, setting, reps=2):
        assert (found.errors, found.unrecovered) == (0, 0)
        assert found.reclaimed == 100 and found.finished == 100
        assert race_anomalies(found) == (0, 0, 0, 0)


def checks_before_acts(sweepers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each app-side sweeper's first gap, between reading a job and writing it back, held until
    every sweeper has read: the overlap the race needs, injected rather than left to the
    scheduler (on a busy machine one sweeper's thread can wait past another's whole sweep)."""
    all_read = threading.Barrier(sweepers, timeout=30)
    make = trial.make_sweeper

    def held(*args: Any, **kwargs: Any) -> Sweeper:
        sweeper = make(*args, **kwargs)
        assert isinstance(sweeper, AppSideSweeper)
        delay, first = sweeper.act_delay, [True]

        def act_delay() -> None:
            if first:
                first.clear()
                all_read.wait()
            delay()

        sweeper.act_delay = act_delay
        return sweeper

    monkeypatch.setattr(trial, "make_sweeper", held)


@pytest.mark.parametrize("variant", WITH_GAP)
def test_app_side_sweeps_with_a_delay_recover_twice_and_lose_updates(
    settings: RedisSettings, variant: str, monkeypatch: pytest.MonkeyPatch
):
    # Three sweeps that have all read a stalled job before any writes it back each reclaim it
    # (a double recovery), and each writes the attempt count it read plus one (lost updates).
    setting = Point(variant, sweepers=3, stalled_jobs=60, delay_ms=5.0, workers=0, deadline_s=20)
    checks_before_acts(setting.sweepers, monkeypatch)
    found = run_trial(settings, setting)
    assert (found.errors, found.unrecovered) == (0, 0)
    assert found.double_recoveries > 0
    assert found.lost_attempt_updates > 0
    assert found.requeued_after_finish == 0  # no worker finished anything
    assert found.audit_violations == 0  # the copies are explained by the double recoveries


def test_the_race_command_writes_race_csv_and_a_table(
    redis_server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    argv = ["race", "--profile", "smoke", "--variants", "atomic,app_side", "--sweepers", "2"]
    argv += ["--jobs", "20", "--delay-ms", "0,1", "--reps", "2", "--workers", "1", "--results", str(tmp_path)]
    assert bench_main(argv) == 0
    [csv_path] = tmp_path.glob("*/race.csv")
    with csv_path.open() as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == columns_of(RaceRow)
    assert [(r["variant"], float(r["delay_ms"]), r["reps"]) for r in rows] == [
        ("atomic", 0.0, "2"),
        ("app_side", 0.0, "2"),
        ("app_side", 1.0, "2"),
    ]
    assert rows[0]["double_recoveries"] == "0" and rows[0]["audit_violations"] == "0"
    for row in rows:  # each setting's worst repetition, as the machine watch saw it
        assert float(row["foreign_cpu_pct"]) >= 0 and row["contended"] in ("True", "False"), row
    out = capsys.readouterr().out
    assert "per_10k" in out and "simulated" in out
    # open_run(): the same meta.json as `bench run` writes (run_id, start, finish, stages)
    meta = json.loads((csv_path.parent / "meta.json").read_text())
    assert meta["run_id"] == csv_path.parent.name and meta["complete"] is True
    assert meta["stages_planned"] == meta["stages_done"] == ["race"] and meta["finished"]
    # REDIS_URL on loopback: the server's own pid is counted as the run's, and meta.json says so.
    assert redis_server.process is not None
    server_pid = redis_server.process.pid
    assert meta["machine_watch"].startswith(f"client and the REDIS_URL redis-server (pid {server_pid})")
