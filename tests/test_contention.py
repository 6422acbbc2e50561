"""The contention guard in real stage runs at smoke size: a window the watch sees foreign CPU in is
marked contended in every row, and without it none is.

The hog is injected: every window the machine watch closes gets a hog's share of
foreign CPU added to what it measured (tests/test_machine.py shows a real hog is
counted as foreign), and the check before the run is given, naming the hog. So
"every row contended, and foreign CPU at least the hog's" holds however loaded
the machine is, and however little of a core it would have left a real hog. The
run without the hog needs a quiet machine, which a shared one may not give: it is
tried again until a deadline, then skipped with the names of the busiest
processes. Its machine-independent twin counts every process on the machine as
the run's own (the roots of the process table as extra pids): then foreign CPU
is only what the accounting of the run's processes lost, which must stay under
the limit in one of a few tries however loaded the machine is (other tests' processes that end
unreaped fall out of a window now and then; an uncounted Locust process would lose a core in
every try). No assertion is on a time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.__main__ import main as bench_main
from bench.harness import machine, run_folder
from bench.harness.machine import (
    FOREIGN_LIMIT_PCT,
    STEAL_LIMIT_PCT,
    Busy,
    MachineCheck,
    MachineSample,
    check_machine,
    is_contended,
)
from bench.harness.profile import FinishFetchOptions
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings
from bench.stages.finish_fetch.locust_trial import run_trial
from bench.stages.finish_fetch.plan import Point
from bench.stages.race.plan import RacePlan
from bench.stages.race.stage import run_plan
from tests.helpers import csv_rows, tree_roots

HOG_PCT = 95.0  # % of a core: the injected hog's share of every window
HOG = Busy(4242, "hog", HOG_PCT)  # the process the injected check before the run names
QUIET_DEADLINE_S = 10.0  # then one more run at most: the suite stays fast on a busy machine

Window = dict[str, str]  # the machine columns of one row, as the CSV holds them


def quiet_or_skip(
    run: Callable[[], list[Window]], warned: Callable[[], bool] = lambda: False
) -> list[Window]:
    """Run until no window is contended (nor, with ``warned``, was the check before the run), or
    skip naming who kept the machine busy (at once when it is busy before the first run: under
    `make test` the other pytest worker usually is)."""
    before = check_machine()
    if before.contended:
        pytest.skip(f"the shared machine is busy: {before.culprits()}")
    deadline = time.monotonic() + QUIET_DEADLINE_S
    while True:
        windows = run()
        if not any(w["contended"] == "True" for w in windows) and not warned():
            return windows
        if time.monotonic() > deadline:
            pytest.skip(f"the shared machine was never quiet for a whole run: {check_machine().culprits()}")


def assert_all_contended(windows: list[Window]) -> None:
    assert windows
    for window in windows:
        assert window["contended"] == "True", window
        assert float(window["foreign_cpu_pct"]) >= HOG_PCT, window


def assert_none_contended(windows: list[Window]) -> None:
    for window in windows:
        assert window["contended"] == "False", window
        assert float(window["foreign_cpu_pct"]) <= FOREIGN_LIMIT_PCT, window
        assert float(window["steal_pct"]) <= STEAL_LIMIT_PCT, window


@pytest.fixture
def hog(monkeypatch: pytest.MonkeyPatch) -> Busy:
    """A hog in every window of this process's machine watches, and in the check before the run."""
    measured = machine._between

    def with_hog(*marks: object) -> MachineSample:
        sample = measured(*marks)
        foreign = sample.foreign_cpu_pct + HOG_PCT
        return dataclasses.replace(
            sample,
            foreign_cpu_pct=foreign,
            busy_cpu_pct=sample.busy_cpu_pct + HOG_PCT,
            contended=is_contended(foreign, sample.steal_pct),
        )

    monkeypatch.setattr(machine, "_between", with_hog)
    window = MachineSample(HOG_PCT, 0.0, True, frozenset(), busy_cpu_pct=HOG_PCT, window_s=1.0)
    monkeypatch.setattr(run_folder, "check_machine", lambda *args, **kwargs: MachineCheck(window, (HOG,)))
    return HOG


LOSSLESS_TRIES = 3


def assert_nothing_lost(window: Callable[[], list[MachineSample]]) -> None:
    """Some try of ``window`` lost less than the limit. Other tests' processes that ended unreaped
    (or orphaned and reaped uncounted) fall out of any window, so one try can lose them; a run
    whose own processes went uncounted loses a core or more in every try."""
    tries: list[MachineSample] = []
    for _ in range(LOSSLESS_TRIES):
        samples = window()
        for sample in samples:  # the machine, all of it
            assert sample.busy_cpu_pct > 0 and len(sample.own_pids) > 3, sample
        if all(s.foreign_cpu_pct < FOREIGN_LIMIT_PCT for s in samples):
            return
        tries.extend(samples)
    pytest.fail(f"foreign CPU at or over {FOREIGN_LIMIT_PCT}% in every try: {tries}")


# ---- race: the threads are in-process, the server is counted by its pid ----------------------


def race_windows(results: Path) -> list[Window]:
    argv = ["race", "--profile", "smoke", "--variants", "atomic,app_side", "--sweepers", "2"]
    argv += ["--jobs", "30", "--delay-ms", "1", "--reps", "1", "--workers", "1", "--results", str(results)]
    before = set(results.glob("*/race.csv"))
    assert bench_main(argv) == 0
    (path,) = set(results.glob("*/race.csv")) - before
    return csv_rows(path)


@pytest.fixture
def race_results(redis_server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    return tmp_path


@pytest.mark.slow
def test_a_race_run_beside_a_hog_is_contended_at_every_setting(
    race_results: Path, capsys: pytest.CaptureFixture[str], hog: Busy
) -> None:
    assert_all_contended(race_windows(race_results))
    # The check before the run said so first, in one line naming the hog.
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert f"pid {hog.pid} " in warning and warning.endswith(": results will be marked contended")


@pytest.mark.slow
def test_the_same_race_run_without_the_hog_is_contended_nowhere(
    race_results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def warned() -> bool:  # the check before the run saw a busy machine: not a quiet try
        return "warning:" in capsys.readouterr().err

    assert_none_contended(quiet_or_skip(lambda: race_windows(race_results), warned))


def test_race_runs_with_the_whole_machine_as_own_leave_no_foreign_cpu(settings: RedisSettings) -> None:
    plan = RacePlan(("atomic", "app_side"), (2,), 30, (1.0,), reps=1, workers=1)

    def windows() -> list[MachineSample]:
        outcomes = run_plan(settings, plan, lambda _line: None, tree_roots())
        return [sample for outcome in outcomes for sample in outcome.machine]

    assert_nothing_lost(windows)


# ---- finish_fetch: Locust's processes are children, the window is the summary's --------------

QUICK = FinishFetchOptions(
    repetitions=1, workers=(1,), rtt_ms=(0.0,), batch_size=20, payload_bytes=20, warmup_s=0.1, measure_s=0.5
)


def locust_run(settings: RedisSettings, folder: Path, watch_pids: list[int] | None = None) -> MachineSample:
    run = run_trial(
        settings, QUICK, "fused", Point(workers=1, rtt_ms=0.0), 1, folder, watch_pids=watch_pids or []
    )
    assert run.machine is not None and run.summary.window_clock_s is not None
    assert run.audit.ok, run.audit.verdict
    return run.machine


def locust_window(settings: RedisSettings, folder: Path) -> list[Window]:
    return [{k: str(v) for k, v in locust_run(settings, folder).row_fields().items()}]


@pytest.mark.locust
@pytest.mark.slow
def test_a_locust_run_beside_a_hog_is_contended(settings: RedisSettings, tmp_path: Path, hog: Busy) -> None:
    assert_all_contended(locust_window(settings, tmp_path))


@pytest.mark.locust
@pytest.mark.slow
def test_the_same_locust_run_without_the_hog_is_not(settings: RedisSettings, tmp_path: Path) -> None:
    assert_none_contended(quiet_or_skip(lambda: locust_window(settings, tmp_path)))


@pytest.mark.locust
@pytest.mark.slow
def test_a_locust_run_with_the_whole_machine_as_own_leaves_no_foreign_cpu(
    settings: RedisSettings, tmp_path: Path
) -> None:
    assert_nothing_lost(lambda: [locust_run(settings, tmp_path, tree_roots())])
