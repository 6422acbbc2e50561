"""The regimes (design.md "Name the regime") and windows measured again until clean: counts and
invariants against a real redis-server, never a duration or a throughput."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from bench.errors import BenchError
from bench.harness.context import RunContext
from bench.harness.machine import MachineSample
from bench.harness.profile import FinishFetchOptions, Profile
from bench.harness.server import EmbeddedRedis, ServerInfo
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Job, Queue, now_us
from bench.results.finish_fetch import FinishFetchRow, Regime, rtt_missed
from bench.stages.finish_fetch import producer_loop, remeasure, stage
from bench.stages.finish_fetch.loadstats import Recorder
from bench.stages.finish_fetch.pace import PRODUCER, STARVED_FETCHES_PER_JOB, closed_limit
from bench.stages.finish_fetch.plan import Point, capacity, points_of, raw_at, regime_options
from bench.stages.finish_fetch.producer_loop import BACKLOG_POLL_MAX_S, BACKLOG_POLL_S, ProducerLoop
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.remeasure import (
    NO_BUDGET,
    POINT_BUDGET,
    RUN_BUDGET,
    Budget,
    Guard,
    LoadJudge,
    RttJudge,
    more_processes,
)
from bench.stages.finish_fetch.stage import run_stage
from bench.stages.finish_fetch.trial_settings import TrialSettings
from tests.helpers import csv_rows, finish_fetch_row

BASE = FinishFetchOptions(
    strategies=("fused", "two_call"), repetitions=1, workers=(2,), concurrency=(8,), rtt_ms=(0.0,),
    payload_bytes=20, warmup_s=0.1, measure_s=0.5, fidelity_calls=0, raw_driver=False,
)  # fmt: skip


def _settings(opts: FinishFetchOptions, point: Point, strategy: str = "fused") -> TrialSettings:
    return TrialSettings.at(regime_options(opts, point), strategy, point, "unused")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fused", "two_call"])
def test_a_backlog_trial_never_finds_the_wait_list_empty_and_fused_never_fetches_alone(
    settings: RedisSettings, strategy: str
):
    # 4 workers x 32 slots: the Redis-bound cell, where one steady producer let the list run dry
    run = _settings(BASE, Point(4, 0.0, 32, regime=Regime.BACKLOG), strategy)
    assert (run.regime, run.producers, run.batch_size) == (Regime.BACKLOG, 3, 200)
    summary = run_raw(settings, run)
    d = summary.figures
    assert summary.audit is not None and summary.audit.ok
    assert d.jobs > 100
    assert d.wait_samples >= 3  # sampled through the window (how often: as the machine lets the thread run)
    assert d.wait_empty_samples == 0, d
    if strategy == "fused":
        assert d.fetches_alone_per_job <= 0.02, d


@pytest.mark.slow
def test_a_steady_trial_with_one_slow_producer_starves_the_workers_and_names_the_pace_by_rule(
    settings: RedisSettings,
):
    # one producer adding one job an exchange against 16 job slots: the workers wait for jobs
    opts = dataclasses.replace(BASE, producers=1, batch_size=1)
    run = _settings(opts, Point(2, 0.0, 8, regime=Regime.STEADY))
    assert (run.regime, run.producers, run.batch_size) == (Regime.STEADY, 1, 1)
    d = run_raw(settings, run).figures
    assert d.fetches_alone_per_job > STARVED_FETCHES_PER_JOB, d  # starved: the wait list ran dry
    # The verdict comes from the window's shares, which the machine moves; test_pace injects
    # them. Here: the producers' share is measured and the verdict is the rule's on it.
    assert PRODUCER in d.pace_shares, d.pace_shares
    assert (d.limit, d.limit_share) == closed_limit(d.pace_shares, d.fetches_alone_per_job)


@pytest.mark.slow
def test_an_open_trial_adds_at_its_rate_and_times_every_finished_job(settings: RedisSettings):
    rate = 400.0  # far below what the workers take
    opts = dataclasses.replace(BASE, producers=1, batch_size=10)
    point = Point(2, 0.0, 8, regime=Regime.OPEN, load=0.5).at_rate(rate)
    run = _settings(opts, point)
    assert (run.regime, run.target_rate) == (Regime.OPEN, rate)
    summary = run_raw(settings, run)
    d, counters = summary.figures, summary.counters
    # Never ahead of the schedule's batches in the window (one at each edge). A producer the
    # machine starves falls behind and catches up later (the test below, on a given clock): in
    # the window it may send what was due up to its latest batch's lateness before the window.
    late_s = summary.percentiles_us["enqueue"]["max"] / 1e6
    scheduled = rate * (summary.window_s + late_s)
    assert 0 < counters["jobs_added"] <= scheduled + 2 * opts.batch_size, (counters, scheduled, late_s)
    # 400 jobs/s never saturates a load process; a producer the machine starved (352 of 400 added
    # beside other tests) is the one saturation the machine may bring, and it is named as such
    assert all("offered" in why for why in d.saturated_because), d.saturated_because
    # queue latency recorded for every job finished in the window
    assert summary.percentiles_us["e2e"]["count"] == d.jobs > 0


def test_an_open_producer_behind_its_schedule_sends_at_once_and_ahead_of_it_waits(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
):
    """The slots follow the schedule, not the sends: behind it, one batch after another with no
    sleep until it has caught up; then a sleep until each slot."""
    clock = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(producer_loop.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(producer_loop.time, "sleep", sleep)
    run = TrialSettings("fused", 1, 1, 5, 10, 100.0, 0.0, 1.0, 0.0, queue.keys.name, regime=Regime.OPEN)
    loop = ProducerLoop(queue, run, Recorder())  # 5 jobs a batch at 100 jobs/s: a slot each 50 ms
    loop.next_slot = clock[0] - 0.12  # three slots passed: at -120, -70 and -20 ms
    slots = [loop.wait_for_slot() for _ in range(4)]
    assert slots == pytest.approx([99.88, 99.93, 99.98, 100.03])
    assert slept == pytest.approx([0.03])  # only the fourth, due 30 ms ahead, waited


def test_an_open_producer_starts_a_jobs_clock_at_its_scheduled_time(client: Client, queue: Queue):
    """Coordinated omission avoided: a producer behind its schedule stamps each job with the slot
    it was due at, not with when it was sent."""
    run = TrialSettings("fused", 1, 1, 5, 10, 100.0, 0.0, 1.0, 0.0, queue.keys.name, regime=Regime.OPEN)
    recorder = Recorder()
    loop = ProducerLoop(queue, run, recorder)
    behind_s = 2.0
    loop.next_slot = time.perf_counter() - behind_s  # its slot passed two seconds ago
    sent_us = now_us()
    loop.step()
    ids = [i.decode() if isinstance(i, bytes) else str(i) for i in client.lrange(queue.keys.wait, 0, -1)]
    stamps = [Job(i, _text_fields(client.hgetall(queue.keys.job(i))), "").enqueued_us for i in ids]
    assert len(stamps) == 5
    assert all(s is not None and s <= sent_us - behind_s * 1e6 + 1e5 for s in stamps), (stamps, sent_us)


def test_a_full_backlog_is_looked_at_ever_less_often_and_at_once_again_when_it_has_room(
    client: Client, queue: Queue
):
    """Checks of a full wait list are client CPU no job needs: their wait doubles to a cap while the
    list stays full, and is back to the shortest once a batch fits."""
    run = TrialSettings("fused", 1, 1, 10, 10, 0.0, 0.0, 1.0, 0.0, queue.keys.name, regime=Regime.BACKLOG,
                        backlog_jobs=4000)  # fmt: skip
    loop = ProducerLoop(queue, run, Recorder())
    loop.fill()  # the pre-fill: 4,000 jobs, the bound, before the user counts as started
    assert client.llen(queue.keys.wait) == 4000 and loop.backlog == 4000
    loop.fill()  # once only
    assert client.llen(queue.keys.wait) == 4000
    waits = []
    for _ in range(6):
        waits.append(loop.poll_s)
        loop.step()
    assert waits == [BACKLOG_POLL_S * 2**i for i in range(4)] + [BACKLOG_POLL_MAX_S] * 2
    assert client.llen(queue.keys.wait) == 4000  # only looked, never added
    client.ltrim(queue.keys.wait, 0, 3899)  # 100 taken: room for a batch
    loop.step()  # the look that finds room
    loop.step()  # the batch
    assert client.llen(queue.keys.wait) == 3910 and loop.poll_s == BACKLOG_POLL_S
    # the steady regime's bound is a few batches: its look waits the shortest every time
    steady = ProducerLoop(queue, dataclasses.replace(run, regime=Regime.STEADY), Recorder())
    assert steady.poll_max_s == BACKLOG_POLL_S


def test_the_default_grid_crosses_concurrency_with_rtt_for_both_strategies():
    from bench.harness.profile import load_profile

    opts = load_profile("default").finish_fetch
    backlog = {(p.concurrency, p.rtt_ms) for p in points_of(opts) if p.regime == Regime.BACKLOG}
    assert {(c, r) for c in (1, 8, 32) for r in (0.0, 1.0)} <= backlog
    # stress adds the 5 ms round trip at every concurrency
    stress = load_profile("stress").finish_fetch
    assert {(c, 5.0) for c in (1, 8, 32)} <= {(p.concurrency, p.rtt_ms) for p in points_of(stress)}
    assert {"fused", "two_call"} <= set(opts.strategies)
    loads = {p.load for p in points_of(opts) if p.regime == Regime.OPEN}
    assert len(loads) >= 2


def test_the_remeasure_budget_stops_at_a_points_windows_and_at_the_runs_share():
    budget = Budget(windows_a_point=2, seconds=10.0)
    assert budget.take("a", 4.0) == ""
    assert budget.take("a", 4.0) == ""
    assert budget.take("a", 1.0) == POINT_BUDGET  # two extra windows at "a" already
    assert budget.take("b", 4.0) == RUN_BUDGET  # 8 s of 10 spent: 4 more do not fit
    assert budget.take("b", 2.0) == ""
    assert Budget(0, 100.0).take("a", 1.0) == NO_BUDGET


def _text_fields(raw: dict[bytes | str, bytes | str]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in raw.items()
    }


def contended_sample(contended: bool) -> MachineSample:
    return MachineSample(50.0 if contended else 0.0, 0.0, contended, frozenset())


def _stage(
    tmp_path: Path, settings: RedisSettings, server: EmbeddedRedis, opts: FinishFetchOptions
) -> list[dict[str, str]]:
    info = ServerInfo(server.url, server.source, server.binary, server.version())
    run_stage(RunContext(Profile("quick", finish_fetch=opts), settings, info, tmp_path))
    return csv_rows(tmp_path / FinishFetchRow.FILE)


RTT_MS = 1.0  # the point an rtt judge is handed at: rtt 0 is never judged


class Remeasured(Protocol):
    def __call__(
        self,
        repetitions: int,
        guard: Guard | None,
        judge: LoadJudge | None,
        rtt: RttJudge | None = None,
    ) -> list[dict[str, str]]: ...


@pytest.fixture
def remeasured(
    tmp_path: Path, settings: RedisSettings, redis_server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> Remeasured:
    """The stage at one fused point, allowed one window more, on a machine of two cores whatever
    runs it, with a guard, a load judge and an rtt judge injected (None: never contended, never
    saturated, at rtt 0; an rtt judge: at RTT_MS): its rows, given the repetitions."""
    monkeypatch.setattr(remeasure.os, "cpu_count", lambda: 2)

    def run(
        repetitions: int,
        guard: Guard | None,
        judge: LoadJudge | None,
        rtt: RttJudge | None = None,
    ) -> list[dict[str, str]]:
        # what is not injected is judged clean: the machine running the tests is busy
        monkeypatch.setattr(stage, "GUARD", guard or (lambda sample: contended_sample(False)))
        monkeypatch.setattr(stage, "LOAD_JUDGE", judge or (lambda saturated: False))
        monkeypatch.setattr(stage, "RTT_JUDGE", rtt or (lambda paid: paid))
        opts = dataclasses.replace(
            BASE, strategies=("fused",), repetitions=repetitions, remeasure_windows=1, remeasure_share=1.0,
            rtt_ms=(RTT_MS,) if rtt else BASE.rtt_ms,
        )  # fmt: skip
        return _stage(tmp_path, settings, redis_server, opts)

    return run


def _first_call() -> Callable[[object], bool]:
    """True on the first call and False after: a window judged contended, or saturated, once."""
    calls = itertools.count()
    return lambda _judged: next(calls) == 0


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_contended_window_is_measured_again_and_the_row_says_how_many_tries(
    remeasured: Remeasured, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    first = _first_call()
    (row,) = remeasured(1, lambda sample: contended_sample(first(sample)), None)
    assert (row["tries"], row["contended"], row["remeasure_stopped"]) == ("2", "False", "no")
    meta = json.loads((tmp_path / "meta.json").read_text())["finish_fetch"]
    assert meta["clean"] == {"fused-w2-c8-rtt0": "clean 1 of 1"}
    assert meta["remeasure"]["extra_windows"] == 1
    out = capsys.readouterr()
    assert "measured again (try 2)" in out.err
    (clean,) = [line for line in out.out.splitlines() if line.split()[:1] == ["clean"]]
    assert clean.split()[1:] == ["1", "of", "1", "(+1", "again)"]


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_budget_stops_measuring_again_and_the_row_and_table_say_so(
    remeasured: Remeasured, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    (row,) = remeasured(1, lambda sample: contended_sample(True), None)
    assert (row["tries"], row["contended"], row["remeasure_stopped"]) == ("2", "True", POINT_BUDGET)
    meta = json.loads((tmp_path / "meta.json").read_text())["finish_fetch"]
    assert meta["clean"] == {"fused-w2-c8-rtt0": "clean 0 of 1"}
    out = capsys.readouterr().out
    (jobs,) = [line for line in out.splitlines() if line.split()[:1] == ["jobs/s"]]
    assert jobs.split()[-1] == "c"  # the cell is marked, and the mark explained under the table
    assert "c: every window of the cell was contended" in " ".join(out.split())


def test_a_saturated_window_takes_one_more_load_process_up_to_the_cores_never_fewer():
    assert more_processes(1, cores=2) == 2
    assert more_processes(2, cores=2) == 2  # no core left: the same, so not measured again
    assert more_processes(1, cores=1) == 1
    assert more_processes(3, cores=2) == 3  # a profile's own count is kept, not cut


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_saturated_window_is_measured_again_on_one_more_process_and_the_point_keeps_it(
    remeasured: Remeasured, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    first, second = remeasured(2, None, _first_call())
    assert (first["tries"], first["loadgen_processes"], first["remeasure_stopped"]) == ("2", "2", "no")
    # the point's next trial starts on two processes: no window spent to learn it again
    assert (second["tries"], second["loadgen_processes"]) == ("1", "2")
    for rep in (1, 2):  # what Locust itself reported of each repetition's last window
        (summary,) = tmp_path.rglob(f"*__r{rep}_summary.json")
        roles = [p["role"] for p in json.loads(summary.read_text())["processes"]]
        assert roles.count("worker") == 2, roles
    assert "measured again on 2 load processes (try 2)" in capsys.readouterr().err


def test_the_rtt_rule_allows_ten_percent_or_two_tenths_of_a_ms_whichever_is_larger():
    # at 1 ms, 0.2 ms is the larger: 1.2 paid is within, a µs more is not
    assert (rtt_missed(1.0, 1.2), rtt_missed(1.0, 1.201)) == (False, True)
    # at 5 ms, 10% is the larger (0.5 ms); at 2 ms they meet
    assert (rtt_missed(5.0, 5.5), rtt_missed(5.0, 5.501), rtt_missed(5.0, 5.3)) == (False, True, False)
    assert (rtt_missed(2.0, 2.2), rtt_missed(2.0, 2.201)) == (False, True)
    # over, not under (a wait never ends early); nothing slept at rtt 0; no figure, no verdict
    assert not rtt_missed(1.0, 0.7)
    assert not rtt_missed(0.0, 3.0) and not rtt_missed(1.0, None)
    # one strategy's paid rtt against the other's: the same tolerance, of the nominal rtt
    assert (rtt_missed(1.0, 1.65, 1.45), rtt_missed(1.0, 1.651, 1.45)) == (False, True)
    assert (rtt_missed(5.0, 5.9, 5.4), rtt_missed(5.0, 5.901, 5.4)) == (False, True)


def _late(windows: int) -> RttJudge:
    """An rtt judge on a slow clock: the first ``windows`` windows paid 1.6x the nominal rtt, every
    later one the nominal rtt itself."""
    calls = itertools.count()
    return lambda _paid: 1.6 * RTT_MS if next(calls) < windows else RTT_MS


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_rtt_re_measure_on_an_injected_slow_clock(
    remeasured: Remeasured, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """rep 1 pays a late rtt, is measured again on one more load process, is late again and the
    budget (one window a point) stops it: flagged. rep 2 starts on as many processes, and its rtt is
    on time: not flagged."""
    monkeypatch.setattr(remeasure.os, "cpu_count", lambda: 4)  # cores left: the budget stops it
    first, second = remeasured(2, None, None, _late(2))
    said = ("tries", "loadgen_processes", "remeasure_stopped", "rtt_slept_ms", "rtt_missed")
    assert [first[k] for k in said] == ["2", "2", POINT_BUDGET, "1.6", "True"]  # the judged rtt, recorded
    assert [second[k] for k in said] == ["1", "2", "no", "1.0", "False"]
    assert "rtt paid 1.60 ms at 1 ms; measured again on 2 load processes (try 2)" in capsys.readouterr().err


def test_the_open_rate_takes_each_strategy_clean_trials_or_all_of_its_own():
    # CI once saw fused clean and two_call contended: the rate came from fused alone, twice two_call's.
    base = finish_fetch_row(jobs_per_s=24_000.0, concurrency=8, regime=Regime.BACKLOG)
    point = Point(workers=2, rtt_ms=0.0, concurrency=8)
    two_call = dataclasses.replace(base, strategy="two_call", jobs_per_s=12_000.0, contended=True)
    assert capacity([base, two_call], "echomq", point) == 12_000.0
    # a clean trial of a strategy outweighs its contended ones; the other protocol is not counted
    rows = [
        base,
        two_call,
        dataclasses.replace(two_call, rep=2, jobs_per_s=16_000.0, contended=False),
        dataclasses.replace(base, protocol="bullmq", jobs_per_s=1_000.0),
    ]
    assert capacity(rows, "echomq", point) == 16_000.0
    assert capacity(rows, "echomq", Point(workers=4, rtt_ms=0.0, concurrency=8)) is None


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_stage_runs_backlog_then_open_at_a_share_of_the_measured_capacity(
    tmp_path: Path, settings: RedisSettings, redis_server: EmbeddedRedis, capsys: pytest.CaptureFixture[str]
):
    opts = dataclasses.replace(BASE, open_at=("c8-rtt0",), open_loads=(0.5,))
    rows = _stage(tmp_path, settings, redis_server, opts)
    backlog = {r["strategy"]: r for r in rows if r["regime"] == Regime.BACKLOG}
    opened = {r["strategy"]: r for r in rows if r["regime"] == Regime.OPEN}
    assert set(backlog) == set(opened) == {"fused", "two_call"}
    for row in backlog.values():  # the wait list never ran dry under Locust either
        assert int(row["wait_samples"]) >= 3 and row["wait_empty_samples"] == "0", row
        assert (row["producers"], row["batch_size"]) == ("3", "200")
    assert float(backlog["fused"]["fetches_alone_per_job"]) <= 0.02
    # both strategies open at one rate: half the lower of their backlog jobs/s
    rate = 0.5 * min(float(r["jobs_per_s"]) for r in backlog.values())
    for row in opened.values():
        assert float(row["target_rate"]) == pytest.approx(rate, rel=0.01)
        assert float(row["load"]) == 0.5 and row["e2e_p999_us"] != "", row
    out = capsys.readouterr()
    assert "open at 50% of the backlog capacity" in out.out and "queue latency p99.9 µs" in out.out
    assert "queue latency p50" in out.err and "backlog wait p50" in out.err  # the progress lines


def test_job_ms_at_adds_only_the_named_cells_at_each_extra_job_time_and_no_raw_driver() -> None:
    opts = dataclasses.replace(
        BASE, concurrency=(1, 8), rtt_ms=(0.0, 1.0), raw_driver=True, open_at=("echomq.c8-rtt1",),
        job_ms_at=("echomq.c8-rtt1",), job_ms_extra=(1.0, 10.0),
    )  # fmt: skip
    points = points_of(opts)
    held = [p for p in points if p.job_ms]
    assert [(p.label, p.protocol, p.regime) for p in held] == [
        ("w2-c8-j1-rtt1", "echomq", Regime.BACKLOG), ("w2-c8-j10-rtt1", "echomq", Regime.BACKLOG),
    ]  # fmt: skip
    # the open points stay at the grid's job time, and the raw driver measures the grid only
    assert all(p.job_ms == 0 for p in points if p.regime == Regime.OPEN)
    assert not any(raw_at(opts, p, "echomq") for p in held) and raw_at(opts, points[0], "echomq")
    with pytest.raises(BenchError, match="profile key job-ms-at: 'c8' is not a grid point"):
        dataclasses.replace(BASE, job_ms_at=("c8",))


def test_raw_driver_at_runs_the_raw_driver_at_the_named_cells_and_protocols_only() -> None:
    opts = dataclasses.replace(
        BASE,
        concurrency=(1, 8),
        rtt_ms=(0.0, 1.0),
        raw_driver=True,
        raw_driver_at=("c8-rtt0", "bullmq.c1-rtt1"),
    )
    at = {
        (p.label, protocol)
        for p in points_of(opts)
        for protocol in ("echomq", "bullmq")
        if raw_at(opts, p, protocol)
    }
    assert at == {("w2-c8-rtt0", "echomq"), ("w2-c8-rtt0", "bullmq"), ("w2-rtt1", "bullmq")}
    with pytest.raises(BenchError, match="profile key raw-driver-at: '8' is not a grid point"):
        dataclasses.replace(BASE, raw_driver_at=("8",))
