"""Bad input at the command line: one line naming the bad value and what to do, exit 2,
no run folder, and nothing written to the Redis that REDIS_URL points at.

The loader's own checks of each bad profile value are in tests/test_profile.py,
REDIS_URL's wrong password, unreachable server and cluster node in
tests/test_server.py; here each reaches the user through `python -m bench`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bench.harness.server import EmbeddedRedis
from tests.helpers import BENCH_LOADS, ForkedCommands

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedRedis]:
    """A server only these tests use, so its key count is theirs to check."""
    with EmbeddedRedis() as own:
        own_client = redis.Redis(port=own.port)
        own_client.set("user:key", "kept")  # a user's data, which must stay as it is
        own_client.close()
        yield own


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkedCommands]:
    """`python -m bench`, each command a fork of one process that loaded bench once."""
    with ForkedCommands("bench", BENCH_LOADS, tmp_path_factory.mktemp("bench-forks"), REPO) as bench:
        yield bench


def bench(forks: ForkedCommands, args: list[str], redis_url: str) -> subprocess.CompletedProcess[str]:
    return forks.run(args, env={**os.environ, "REDIS_URL": redis_url})


def assert_one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 2 and a single line on stderr, naming ``words``; no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("echomq-bench: error: "), result.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def keys_of(server: EmbeddedRedis) -> list[bytes]:
    client = redis.Redis(port=server.port)
    try:
        return sorted(client.keys("*"))
    finally:
        client.close()


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("wrokers = 4", ("'wrokers'", "known keys")),
        ("workers = 0", ("workers = 0", "use 1 or more")),
        ("race-jobs = -5", ("race-jobs = -5", "use 1 or more")),
        ("target-rate = fast", ("target-rate = 'fast'", "not a number", "fix it")),
    ],
)
def test_a_bad_profile_value_stops_the_run_before_anything_is_written(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands, line: str, words: tuple[str, ...]
):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"stages = race\n{line}\n")
    results = tmp_path / "results"
    assert_one_line(
        bench(forks, ["run", "--profile", str(conf), "--results", str(results)], server.url), *words
    )
    assert not results.exists()
    assert keys_of(server) == [b"user:key"]


def test_a_profile_that_does_not_exist_names_those_that_do(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands
):
    results = tmp_path / "results"
    missing = tmp_path / "nowhere.conf"
    result = bench(forks, ["run", "--profile", str(missing), "--results", str(results)], server.url)
    assert_one_line(result, str(missing), "not found", "available:", "smoke")
    assert not results.exists()
    assert keys_of(server) == [b"user:key"]


@pytest.mark.parametrize("command", ["run", "sweep", "race"])
def test_a_results_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands, command: str
):
    # Under a regular file: not even root can make a folder there (chmod would not stop root).
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder\n")
    target = blocker / "sub"
    args = [command, "--profile", "smoke", "--results", str(target)]
    assert_one_line(bench(forks, args, server.url), f"cannot write results to {target}", "--results")
    assert blocker.read_text() == "not a folder\n"
    assert keys_of(server) == [b"user:key"]


@pytest.mark.slow
def test_a_tls_url_at_a_plain_server_says_so_in_one_line(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands
):
    # The embedded server has no TLS: the handshake fails (after the 5 s connect timeout).
    url = f"rediss://:tls-secret@127.0.0.1:{server.port}/0"
    results = tmp_path / "results"
    line = assert_one_line(
        bench(forks, ["run", "--profile", "smoke", "--results", str(results)], url),
        f"cannot reach Redis at 127.0.0.1:{server.port} over TLS (rediss://)",
        "use redis://",
    )
    assert "tls-secret" not in line
    assert not results.exists()
    assert keys_of(server) == [b"user:key"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["sweep", "--variants", "atomic,sideways"], ("unknown sweep variant 'sideways'", "atomic_sliced")),
        (["sweep", "--scenarios", "odd"], ("unknown sweep scenario 'odd'", "all_stalled")),
        (["race", "--variants", "sideways"], ("unknown race variant 'sideways'", "app_side")),
        (
            ["run", "--stages", "finish_fetch,nap"],
            ("unknown stage 'nap'", "finish_fetch, script_cost, sweep"),
        ),
    ],
)
def test_an_unknown_variant_or_stage_is_one_line_before_any_server_or_folder(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands, args: list[str], words: tuple[str, ...]
):
    results = tmp_path / "results"
    assert_one_line(
        bench(forks, [*args, "--profile", "smoke", "--results", str(results)], server.url), *words
    )
    assert not results.exists()
    assert keys_of(server) == [b"user:key"]


@pytest.mark.locust
def test_headless_locust_without_a_reachable_redis_is_one_line_not_a_traceback(tmp_path: Path):
    closed = EmbeddedRedis()  # a port that was free a moment ago: nothing listens there now
    closed.start()
    url = closed.url
    closed.stop()
    env = {**os.environ, "REDIS_URL": url}
    result = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "bench" / "locustfile.py"),
         "--config", str(REPO / "profiles" / "smoke.conf"), "--headless", "--strategy", "fused"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    errors = [line for line in result.stderr.splitlines() if line.startswith("echomq-bench: error: ")]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and "cannot reach Redis at 127.0.0.1:" in errors[0], result.stderr
    assert "--redis-url" in errors[0] and "Traceback" not in result.stderr
