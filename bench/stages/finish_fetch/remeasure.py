"""Measured again until clean (design.md "Clean windows"): a trial whose window the machine watch
marked contended runs again, within a budget, so each point rests on the asked number of clean
windows or says how many it got. A window whose load generator saturated runs again on one more
Locust process, up to the machine's cores: the same load on one process would saturate again. So
does a window whose simulated round trip paid more than its nominal rtt allows
(bench.results.finish_fetch.rtt_missed): a busy load process wakes late from its waits.

The budget has two parts, both profile keys: extra windows a point (``remeasure-windows``) and
extra time over the whole stage (``remeasure-share`` of its planned seconds). A trial is priced at
its planned seconds, not at what it took, so the budget does not depend on how slow the machine
was."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from bench.harness.machine import MachineSample

POINT_BUDGET = "point budget spent"
RUN_BUDGET = "run budget spent"
NO_BUDGET = "not measured again (remeasure-windows 0)"

# What judges a trial's window, from its own figure out to the one recorded (stage.py keeps each
# as it is; a test injects another):
Guard = Callable[[MachineSample | None], MachineSample | None]  # its machine sample (contended?)
LoadJudge = Callable[[bool], bool]  # whether its load generator saturated
RttJudge = Callable[[float], float]  # the ms its simulated round trip paid


def more_processes(processes: int, cores: int | None = None) -> int:
    """The load processes a saturated window is measured again on: one more, up to the cores
    (a Locust process uses one core at most); the same number when there is no core left."""
    return min(processes + 1, max(cores or os.cpu_count() or 1, processes))


@dataclass
class Budget:
    """What is left of the stage's budget for windows measured again."""

    windows_a_point: int
    seconds: float  # remeasure-share x the stage's planned seconds
    spent_s: float = 0.0
    spent: Counter[Hashable] = field(default_factory=Counter)  # extra windows taken, by point

    def take(self, point: Hashable, trial_s: float) -> str:
        """One more window at ``point`` priced ``trial_s``: "" when the budget allows it (and it is
        counted), else why not."""
        if self.windows_a_point <= 0:
            return NO_BUDGET
        if self.spent[point] >= self.windows_a_point:
            return POINT_BUDGET
        if self.spent_s + trial_s > self.seconds:
            return RUN_BUDGET
        self.spent[point] += 1
        self.spent_s += trial_s
        return ""


def clean_line(clean: int, asked: int) -> str:
    """How many of a point's asked windows are clean, as the progress line and table say it."""
    return f"clean {clean} of {asked}"
