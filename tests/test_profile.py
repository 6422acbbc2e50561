"""Profiles: every shipped one loads; every bad value is one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import main as bench_main
from bench.errors import BenchError
from bench.harness.profile import PROFILES_DIR, known_keys, load_profile, resolved


@pytest.mark.parametrize("name", sorted(p.stem for p in PROFILES_DIR.glob("*.conf")))
def test_every_shipped_profile_loads(name: str):
    profile = load_profile(name)
    assert profile.name == name
    opts = profile.finish_fetch
    # A B A B, three or more each; or two, each measured again until clean
    assert opts.repetitions >= 3 or (opts.repetitions == 2 and opts.remeasure_windows > 0)


def test_values_are_typed(tmp_path: Path):
    conf = tmp_path / "mine.conf"
    conf.write_text("# comment\n[locust]\nworkers = 1, 8\nrtt-ms = 0.5\nsweep-sizes = 10\nheadless = true\n")
    profile = load_profile(str(conf))
    assert profile.finish_fetch.workers == (1, 8)
    assert profile.finish_fetch.rtt_ms == (0.5,)
    assert profile.sweep.sweep_sizes == (10,)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("wrokers = 4", "unknown key 'wrokers'"),
        ("workers = 0", "workers = 0 is below its minimum 1"),
        ("concurrency = 0", "concurrency = 0 is below its minimum 1"),
        ("concurrency = 4, 0", "concurrency = 0 is below its minimum 1"),
        ("job-ms = -1", "job-ms = -1 is below its minimum 0"),
        ("repetitions = -2", "repetitions = -2 is below its minimum 1"),
        ("target-rate = fast", "target-rate = 'fast' is not a number"),
        ("batch-size = 2.5", "batch-size = '2.5' is not a whole number"),
        ("stages = sweep, nap", "stage 'nap' is unknown"),
        ("just words", "expected 'key = value'"),
    ],
)
def test_bad_values_are_one_line_errors(tmp_path: Path, line: str, expected: str):
    conf = tmp_path / "bad.conf"
    conf.write_text(line + "\n")
    with pytest.raises(BenchError) as caught:
        load_profile(str(conf))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_profile_names_the_ones_available():
    with pytest.raises(BenchError, match=r"profile 'nosuch' not found .* available: .*default"):
        load_profile("nosuch")


@pytest.mark.parametrize(
    ("line", "near"),
    [
        ("worker = 2", "'workers'"),
        ("users = 5", "'workers' and 'producers'"),
        ("processes = 2", "'loadgen-processes'"),
        ("run-time = 30s", "'measure-s'"),
        ("host = redis://127.0.0.1:6379", "REDIS_URL"),
        ("spawn-rate = 10", "'warmup-s'"),
    ],
)
def test_a_locust_option_as_a_profile_key_is_refused_by_bench_run_naming_the_near_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, near: str
):
    conf = tmp_path / "mine.conf"
    conf.write_text(f"repetitions = 3\n{line}\n")
    out = tmp_path / "results"
    assert bench_main(["run", "--profile", str(conf), "--results", str(out)]) == 2
    err = capsys.readouterr().err
    key = line.split(" =")[0]
    assert err.count("\n") == 1 and err.startswith("echomq-bench: error: mine.conf:"), err
    assert f"{key!r} is a Locust option that `bench run` sets itself" in err and near in err, err
    assert not out.exists()  # refused before a server starts or a folder is made


@pytest.mark.parametrize(
    ("key", "near"),
    [("wrokers", "workers"), ("measure", "measure-s"), ("sweep-size", "sweep-sizes"), ("stage", "stages")],
)
def test_an_unknown_key_suggests_the_nearest_one(tmp_path: Path, key: str, near: str):
    conf = tmp_path / "typo.conf"
    conf.write_text(f"{key} = 1\n")
    with pytest.raises(BenchError) as caught:
        load_profile(str(conf))
    assert str(caught.value).startswith(f"typo.conf: unknown key {key!r}; did you mean {near!r}? known keys:")


def test_an_unknown_key_with_nothing_near_lists_the_keys(tmp_path: Path):
    conf = tmp_path / "odd.conf"
    conf.write_text("colour = blue\n")
    with pytest.raises(BenchError, match=r"unknown key 'colour'; known keys: .*measure-s") as caught:
        load_profile(str(conf))
    assert "did you mean" not in str(caught.value)


def test_the_resolved_profile_holds_every_key_with_its_value():
    record = resolved(load_profile("smoke"))
    assert record["name"] == "smoke" and record["stages"][-1] == "report"
    assert record["finish_fetch"]["measure-s"] == 1.0 and record["finish_fetch"]["workers"] == [2]
    assert record["sweep"]["sweep-slice"] == 100  # a default the file leaves out
    sections = ("finish_fetch", "sweep", "race", "bullmq_worker", "instructions")
    keys = {k for section in sections for k in record[section]}
    assert record["instructions"]["instructions-calls"] == 50
    assert keys == set(known_keys())
