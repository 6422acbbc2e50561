"""The regimes (design.md "Name the regime") and windows measured again until clean: counts and
invariants against a real redis-server, never a duration or a throughput."""

from __future__ import annotations

import dataclasses
import time

import pytest

from bench.harness.machine import MachineSample
from bench.harness.profile import FinishFetchOptions
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Job, Queue, now_us
from bench.stages.finish_fetch.loadstats import Recorder, RunSettings
from bench.stages.finish_fetch.plan import BACKLOG, OPEN, STEADY, Point, points_of, regime_options
from bench.stages.finish_fetch.producer_loop import ProducerLoop
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.remeasure import NO_BUDGET, POINT_BUDGET, RUN_BUDGET, Budget

BASE = FinishFetchOptions(
    strategies=("fused", "two_call"), repetitions=1, workers=(2,), concurrency=(8,), rtt_ms=(0.0,),
    payload_bytes=20, warmup_s=0.3, measure_s=1.0, fidelity_calls=0, raw_driver=False,
)  # fmt: skip


def _settings(opts: FinishFetchOptions, point: Point, strategy: str = "fused") -> RunSettings:
    return RunSettings.at(regime_options(opts, point), strategy, point, "unused")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fused", "two_call"])
def test_a_backlog_trial_never_finds_the_wait_list_empty_and_fused_never_fetches_alone(
    settings: RedisSettings, strategy: str
):
    run = _settings(BASE, Point(2, 0.0, 8, regime=BACKLOG), strategy)
    assert (run.regime, run.producers, run.batch_size) == (BACKLOG, 3, 200)
    summary = run_raw(settings, run)
    d = summary.figures
    assert summary.audit is not None and summary.audit.ok
    assert d.jobs > 100
    assert d.wait_samples >= 10  # sampled through the whole window
    assert d.wait_empty_samples == 0, d
    if strategy == "fused":
        assert d.fetches_alone_per_job <= 0.02, d


@pytest.mark.slow
def test_a_steady_trial_whose_producers_set_the_pace_says_producer(settings: RedisSettings):
    # one producer adding one job an exchange against 16 job slots: the workers wait for jobs
    opts = dataclasses.replace(BASE, producers=1, batch_size=1)
    run = _settings(opts, Point(2, 0.0, 8, regime=STEADY))
    assert (run.regime, run.producers, run.batch_size) == (STEADY, 1, 1)
    d = run_raw(settings, run).figures
    assert d.fetches_alone_per_job > 0.02, d  # starved: the wait list ran dry
    assert d.limit == "producer", d.pace_shares


@pytest.mark.slow
def test_an_open_trial_adds_at_its_rate_and_times_every_finished_job(settings: RedisSettings):
    rate = 400.0  # far below what the workers take: the producer is never behind for long
    opts = dataclasses.replace(BASE, producers=1, batch_size=10)
    point = Point(2, 0.0, 8, regime=OPEN, load=0.5).at_rate(rate)
    run = _settings(opts, point)
    assert (run.regime, run.target_rate) == (OPEN, rate)
    summary = run_raw(settings, run)
    d, counters = summary.figures, summary.counters
    # the schedule's batches that fell in the window, give or take one a producer at each edge
    scheduled = rate * summary.window_s
    assert abs(counters["jobs_added"] - scheduled) <= 2 * opts.batch_size, (counters, scheduled)
    assert not d.saturated
    # queue latency recorded for every job finished in the window
    assert summary.percentiles_us["e2e"]["count"] == d.jobs > 0


def test_an_open_producer_starts_a_jobs_clock_at_its_scheduled_time(client: Client, queue: Queue):
    """Coordinated omission avoided: a producer behind its schedule stamps each job with the slot
    it was due at, not with when it was sent."""
    run = RunSettings("fused", 1, 1, 5, 10, 100.0, 0.0, 1.0, 0.0, queue.keys.name, regime=OPEN)
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


def test_the_default_grid_crosses_concurrency_with_rtt_for_both_strategies():
    from bench.harness.profile import load_profile

    opts = load_profile("default").finish_fetch
    backlog = {(p.concurrency, p.rtt_ms) for p in points_of(opts) if p.regime == BACKLOG}
    assert {(c, r) for c in (1, 8, 32) for r in (0.0, 1.0, 5.0)} <= backlog
    assert {"fused", "two_call"} <= set(opts.strategies)
    loads = {p.load for p in points_of(opts) if p.regime == OPEN}
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
