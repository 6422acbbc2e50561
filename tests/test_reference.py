"""The reference point (bench/stages/finish_fetch/reference.py) against a real redis-server: it drains
what it added, or stops at its deadline and leaves the rest in wait, audited either way."""

from __future__ import annotations

import pytest

from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Producer, Queue
from bench.stages.finish_fetch.reference import Lockstep, run_reference
from bench.stages.finish_fetch.trial_settings import TrialSettings

STRATEGIES = ("fused", "two_call", "two_call_pipelined")


def settings_at(strategy: str, measure_s: float, workers: int = 2, concurrency: int = 3) -> TrialSettings:
    return TrialSettings(
        strategy=strategy, workers=workers, producers=1, batch_size=10, payload_bytes=20, target_rate=0.0,
        warmup_s=0.0, measure_s=measure_s, rtt_ms=0.0, queue="", concurrency=concurrency,
    )  # fmt: skip


def leftover_keys(client: Client) -> list[str]:
    return [key.decode() for key in client.scan_iter(match="*ffref-*")]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_with_time_to_spare_the_reference_drains_every_job_it_added(strategy: str, settings: RedisSettings):
    reference = run_reference(settings, settings_at(strategy, measure_s=60.0), jobs=47)
    assert reference.jobs == 47 and reference.audit_ok, reference
    assert reference.cpu_us_per_job > reference.fill_cpu_us_per_job > 0
    with settings.connect() as client:
        assert leftover_keys(client) == []  # its queue is deleted after


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_past_its_deadline_the_reference_fetches_nothing_and_the_rest_stays_in_wait(
    strategy: str, settings: RedisSettings
):
    reference = run_reference(settings, settings_at(strategy, measure_s=0.0), jobs=30)
    assert reference.jobs == 0 and reference.audit_ok, reference  # 30 in wait: accounted for


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_closing_round_finishes_what_is_held_and_fetches_nothing(strategy: str, queue: Queue):
    Producer(queue).add_batch(10, 20)
    loop = Lockstep(queue, strategy, concurrency=3)
    assert loop.round() == 0 and len(loop.held) == 3  # the first round fetches for every slot
    loop.closing = True
    assert loop.round() == 3  # the three held jobs finished ...
    assert loop.held == [] and loop.free == 0  # ... and no slot asks again
    assert queue.client.llen(queue.keys.wait) == 7
    assert loop.rounds == 2
