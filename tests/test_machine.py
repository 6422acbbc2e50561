"""The machine watch: foreign CPU beside a real CPU hog, the run's own processes counted exactly.

The machine these tests run on is shared, so no assertion depends on it being
quiet: a hog makes foreign CPU at least its own share, and a window in which
every process on the machine counts as own must show (almost) no foreign CPU
however busy the machine is. Windows end on conditions (CPU seconds a child
has used), never on a sleep.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bench.__main__ import main as bench_main
from bench.harness import run_folder
from bench.harness.machine import (
    FOREIGN_LIMIT_PCT,
    MIN_WINDOW_S,
    NAMED_FROM_PCT,
    STEAL_LIMIT_PCT,
    Busy,
    MachineCheck,
    MachineSample,
    MachineWatch,
    check_machine,
    clock,
    is_contended,
    named_check,
    worst_of,
)
from tests.helpers import all_but, cpu_hog, cpu_s, tree_roots, wait_until

# A child that spawns one more child (a sleeper) each time it reads a line, and says its pid.
SPAWNER = """
import subprocess, sys
kids = []
for line in sys.stdin:
    kids.append(subprocess.Popen(["sleep", "60"]))
    print(kids[-1].pid, flush=True)
"""
# A child that, when told, runs a grandchild to its end, then says so and waits to be killed.
REAPER = """
import subprocess, sys
print("ready", flush=True)
sys.stdin.readline()
subprocess.run([sys.executable, "-c", {burn!r}], check=True)
print("reaped", flush=True)
sys.stdin.readline()
"""
# A child that ignores SIGCHLD (the kernel then reaps its children uncounted), and a grandchild
# that burns a second of CPU, says its pid and waits to be killed.
AUTOREAPER = """
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
if os.fork() == 0:
    while time.process_time() < 1.0:
        pass
    print(os.getpid(), flush=True)
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""
QUIET_DEADLINE_S = 5.0  # then skip: under `make test` the other pytest worker keeps the machine busy
# A child that burns a fixed amount of its own CPU, whatever the machine's load, then exits.
BURN = "import time\nwhile time.process_time() < {seconds}: pass\n"
# A child that, for each line it reads, burns that many seconds of its own CPU and says when it
# started and ended on the machine's monotonic clock (the clock a Locust window is timed on).
BURNER = """
import sys, time
for line in sys.stdin:
    opened, start = time.clock_gettime(time.CLOCK_MONOTONIC), time.process_time()
    while time.process_time() - start < float(line):
        pass
    print(opened, time.clock_gettime(time.CLOCK_MONOTONIC), flush=True)
"""


@pytest.fixture
def hog() -> Iterator[psutil.Process]:
    """A busy loop outside the test's process family: one core's worth of foreign CPU."""
    with cpu_hog() as process:
        yield process


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two idle children standing in for a run's processes."""
    children = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    yield children
    for child in children:
        child.kill()
        child.wait()


def until_used(pid: int, seconds: float) -> None:
    """Wait until process ``pid`` has used ``seconds`` more CPU: a window of known work."""
    start = cpu_s(pid)
    wait_until(lambda: cpu_s(pid) - start >= seconds, timeout_s=30, what=f"pid {pid} to use {seconds}s CPU")


HOG_USES_S = 0.8  # the hog's CPU seconds inside a window: the window ends when it has used them
TICK_SLACK_S = 0.05  # CPU times tick in 10 ms, per CPU and per process


def cpu_seconds(pct: float, sample: MachineSample) -> float:
    """A share of a core over the sample's window, as CPU seconds."""
    return pct * sample.window_s / 100.0


def test_a_cpu_hog_outside_the_run_counts_as_foreign_cpu(hog, sleepers) -> None:
    # However little of a core a loaded machine leaves the hog, the window lasts until the hog has
    # used HOG_USES_S of CPU: all of it is foreign, whatever else runs here adds to it.
    with MachineWatch([s.pid for s in sleepers]) as watch:
        until_used(hog.pid, HOG_USES_S)
    sample = watch.sample
    assert sample is not None
    assert cpu_seconds(sample.foreign_cpu_pct, sample) >= HOG_USES_S - TICK_SLACK_S, sample
    assert sample.own_pids == {s.pid for s in sleepers}
    assert sample.contended == is_contended(sample.foreign_cpu_pct, sample.steal_pct)
    assert sample.row_fields()["contended"] is sample.contended


def test_foreign_cpu_or_steal_over_its_limit_is_contended() -> None:
    # The judgement alone, on figures given by hand: no sample of this machine decides it.
    assert is_contended(FOREIGN_LIMIT_PCT + 0.1, 0.0)
    assert is_contended(0.0, STEAL_LIMIT_PCT + 0.1)
    assert not is_contended(FOREIGN_LIMIT_PCT, STEAL_LIMIT_PCT)
    busy = MachineSample(95.0, 0.0, is_contended(95.0, 0.0), frozenset({1}), window_s=1.0)
    assert busy.row_fields() == {"foreign_cpu_pct": 95.0, "steal_pct": 0.0, "contended": True}


def test_the_same_hog_counted_as_the_run_is_not_foreign(hog) -> None:
    # Every process on the machine is own here, the hog included, so whatever else the shared
    # machine is doing, foreign CPU is what the accounting cannot place: near zero.
    with MachineWatch(tree_roots()) as watch:
        until_used(hog.pid, HOG_USES_S)
    sample = watch.sample
    assert sample is not None
    assert hog.pid in sample.own_pids
    # the hog ran, and was counted as own
    assert cpu_seconds(sample.own_cpu_pct, sample) >= HOG_USES_S - TICK_SLACK_S, sample
    assert sample.foreign_cpu_pct < FOREIGN_LIMIT_PCT, sample
    assert sample.contended == (sample.steal_pct > STEAL_LIMIT_PCT)


@pytest.mark.slow
def test_a_process_that_ends_uncounted_by_its_parent_is_not_taken_off_own_cpu(hog) -> None:
    # The grandchild's second of CPU before the window never reaches its parent's count of
    # reaped children (SIGCHLD ignored): taking it off own CPU would make it foreign.
    parent = subprocess.Popen([sys.executable, "-c", AUTOREAPER], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        with MachineWatch(tree_roots()) as watch:
            until_used(hog.pid, 0.4)
            psutil.Process(grandchild).kill()
            wait_until(lambda: not psutil.pid_exists(grandchild), timeout_s=10, what="the grandchild gone")
            until_used(hog.pid, 0.4)
    finally:
        parent.kill()
        parent.wait()
    sample = watch.sample
    assert sample is not None and grandchild in sample.own_pids
    # Taken off own CPU, the grandchild's second would be foreign: judged against half of it, not
    # against the 10% limit, which short-lived processes of a busy machine alone can pass (11.8%).
    assert cpu_seconds(sample.foreign_cpu_pct, sample) < 0.5, sample


@pytest.mark.slow
def test_without_the_hog_a_quiet_window_is_not_contended(sleepers) -> None:
    # The machine is shared: try windows until one is quiet, and say who was busy if none is.
    deadline = time.monotonic() + QUIET_DEADLINE_S
    while time.monotonic() < deadline:
        with MachineWatch([s.pid for s in sleepers]) as watch:
            time.sleep(0.5)  # a window of nothing: its length is not what is asserted
        sample = watch.sample
        assert sample is not None
        if sample.foreign_cpu_pct < FOREIGN_LIMIT_PCT and sample.steal_pct <= STEAL_LIMIT_PCT:
            assert not sample.contended
            return
    busy = check_machine().culprits()
    pytest.skip(f"the shared machine was never quiet in {QUIET_DEADLINE_S:.0f} s: {busy}")


def test_a_child_born_and_reaped_inside_the_window_counts_as_own() -> None:
    # The parent runs a child that burns 0.5 s of CPU and reaps it, inside the window: no scan
    # sees the child (one scan at each end), yet its CPU reaches the parent's count of reaped children.
    parent = subprocess.Popen(
        [sys.executable, "-c", REAPER.format(burn=BURN.format(seconds=0.5))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        assert parent.stdout.readline().strip() == "ready"
        with MachineWatch([parent.pid], interval_s=60.0) as watch:
            parent.stdin.write("go\n")
            parent.stdin.flush()
            assert parent.stdout.readline().strip() == "reaped"
    finally:
        parent.kill()
        parent.wait()
    sample = watch.sample
    assert sample is not None
    own_cpu_s = sample.own_cpu_pct * sample.window_s / 100
    assert own_cpu_s >= 0.45, sample


def test_the_own_pids_are_exactly_the_run_family_and_new_children_count(sleepers) -> None:
    spawner = subprocess.Popen(
        [sys.executable, "-c", SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert spawner.stdin is not None and spawner.stdout is not None
    try:
        spawner.stdin.write("\n")
        spawner.stdin.flush()
        first = int(spawner.stdout.readline())
        roots = [spawner.pid, sleepers[0].pid]
        with MachineWatch(roots, interval_s=0.05) as watch:
            spawner.stdin.write("\n")  # a child born during the window
            spawner.stdin.flush()
            second = int(spawner.stdout.readline())
            wait_until(lambda: second in watch.counted_so_far(), what="the new child to be scanned")
        sample = watch.sample
        assert sample is not None
        # The spawner, its two children and the first sleeper; not the other sleeper, not pytest.
        assert sample.own_pids == {spawner.pid, first, second, sleepers[0].pid}
    finally:
        spawner.kill()
        spawner.wait()
        for pid in (first, second):
            psutil.Process(pid).kill()


HOG_PID, OWN_PID, IDLE_PID = 4242, 77, 99  # processes of a check given by hand


def hand_check(hog_s: float = 0.95, own_s: float = 0.5) -> MachineCheck:
    """A check whose window (1 s) saw a hog outside the run use ``hog_s`` of CPU, the run's own
    process ``own_s`` and an idle process nothing: the sample and both CPU tables given by hand."""
    sample = MachineSample(
        100 * hog_s, 0.0, is_contended(100 * hog_s, 0.0), frozenset({OWN_PID}), window_s=1.0
    )
    before = {(HOG_PID, 1.0): ("hog", 10.0), (OWN_PID, 2.0): ("python", 3.0), (IDLE_PID, 3.0): ("sleep", 0.0)}
    after = {(HOG_PID, 1.0): ("hog", 10.0 + hog_s), (OWN_PID, 2.0): ("python", 3.0 + own_s)}
    after[(IDLE_PID, 3.0)] = ("sleep", 0.0)
    return named_check(sample, before, after)


def test_the_check_names_the_hog() -> None:
    check = hand_check()
    assert check.contended
    assert [b.pid for b in check.busiest] == [HOG_PID]  # the run's own and the idle one unnamed
    warning = check.warning()
    assert warning is not None and "\n" not in warning
    assert f"pid {HOG_PID} hog uses 95% of a core" in warning
    assert warning.endswith(": results will be marked contended")
    assert check.as_meta()["contended"] is True


def test_the_check_names_a_real_hog_it_saw_use_the_cpu(hog) -> None:
    # The real thing, decided by the CPU the hog's own counter says it used in the check, not by how
    # much a loaded machine gave it: checks are taken until one saw it use twice the share a name
    # needs (or the deadline fails the test). The rest of the machine is own, so no busier process
    # of a shared machine can take the hog's place.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        start = cpu_s(hog.pid)
        check = check_machine(all_but(hog))
        used_pct = 100 * (cpu_s(hog.pid) - start) / check.sample.window_s
        assert not {b.pid for b in check.busiest} & check.sample.own_pids  # only foreign ones are named
        if used_pct >= 2 * NAMED_FROM_PCT:
            assert hog.pid in {b.pid for b in check.busiest}, (used_pct, check)
            return
    raise AssertionError(f"the hog never used {2 * NAMED_FROM_PCT:.0f}% of a core in a 1 s check in 30 s")


@pytest.mark.parametrize("command", ["run", "sweep", "race"])  # every command that opens a run folder
def test_quiet_machine_with_a_hog_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    # The check before the run is given (a hog using 95% of a core): what the machine is doing
    # now cannot make the command start.
    monkeypatch.setattr(run_folder, "check_machine", lambda *args, **kwargs: hand_check())
    results = tmp_path / "results"
    assert bench_main([command, "--profile", "smoke", "--quiet-machine", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("echomq-bench: error: the machine is not quiet")
    assert f"pid {HOG_PID} " in err
    assert not results.exists() or not any(results.iterdir())


@pytest.fixture
def burner() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    yield child
    child.kill()
    child.wait()


def burn(child: subprocess.Popen[str], seconds: float) -> tuple[float, float]:
    """Have the burner use ``seconds`` of CPU; the span it took, on the monotonic clock."""
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(f"{seconds}\n")
    child.stdin.flush()
    opened, closed = map(float, child.stdout.readline().split())
    return opened, closed


def own_cpu_s(sample: MachineSample) -> float:
    return sample.own_cpu_pct * sample.window_s / 100


def past_a_mark(watch: MachineWatch) -> None:
    """Wait until the watch has left a mark after now, so what is timed next is a part of the watch
    of its own, however late a busy machine runs the watch's scans."""
    seen = watch.scans_so_far()
    wait_until(lambda: watch.scans_so_far() >= seen + 2, what="two more scans of the watch")


@pytest.mark.slow
def test_spans_one_after_another_each_get_their_own_cpu(burner) -> None:
    # Own CPU is the burner's, known by construction: each span must get what was used in it
    # (as one sweep point after another, or one race run after another, in one watch).
    with MachineWatch([burner.pid], interval_s=0.05) as watch:
        busy = burn(burner, 0.5)
        past_a_mark(watch)
        opened = clock()
        past_a_mark(watch)  # the idle span holds a scan interval or more
        idle = (opened, clock())
        past_a_mark(watch)
        third = burn(burner, 0.5)
    samples = [watch.within(span, min_s=0) for span in (busy, idle, third)]
    assert own_cpu_s(samples[0]) >= 0.45 and own_cpu_s(samples[2]) >= 0.45, samples
    assert own_cpu_s(samples[1]) < 0.1, samples[1]
    assert samples[0].own_pids == {burner.pid}


@pytest.mark.slow
def test_a_span_under_a_second_is_judged_over_the_second_around_it(burner) -> None:
    # The kernel's 10 ms ticks would make a 50 ms window's figures noise: widened, not trusted as is.
    with MachineWatch([burner.pid], interval_s=0.05) as watch:
        burn(burner, 0.5)
        short = burn(burner, 0.05)
        burn(burner, 0.5)
    part = watch.within(short)
    assert part.window_s >= MIN_WINDOW_S
    assert watch.within(short, min_s=0).window_s < MIN_WINDOW_S


def test_a_watch_shorter_than_a_second_is_judged_over_the_second_from_its_start(burner) -> None:
    # A race run of a few jobs is over in 0.2 s: its window in ticks was noise (23% foreign CPU
    # with the whole machine counted as own, in a CI run).
    with MachineWatch([burner.pid], interval_s=0.05) as watch:
        span = burn(burner, 0.05)
    assert watch.sample is not None and watch.sample.window_s >= MIN_WINDOW_S
    assert watch.within(span).window_s >= MIN_WINDOW_S


@pytest.mark.slow
def test_within_picks_the_part_of_the_watch_another_process_timed(burner) -> None:
    with MachineWatch([burner.pid], interval_s=0.05) as watch:
        burn(burner, 0.05)  # the child is running and warm before the window
        past_a_mark(watch)
        span = burn(burner, 0.5)
        past_a_mark(watch)
        burn(burner, 0.3)  # after the window: not in it
    whole = watch.sample
    assert whole is not None
    part = watch.within(span, min_s=0)
    # The marks around the span: it is covered whole, the rest of the watch left out.
    assert span[1] - span[0] <= part.window_s < whole.window_s
    assert 0.45 <= own_cpu_s(part) < 0.75, part
    assert watch.within(None) == whole and watch.within((span[1], span[0])) == whole
    assert watch.within((span[0] + 1e6, span[1] + 1e6)) == whole  # not this watch's time


def test_a_row_of_several_windows_is_as_contended_as_its_worst() -> None:
    quiet = MachineSample(2.0, 0.0, False, frozenset({1}), window_s=1.0)
    busy = MachineSample(80.0, 1.0, True, frozenset({2}), window_s=2.0)
    worst = worst_of([quiet, busy, quiet])
    assert worst is not None
    assert worst.row_fields() == {"foreign_cpu_pct": 80.0, "steal_pct": 1.0, "contended": True}
    assert worst.own_pids == {1, 2} and worst.window_s == 4.0
    assert worst_of([]) is None
    assert worst_of([quiet]) == quiet


def test_the_warning_names_as_many_processes_as_fit_on_one_line_and_folds_when_one_does_not() -> None:
    sample = MachineSample(190.0, 0.0, True, frozenset())
    busiest = (Busy(25481, "python", 102.0), Busy(25475, "python", 80.0), Busy(7, "redis-server", 8.0))
    check = MachineCheck(sample, busiest)
    whole = check.warning()
    assert whole is not None and whole.count("pid ") == 3
    for width in (110, 100, 40):
        text = check.warning(width)
        assert text is not None and text.startswith("pid 25481 python uses 102% of a core")
        lines = text.split("\n")
        assert all(len(line) <= width for line in lines), lines  # folded, never wrapped by the terminal
        assert " ".join(line.strip() for line in lines).endswith(": results will be marked contended")
        assert text.count("pid ") >= 1  # the busiest is always named
    assert check.warning(100).count("pid ") == 1 and check.warning(110).count("pid ") == 2
    assert "\n" not in check.warning(100) and check.warning(40).count("\n") == 1
    # No process named, only what came and went: 82 columns after "warning: " at 80 (a real run's
    # line on a busy machine), folded.
    unnamed = MachineCheck(MachineSample(90.0, 0.0, True, frozenset()), ()).warning(80 - len("warning: "))
    assert unnamed == "short-lived processes use 90% of a core:\n  results will be marked contended"
