"""The run's progress line on stderr: how long the run has gone, which stage of how many, its
points done, an ETA for the whole run, and the message. On a terminal the line is rewritten in
place and cut to the terminal's width (a line that wrapped could not be rewritten); elsewhere (a
pipe, a log file) each update is a line of its own, cut to $COLUMNS when it is set."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.text import Text

SPEED_BOUNDS = (0.2, 10.0)  # how far the observed pace may correct the estimates
UNCUT = 100_000  # the width of a line nobody will see on a terminal


@dataclass(frozen=True)
class StagePlan:
    """A stage's points, each with the seconds it should take (an estimate, before it runs)."""

    name: str
    point_seconds: tuple[float, ...]

    @property
    def seconds(self) -> float:
        return sum(self.point_seconds)


def clock(seconds: float) -> str:
    """1:05, 12:40, 1:02:03."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


_open_line: list[Progress] = []  # the Progress whose line the cursor is on, if any


def end_open_line() -> None:
    """End a progress line left open, so an error or Ctrl-C message starts on a line of its own."""
    while _open_line:
        _open_line.pop().done()


class Progress:
    """The progress line. ``progress(msg)`` shows a message; ``progress.step(msg)`` marks one of the
    stage's points done, then shows it; ``progress.done()`` ends the line before other output."""

    def __init__(self, plan: Sequence[StagePlan] = (), stream: TextIO | None = None, stage: str = "") -> None:
        self.plan = list(plan)
        self.stream = stream
        self.started = time.monotonic()
        self._stage = ""
        self._stage_started = self.started
        self._last_step = self.started  # when the current stage's last point ended
        self._done = 0  # points of the current stage done
        # the run's points done so far, over finished stages: seconds taken and seconds estimated
        self._taken = 0.0
        self._estimated = 0.0
        self._open_line = False
        if stage:
            self.stage = stage

    @property
    def stage(self) -> str:
        return self._stage

    @stage.setter
    def stage(self, name: str) -> None:
        """A new stage begins; the one it ends adds what it took and its estimate to the run's pace."""
        finished = self._current()
        now = time.monotonic()
        if finished is not None and finished[1].seconds > 0:
            self._taken += now - self._stage_started
            self._estimated += finished[1].seconds
        self._stage = name
        self._stage_started = self._last_step = now
        self._done = 0

    def _current(self) -> tuple[int, StagePlan] | None:
        """The current stage's place in the plan, and its plan; None when it has none."""
        return next(((i, p) for i, p in enumerate(self.plan) if p.name == self._stage), None)

    def __call__(self, message: str) -> None:
        self._show(message)

    def step(self, message: str) -> None:
        """One point of the stage is done; show ``message`` about it."""
        self._done += 1
        self._last_step = time.monotonic()
        self._show(message)

    def done(self) -> None:
        """End the line in place, so what is printed next starts on a line of its own."""
        if self._open_line:
            self._file.write("\n")
            self._file.flush()
            self._open_line = False
        if self in _open_line:
            _open_line.remove(self)

    @property
    def _file(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def line(self, message: str) -> str:
        """The text of one update (uncut)."""
        where = self._where()
        return " ".join([clock(time.monotonic() - self.started), *([f"[{where}]"] if where else []), message])

    def _where(self) -> str:
        current, eta = self._current(), self.eta()
        if current is None or eta is None:
            return self._stage
        index, plan = current
        head = f"{index + 1}/{len(self.plan)} {self._stage}"
        if plan.point_seconds:
            head += f" {min(self._done, len(plan.point_seconds))}/{len(plan.point_seconds)}"
        return f"{head}, ETA {clock(eta)}"

    @staticmethod
    def _pace(taken: float, estimated: float) -> float:
        """Seconds taken an estimated second, within SPEED_BOUNDS; 1 before anything is done."""
        return min(max(taken / estimated, SPEED_BOUNDS[0]), SPEED_BOUNDS[1]) if estimated > 0 else 1.0

    def eta(self) -> float | None:
        """Seconds left in the whole run, from each stage's estimate of its points (StagePlan)
        corrected by what the run's points took: the current stage's points left at its own pace
        (the run's before its first), less the time the point under way has run, then every later
        stage at the run's pace so far (seconds taken over seconds estimated). None without a plan."""
        if (current := self._current()) is None:
            return None
        index, plan = current
        done = min(self._done, len(plan.point_seconds))
        done_estimate = sum(plan.point_seconds[:done])
        done_taken = self._last_step - self._stage_started
        run_pace = self._pace(self._taken + done_taken, self._estimated + done_estimate)
        here_pace = self._pace(done_taken, done_estimate) if done_estimate > 0 else run_pace
        under_way = time.monotonic() - self._last_step
        left_here = max(sum(plan.point_seconds[done:]) * here_pace - under_way, 0.0)
        later = sum(p.seconds for p in self.plan[index + 1 :]) * run_pace
        return left_here + later

    def _show(self, message: str) -> None:
        file, terminal = self._file, self._file.isatty()
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else None
        console = Console(
            file=file, force_terminal=terminal, width=width or (None if terminal else UNCUT), highlight=False
        )
        text = Text(self.line(message).replace("\n", " "), no_wrap=True, overflow="ellipsis")
        # On a terminal, a line as wide as the screen would move the cursor down; keep three cells
        # free, so the "^C" the terminal echoes after it does not wrap either.
        width = console.width - 3 if terminal else console.width
        text.truncate(max(width, 1), overflow="ellipsis")
        if terminal:
            file.write("\r\033[K")
            file.flush()
            console.print(text, end="", crop=True)
            self._open_line = True
            if self not in _open_line:
                _open_line.append(self)
        else:
            console.print(text, crop=True)
        file.flush()
