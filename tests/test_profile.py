"""Profiles: every shipped one loads; every bad value is one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.harness.profile import PROFILES_DIR, load_profile


@pytest.mark.parametrize("name", sorted(p.stem for p in PROFILES_DIR.glob("*.conf")))
def test_every_shipped_profile_loads(name: str):
    profile = load_profile(name)
    assert profile.name == name
    assert profile.finish_fetch.repetitions >= 3  # A B A B, three or more each


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
