"""The result files as a user's tools meet them: modes that follow the umask, CSVs that pandas
concatenates across runs with the same dtypes whether or not a point was skipped."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from bench.results.files import make_run_dir, write_csv, write_meta
from bench.results.finish_fetch import FinishFetchRow
from bench.results.hdr import new_histogram, write_hdr
from bench.results.meta import RunMeta
from bench.results.race import RaceRow
from bench.results.rows import RunIds, columns_of, row_dict
from bench.results.sweep import SweepCostRow


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_result_files_honour_umask_022(tmp_path: Path, umask_022: None) -> None:
    run = make_run_dir("smoke", tmp_path)
    write_meta(run, RunMeta, run_id=run.name)
    write_csv(run / "race.csv", ("a",), [{"a": 1}])
    write_hdr(run / "hdr" / "x__y__r1__cycle.hdr", new_histogram())
    for path in (run / "meta.json", run / "race.csv", run / "hdr" / "x__y__r1__cycle.hdr"):
        assert _mode(path) == 0o644, (path, oct(_mode(path)))
    assert _mode(run) == 0o755 and _mode(run / "hdr") == 0o755


def test_a_stricter_umask_is_honoured_too(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_csv(tmp_path / "private.csv", ("a",), [{"a": 1}])
    finally:
        os.umask(old)
    assert _mode(tmp_path / "private.csv") == 0o600


def _ff_row(ids: RunIds, strategy: str, rep: int, measured: bool) -> FinishFetchRow:
    value = 100.0 if measured else None
    return FinishFetchRow(
        run_id=ids.run_id, protocol=ids.protocol, profile=ids.profile, strategy=strategy, rep=rep,
        workers=2, producers=1, rtt_ms=0.0, batch_size=20 if ids.profile == "smoke" else 50,
        payload_bytes=50, target_rate=0.0, warmup_s=0.5, measure_s=1.0, duration_s=1.0, jobs=100,
        jobs_per_s=value, round_trips_per_job=1.0, server_calls_per_job=value, server_us_per_job=value,
        cycle_p50_us=200 if measured else None, cycle_p90_us=300, cycle_p99_us=400, cycle_p999_us=500,
        cycle_max_us=900, e2e_p50_us=1000, e2e_p99_us=2000, loadgen_cpu_pct=50.0, saturated=False,
        audit_ok=measured, foreign_cpu_pct=3, steal_pct=0.0, contended=not measured,
    )  # fmt: skip


def _sweep_row(ids: RunIds, size: int, skipped: str = "") -> SweepCostRow:
    base = SweepCostRow(ids.run_id, ids.protocol, ids.profile, "atomic", "healthy", size, 100, 500.0)
    if skipped:
        return SweepCostRow(**{**base.__dict__, "skipped": skipped})
    return SweepCostRow(**{
        **base.__dict__, "reps": 3, "sweep_ms_median": 1.5, "sweep_ms_stdev": 0.1, "us_per_active_job": 15.0,
        "round_trips": 1, "server_us": 1400, "hold_ms_max": 1.6, "probe_p99_us": 90, "probe_max_us": 150,
        "probe_busy": 0, "foreign_cpu_pct": 40.5, "steal_pct": 0, "contended": True,
    })  # fmt: skip


def _race_row(ids: RunIds, delay_ms: float) -> RaceRow:
    return RaceRow(ids.run_id, ids.protocol, ids.profile, "app_side", 2, 100, delay_ms, 1, 50, 1000, 1, 3, 2,
                   0, 0, foreign_cpu_pct=1.5, steal_pct=0, contended=False)  # fmt: skip


def _write_run(root: Path, ids: RunIds, skip: bool) -> Path:
    run = root / ids.run_id
    run.mkdir()
    ff = [_ff_row(ids, "fused", 1, measured=True), _ff_row(ids, "two_call", 1, measured=not skip)]
    sweep = [_sweep_row(ids, 10), _sweep_row(ids, 100, "over the cap" if skip else "")]
    race = [_race_row(ids, 0), _race_row(ids, 2)]
    write_csv(run / "finish_fetch.csv", columns_of(FinishFetchRow), map(row_dict, ff))
    write_csv(run / "sweep_cost.csv", columns_of(SweepCostRow), map(row_dict, sweep))
    write_csv(run / "race.csv", columns_of(RaceRow), map(row_dict, race))
    return run


@pytest.mark.parametrize("name", ["finish_fetch.csv", "sweep_cost.csv", "race.csv"])
def test_csvs_carry_run_id_and_concatenate_across_runs_with_stable_dtypes(tmp_path: Path, name: str) -> None:
    clean = _write_run(tmp_path, RunIds("20240101-000000-smoke", "smoke"), skip=False)
    skipped = _write_run(tmp_path, RunIds("20240102-000000-default", "default"), skip=True)
    a, b = pd.read_csv(clean / name), pd.read_csv(skipped / name)  # plain pandas, no dtype hints
    assert a.dtypes.to_dict() == b.dtypes.to_dict(), name
    both = pd.concat([a, b], ignore_index=True)
    assert both.dtypes.to_dict() == a.dtypes.to_dict()
    assert list(both.columns[:3]) == ["run_id", "protocol", "profile"]
    assert set(both["run_id"]) == {clean.name, skipped.name}
    assert set(both["protocol"]) == {"echomq"} and set(both["profile"]) == {"smoke", "default"}
    assert len(both.groupby(["run_id", "profile"])) == 2
    # Every row ends with its window's machine watch; a skipped point's cells keep the dtypes.
    assert list(both.columns[-3:]) == ["foreign_cpu_pct", "steal_pct", "contended"]
    assert both["foreign_cpu_pct"].dtype == "float64" and both["contended"].dtype == "bool"
    if name == "sweep_cost.csv":
        assert set(both["skipped"]) == {"no", "over the cap"}
        assert both["probe_max_us"].dtype == "float64" and both["reps"].dtype == "int64"
    if name == "finish_fetch.csv":
        assert "strategy" in both.columns and "variant" not in both.columns
        assert {"batch_size", "payload_bytes", "warmup_s", "measure_s"} <= set(both.columns)
