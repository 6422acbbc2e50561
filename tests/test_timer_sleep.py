"""The Locust side's sleep (bench/stages/finish_fetch/in_locust/sleep.py): a timerfd waited on by gevent's
loop. Invariants only: it never wakes early, a zero wait still yields, each greenlet's own sleep
wakes it, at its own deadline or after, and without a timerfd the sleep is gevent's."""

from __future__ import annotations

import time
from collections.abc import Iterator

import gevent
import pytest
from gevent.hub import get_hub

from bench.stages.finish_fetch.in_locust import sleep as timer_module
from bench.stages.finish_fetch.in_locust.sleep import TimerSleep, timer_sleep, yield_if_overdue


@pytest.fixture(autouse=True)
def own_hub() -> Iterator[None]:
    """A gevent hub for the test alone (gevent patches nothing here), destroyed after it."""
    yield
    get_hub().destroy(destroy_loop=True)


def test_a_timer_sleep_never_wakes_before_its_deadline() -> None:
    sleep = timer_sleep()
    assert isinstance(sleep, TimerSleep)  # Linux: the timerfd, not gevent's tick
    try:
        for seconds in (0.0003, 0.001, 0.002, 0.0003):  # shorter after longer: armed anew each time
            before = time.monotonic()
            sleep(seconds)
            assert time.monotonic() - before >= seconds
    finally:
        sleep.close()


def test_a_zero_wait_lets_the_other_greenlets_run() -> None:
    sleep = TimerSleep()
    ran: list[str] = []
    other = gevent.spawn(ran.append, "other")
    try:
        sleep(0)
        assert ran == ["other"]
    finally:
        other.join()
        sleep.close()


def test_greenlets_with_their_own_sleeps_each_wake_at_their_own_deadline() -> None:
    woke: list[int] = []
    sleeps = [TimerSleep() for _ in range(3)]

    def nap(index: int, seconds: float) -> None:
        before = time.monotonic()
        sleeps[index](seconds)
        assert time.monotonic() - before >= seconds
        woke.append(index)

    try:
        gevent.joinall([gevent.spawn(nap, i, seconds) for i, seconds in enumerate((0.030, 0.002, 0.015))])
    finally:
        for sleep in sleeps:
            sleep.close()
    assert sorted(woke) == [0, 1, 2]  # none left waiting on a deadline another one reset


def test_without_a_timerfd_the_sleep_is_gevents(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoTimerfd:  # a libc without timerfd_create (not Linux)
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

    monkeypatch.setattr(timer_module.ctypes, "CDLL", NoTimerfd)
    assert timer_sleep() is gevent.sleep


def test_a_busy_greenlet_lets_one_whose_sleep_is_over_run_before_it_finishes() -> None:
    events: list[str] = []
    sleep = TimerSleep()

    def sleeper() -> None:
        sleep(0.001)
        events.append("woke")

    def busy() -> None:  # a worker's long round: it never waits on I/O, it only checks
        for _ in range(200):
            spin_until = time.monotonic() + 0.00025
            while time.monotonic() < spin_until:
                pass
            yield_if_overdue()
        events.append("round done")

    try:
        gevent.joinall([gevent.spawn(sleeper), gevent.spawn(busy)])
    finally:
        sleep.close()
    assert events == ["woke", "round done"]  # without the check the sleeper waits for the round
