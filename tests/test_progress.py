"""The terminal as a user reads it: progress lines that never wrap, with a stage count and an ETA;
tables that fit 100 columns and fold below that; our one line of error after a progress line."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.progress import Progress, StagePlan, clock, end_open_line
from bench.harness.server import EmbeddedRedis
from bench.paths import REPO

LONG = "atomic_sliced all_stalled 100,000: 14.6 ms; hold 1.2 ms, probe max 10,412 µs, 0 BUSY " * 3
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_at_80_columns_are_never_longer_than_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    plan = [
        StagePlan("finish_fetch", (4.0,) * 6),
        StagePlan("sweep", (1.0,) * 10),
        StagePlan("report", (5.0,)),
    ]
    progress = Progress(plan, stream=out)
    for stage in ("finish_fetch", "sweep", "report"):
        progress.stage = stage
        progress("starting")
        for _ in range(3):
            progress.step(LONG)
    lines = out.getvalue().splitlines()
    assert len(lines) == 12  # one line an update
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "[2/3 sweep 1/10, ETA " in lines[5] and lines[5].endswith("…")


def test_on_a_terminal_the_line_is_rewritten_in_place_and_one_cell_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = FakeTerminal()
    progress = Progress([StagePlan("race", (1.0, 1.0))], stream=out, stage="race")
    progress.step(LONG)
    progress.step("short")
    end_open_line()  # as the entry point does before its one line
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    shown = [ANSI.sub("", part) for part in text.rstrip("\n").split("\r") if part]
    assert len(shown) == 2 and all(len(part) <= 77 for part in shown), shown  # room for ^C
    assert "[1/1 race 2/2, ETA 0:00] short" in shown[-1]


def test_the_eta_covers_the_stages_still_to_come() -> None:
    progress = Progress([StagePlan("a", (10.0, 10.0)), StagePlan("b", (30.0,))], stream=io.StringIO())
    progress.stage = "a"
    eta = progress.eta()
    assert eta is not None and 49.0 < eta <= 50.0  # a's 20 s and b's 30 s, nothing done yet
    assert Progress(stream=io.StringIO(), stage="alone").eta() is None  # no plan: no ETA
    assert clock(65) == "1:05" and clock(3723) == "1:02:03"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_eta_follows_what_the_run_s_own_points_took(monkeypatch: pytest.MonkeyPatch) -> None:
    """Estimates 10 s a point in a, 30 s for b; a's points take 5 s each (twice as fast as
    planned): the rest of a and all of b are counted at that pace, the point under way counts
    as begun, and the ETA never goes below nothing."""
    fake = FakeClock()
    monkeypatch.setattr("bench.harness.progress.time.monotonic", fake)
    progress = Progress([StagePlan("a", (10.0,) * 4), StagePlan("b", (30.0,))], stream=io.StringIO())
    progress.stage = "a"
    assert progress.eta() == pytest.approx(70.0)  # nothing done: the plan as it is
    fake.now += 5
    progress.step("a 1")
    assert progress.eta() == pytest.approx(3 * 5 + 15)  # a's pace 0.5 for a's rest and for b
    fake.now += 2  # the second point under way for 2 s
    assert progress.eta() == pytest.approx(3 * 5 - 2 + 15)
    for n in range(2, 5):
        fake.now += 3 if n == 2 else 5
        progress.step(f"a {n}")
    progress.stage = "b"
    assert progress.eta() == pytest.approx(15.0)  # b at the run's pace: 20 s taken for 40 planned
    fake.now += 100  # b overruns: the ETA says nothing is left, never a negative time
    assert progress.eta() == 0.0


def test_the_progress_line_has_one_counter() -> None:
    out = io.StringIO()
    progress = Progress([StagePlan("finish_fetch", (1.0,) * 5)], stream=out, stage="finish_fetch")
    progress("echomq fused w2-rtt0 rep 1")
    [line] = out.getvalue().splitlines()
    assert len(re.findall(r"\b\d+/\d+\b", line)) == 2, line  # the stage's of the run's, its points'
    assert "[1/1 finish_fetch 0/5, ETA " in line


@pytest.mark.slow
def test_a_run_s_progress_and_tables_fit_80_columns(tmp_path: Path, redis_server: EmbeddedRedis) -> None:
    conf = tmp_path / "tiny.conf"
    conf.write_text(
        "stages = race\nrace-variants = atomic, app_side\nrace-sweepers = 2\nrace-jobs = 20\n"
        "race-delay-ms = 0\nrace-reps = 1\nrace-workers = 1\n"
    )
    env = {"REDIS_URL": redis_server.url, "COLUMNS": "80", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--profile", str(conf), "--results", str(tmp_path / "r")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    progress = done.stderr.splitlines()
    assert any("[1/1 race 1/2, ETA" in line for line in progress), done.stderr
    for line in progress + done.stdout.splitlines():
        if not line.startswith("results: "):  # a path is printed whole, so it can be copied
            assert len(line) <= 80, line
    assert "per_10k" in done.stdout


@pytest.mark.parametrize("name", ["smoke", "default", "stress"])
def test_the_race_eta_plans_every_run_of_every_protocol(name: str) -> None:
    # run_plan steps the progress line once a setting a repetition, each protocol's settings included
    from bench.harness.profile import load_profile
    from bench.stages.race.plan import RacePlan, points_of
    from bench.stages.race.stage import point_seconds

    profile = load_profile(name)
    plan = RacePlan.from_options(profile.race, profile.protocols)
    assert len(point_seconds(profile)) == len(points_of(plan)) * plan.reps
