"""A sleep that wakes on time under gevent: the simulated round trip and job-ms inside Locust.

gevent's sleep is a libev timer, and libev blocks in ``epoll_wait``, whose timeout counts whole
milliseconds (with a 1 ms floor): on this suite's 2-core VM a 1 ms sleep took 1.13 ms alone and
1.96 ms among four greenlets that each work 260 µs between sleeps, so a simulated 1 ms round trip
was paid 1.5-1.8 ms under Locust. A timerfd (Linux) is a file descriptor that becomes readable at a
nanosecond deadline: the loop waits on it as on a socket, and ``epoll_wait`` returns when it fires.
The same two cases took 1.08 ms and 1.06 ms. Where there is no timerfd the sleep is gevent's.

One sleep a connection: a timerfd has one deadline, so two greenlets must not share one (a
connection's exchanges and its worker's job-ms waits are one greenlet's).

A timer that fires while another greenlet works still waits for it to yield: a worker's round of 8
jobs is about 0.6 ms of CPU here. So a round checks, between its jobs, whether a sleep's deadline
has passed (``yield_if_overdue``), and lets that greenlet go first when one has.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
from gevent.hub import get_hub

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = os.O_CLOEXEC
READ = 1  # libev's EV_READ


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class TimerSleep:
    """``sleep(seconds)`` on a timerfd of its own, waited on by gevent's loop."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._settime = libc.timerfd_settime  # AttributeError where libc has no timerfd
        fd = libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self.fd = fd
        self._hub = get_hub()
        self._watcher = self._hub.loop.io(fd, READ)
        self._spec = _Itimerspec()
        self.deadline = 0.0

    def __call__(self, seconds: float) -> None:
        if seconds <= 0:
            gevent.sleep(0)  # a zero wait still lets the other greenlets run
            return
        nanoseconds = max(1, int(seconds * 1e9))  # an it_value of 0 would disarm the timer
        self._spec.it_value.tv_sec, self._spec.it_value.tv_nsec = divmod(nanoseconds, 1_000_000_000)
        self.deadline = time.monotonic() + seconds  # the timerfd's clock (CLOCK_MONOTONIC)
        if self._settime(self.fd, 0, ctypes.byref(self._spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        _SLEEPING.append(self)
        try:
            while True:  # arming it again reset the count of expirations: a read means this deadline
                self._hub.wait(self._watcher)
                try:
                    os.read(self.fd, 8)
                    return
                except BlockingIOError:
                    continue
        finally:
            _SLEEPING.remove(self)

    def close(self) -> None:
        os.close(self.fd)


_SLEEPING: list[TimerSleep] = []  # the sleeps waiting now (one a connection: a few)


def yield_if_overdue() -> None:
    """Let a greenlet whose sleep is over run now, rather than after this one's work."""
    if _SLEEPING:
        now = time.monotonic()
        if any(sleep.deadline <= now for sleep in _SLEEPING):
            gevent.sleep(0)


def timer_sleep() -> Callable[[float], None]:
    """A sleep for one connection: on a timerfd where Linux has one, else gevent's."""
    try:
        return TimerSleep()
    except (AttributeError, OSError):
        return gevent.sleep


# Locust's master polls its workers' stop every 1 s and sleeps 0.5 s in each of its two quits:
# 2 s a trial on two processes, a tenth of make bench. Past the window, it polls this often.
STOP_POLL_S = 0.02


class _PromptSleeps:
    """Locust's runners module's ``gevent``, with the sleeps of its runners' ``stop`` and ``quit``
    cut to ``longest_s``: the master's stop waits on the same condition (every worker's users
    stopped), only seen sooner. Every other sleep (the heartbeat check's above all: it counts a
    worker missing by its own ticks) is left as it is. Left in place: the process only shuts down."""

    WAITS = frozenset({"stop", "quit"})

    def __init__(self, real: Any, longest_s: float) -> None:
        self._real = real
        self._longest_s = longest_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def sleep(self, seconds: float = 0, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code.co_name in self.WAITS:
            seconds = min(seconds, self._longest_s)
        return self._real.sleep(seconds, *args, **kwargs)


def prompt_stop(module: Any, longest_s: float = STOP_POLL_S) -> None:
    """From here on, ``module``'s runners stop and quit promptly (see _PromptSleeps)."""
    if not isinstance(module.gevent, _PromptSleeps):
        module.gevent = _PromptSleeps(module.gevent, longest_s)
