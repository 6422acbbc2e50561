"""A run's keys on a user's server: recorded before the first is written, named in the run's last
line when a fault leaves them, and removed by `echomq-bench clean`, exactly, never a key of the
user's. Each fault test seeds the server with keys of the user's (some under the suite's own
namespaces), injects the fault during a finish_fetch trial, and checks the server ends with exactly
the user's keys, values unchanged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bench.harness.cluster import EmbeddedCluster
from bench.harness.run_keys import clean_main, earlier_left
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import RedisSettings
from bench.protocol.keys import KEY_SCOPE_ENV, fresh_queue_name, new_scope, scope_prefixes
from bench.results.files import write_meta
from bench.results.meta import RunMeta
from tests.helpers import BENCH_LOADS, ForkedCommands, wait_until
from tests.test_faults import (
    REPO,
    START_DEADLINE_S,
    TRICKLE,
    WINDOW_OPEN,
    BenchRun,
    assert_stopped,
    pid_alive,
    tiny_profile,
)

# The user's own keys: some under the suite's namespaces, so a clean that took more than the run's
# prefixes would show.
USER_KEYS = {
    "user:1": "one",
    "emq:{orders}:wait": "theirs",
    "bull:{mail}:id": "7",
    "emq:{r0000beef.q}:meta": "looks like a scope, is not one",
}


def seed(client: redis.Redis | redis.RedisCluster) -> None:
    for key, value in USER_KEYS.items():
        client.set(key, value)


def every_key(client: redis.Redis | redis.RedisCluster) -> dict[str, bytes | None]:
    """Every key on the server (every master of a cluster) with its value where it is a string."""
    found: dict[str, bytes | None] = {}
    for raw in client.scan_iter(count=1000):
        key = raw.decode()
        value = client.get(key) if client.type(key) == b"string" else None
        found[key] = value.encode() if isinstance(value, str) else value
    return found


def user_keys_intact(client: redis.Redis | redis.RedisCluster) -> None:
    """The server holds exactly the user's keys, each with its value."""
    assert every_key(client) == {k: v.encode() for k, v in USER_KEYS.items()}


def run_keys(client: redis.Redis | redis.RedisCluster, prefixes: list[str]) -> set[str]:
    """The keys not the user's; each must be under one of the run's prefixes."""
    left = set(every_key(client)) - set(USER_KEYS)
    strays = sorted(k for k in left if not k.startswith(tuple(prefixes)))
    assert not strays, f"keys outside the run's recorded prefixes: {strays[:5]}"
    return left


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkedCommands]:
    """`python -m bench`, each command a fork of one process that loaded bench once."""
    with ForkedCommands("bench", BENCH_LOADS, tmp_path_factory.mktemp("bench-forks"), REPO) as bench:
        yield bench


def clean(forks: ForkedCommands, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench clean <args>`, without REDIS_URL."""
    return forks.run(["clean", *args], env={k: v for k, v in os.environ.items() if k != "REDIS_URL"})


def keys_line(run: BenchRun) -> str:
    """The run's last line: the keys it may have left, and the command that removes them."""
    line = run.stderr.strip().splitlines()[-1]
    assert f"echomq-bench clean {run.run_dir} removes them" in line, run.stderr
    return line


def meta_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "meta.json").read_text())
    return data


def assert_clean_removes_exactly(
    forks: ForkedCommands, run_dir: Path, client: redis.Redis | redis.RedisCluster
) -> None:
    """`clean` removes every key the run left and nothing else; again, it removes 0."""
    left = run_keys(client, meta_of(run_dir)["keys"]["prefixes"])
    assert left, "the fault should have left keys of the run"
    first = clean(forks, str(run_dir))
    assert first.returncode == 0, first.stderr
    assert f"removed {len(left):,} keys under " in first.stdout, first.stdout
    user_keys_intact(client)
    again = clean(forks, str(run_dir))
    assert again.returncode == 0 and "removed 0 keys" in again.stdout, again.stdout + again.stderr
    assert meta_of(run_dir)["keys_left"]["keys"] == 0


# ------------------------------------------------------------------------------ the parts


def test_every_queue_named_in_a_scope_is_under_its_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    scope = new_scope()
    monkeypatch.setenv(KEY_SCOPE_ENV, scope)
    name = fresh_queue_name("ff-fused")
    assert name.startswith(scope + "ff-fused-")
    assert f"emq:{{{name}}}:wait".startswith(tuple(scope_prefixes(scope)))
    assert f"bull:{{{name}}}:wait".startswith(tuple(scope_prefixes(scope)))
    assert not "emq:{orders}:wait".startswith(tuple(scope_prefixes(scope)))
    assert new_scope() != scope


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as own:
        yield own


def _record(run_dir: Path, url: str, prefixes: list[str], complete: bool = False) -> None:
    run_dir.mkdir(parents=True)
    write_meta(
        run_dir,
        RunMeta,
        run_id=run_dir.name,
        complete=complete,
        keys={"url": url, "own_server": False, "prefixes": prefixes},
    )


def test_clean_removes_only_the_recorded_prefixes_and_says_how_many(
    tmp_path: Path, server: EmbeddedRedis, capsys: pytest.CaptureFixture[str]
) -> None:
    client = redis.Redis(port=server.port)
    seed(client)
    prefixes = scope_prefixes("r1234abcd.")
    for n in range(1200):  # more than a batch
        client.set(f"emq:{{r1234abcd.ff-{n % 3}}}:{n}", n)
    client.hset("bull:{r1234abcd.bw-1}:meta", "k", "v")
    run_dir = tmp_path / "results" / "20260101-000000-tiny"
    _record(run_dir, server.url, prefixes)
    assert earlier_left(run_dir.parent, RedisSettings.from_url(server.url)) is not None
    assert clean_main([run_dir.name, "--results", str(run_dir.parent)]) == 0
    assert "removed 1,201 keys under emq:{r1234abcd.*, bull:{r1234abcd.*" in capsys.readouterr().out
    user_keys_intact(client)
    assert earlier_left(run_dir.parent, RedisSettings.from_url(server.url)) is None  # cleaned
    assert clean_main(["--all-incomplete", "--results", str(run_dir.parent)]) == 0
    assert "no incomplete run" in capsys.readouterr().out


def test_a_folder_without_a_record_is_refused_with_one_line(tmp_path: Path, forks: ForkedCommands) -> None:
    (tmp_path / "old-run").mkdir()
    out = clean(forks, str(tmp_path / "old-run"))
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("echomq-bench: error: ") and "holds no record of its keys" in line, line


def test_a_recorded_password_is_never_kept_and_clean_asks_for_it(
    tmp_path: Path, forks: ForkedCommands
) -> None:
    run_dir = tmp_path / "20260101-000000-tiny"
    _record(run_dir, "redis://app:***@127.0.0.1:1/0", scope_prefixes("r1234abcd."))
    out = clean(forks, str(run_dir))
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "needs its password" in line and "REDIS_URL" in line, line


# ------------------------------------------------------------------------------ the faults


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_redis_killed_then_back_from_its_aof_the_run_names_its_keys_and_clean_removes_them(
    tmp_path: Path, forks: ForkedCommands
) -> None:
    """Redis dies (SIGKILL) in a finish_fetch trial: the run ends with what it measured, one line,
    exit 2. Redis comes back from its AOF once the run has given up, with the run's keys: the
    run's last line named them, and `clean` removes them and nothing else."""
    with EmbeddedRedis(extra_args=("--appendonly", "yes", "--appendfsync", "always")) as server:
        client = redis.Redis(port=server.port)
        seed(client)
        run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=30), server.url)
        run.wait_for_window()
        server.kill()
        code = run.finish()  # well before the 30 s window: the controller gives up after 2 s unreachable
        gone = f"Redis at 127.0.0.1:{server.port} unreachable"
        assert_stopped(run, code, gone)
        summary = run.summary()
        assert summary["derived"]["errors_by_kind"].get("connection", 0) >= 1, summary["derived"]
        assert run.meta()["finish_fetch"]["errors"]["connection"] >= 1
        assert summary["audit"]["verdict"].startswith(f"not audited: {gone}")
        (verdict,) = run.meta()["finish_fetch"]["audit_failures"].values()
        assert verdict.startswith(f"not audited: {gone}"), verdict
        server.restart()  # from its AOF, with what the run had written
        line = keys_line(run)
        assert f"may remain on {server.url}" in line, line
        meta = run.meta()
        assert meta["keys"]["url"] == server.url and meta["keys_left"]["line"] == line
        assert_clean_removes_exactly(forks, run.run_dir, client)


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_run_killed_with_sigkill_is_named_by_the_next_run_and_clean_removes_its_keys(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands
) -> None:
    client = redis.Redis(port=server.port)
    seed(client)
    run = BenchRun(tmp_path, tiny_profile(tmp_path, measure_s=30), server.url)
    run.wait_for_window()
    os.killpg(run.process.pid, signal.SIGKILL)  # the run's group, as `kill -9` of the job
    run.process.wait(timeout=10)
    wait_until(lambda: not any(pid_alive(p) for p in run.family), 10, "the run's processes to end")
    run_dir = run.run_dir
    meta = meta_of(run_dir)
    assert meta["complete"] is False and meta["keys"]["prefixes"]
    run_keys(client, meta["keys"]["prefixes"])
    # The next run against the same server says so, and names the command.
    profile = str(tiny_profile(tmp_path, measure_s=0.5))
    after = forks.run(  # a short stage: the warning comes before any
        ["run", "--profile", profile, "--stages", "script_cost", "--results", str(run.results)],
        env={**os.environ, "REDIS_URL": server.url}, timeout=90,
    )  # fmt: skip
    assert after.returncode == 0, after.stderr
    said = f"warning: run {run_dir.name} left keys on this server; echomq-bench clean {run_dir}"
    assert said in after.stderr, after.stderr
    assert_clean_removes_exactly(forks, run_dir, client)


@pytest.mark.cluster
@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_cluster_master_failing_over_to_its_replica_leaves_keys_clean_removes(
    tmp_path: Path, forks: ForkedCommands
) -> None:
    with EmbeddedCluster(replicas=True) as cluster:
        client = redis.RedisCluster.from_url(cluster.url)
        seed(client)
        profile = tiny_profile(tmp_path, measure_s=30, workers=3, producers=3, queues=3, target_rate=TRICKLE)
        run = BenchRun(tmp_path, profile, cluster.url)
        run.wait_for_window()
        cluster.allow_failover()
        cluster.kill(2)
        code = run.finish()
        wait_until(lambda: _failed_over(cluster), 30, "the replica to take over the killed master's slots")
        client = redis.RedisCluster.from_url(cluster.url)  # the slots as they are now
        if code == 0:  # the failover came before the run gave up: it went on, and cleaned up
            user_keys_intact(client)
            return
        assert code == 2, run.stderr
        keys_line(run)
        assert_clean_removes_exactly(forks, run.run_dir, client)


def _failed_over(cluster: EmbeddedCluster) -> bool:
    replica = redis.Redis(port=cluster.ports[cluster.masters + 2], decode_responses=True)
    first = redis.Redis(port=cluster.ports[0], decode_responses=True)
    try:
        promoted = replica.info("replication")["role"] == "master"
        return bool(promoted and first.cluster("info")["cluster_state"] == "ok")
    finally:
        replica.close()
        first.close()


# ------------------------------------------------------------------------------ every key, every stage

# A backlog of 100 jobs, not 4,000: the same kinds of key, a fortieth of the keyspace events to read.
EVERY_STAGE = """
stages = finish_fetch, script_cost, sweep, race
protocols = echomq, bullmq
finish-fetch-protocols = echomq
strategies = fused
repetitions = 1
workers = 2
producers = 1
batch-size = 20
payload-bytes = 20
warmup-s = 0.1
measure-s = 0.5
rtt-ms = 0
fidelity-calls = 0
sweep-variants = atomic, app_side
sweep-scenarios = healthy
sweep-sizes = 10
sweep-reps = 1
sweep-control-calls = 20
race-variants = all
race-sweepers = 2
race-jobs = 20
race-delay-ms = 0
race-reps = 1
race-workers = 1
backlog-jobs = 100
backlog-producers = 1
backlog-batch-size = 20
"""


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(200)
def test_every_key_a_run_writes_is_under_the_prefixes_it_recorded(
    tmp_path: Path, server: EmbeddedRedis
) -> None:
    """Redis's own keyspace events name every key written while the run's stages run; each is
    under a prefix meta.json recorded, and the run ends with the user's keys alone."""
    client = redis.Redis(port=server.port)
    seed(client)
    client.config_set("notify-keyspace-events", "EA")
    written: set[str] = set()
    listener = client.pubsub()
    listener.psubscribe("__keyevent@0__:*")
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            message: dict[str, Any] | None = listener.get_message(timeout=0.2)
            if message and message["type"] == "pmessage":
                written.add(message["data"].decode())

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    profile = tmp_path / "every.conf"
    profile.write_text(EVERY_STAGE)
    run = BenchRun(tmp_path, profile, server.url)
    code = run.process.wait(timeout=180)
    stop.set()
    thread.join(timeout=5)
    while (message := listener.get_message(timeout=0.5)) is not None:  # what was still on its way
        if message["type"] == "pmessage":
            written.add(message["data"].decode())
    assert code == 0, run.stderr
    prefixes = tuple(run.meta()["keys"]["prefixes"])
    written -= set(USER_KEYS)
    assert len(written) > 100, written
    assert sorted(k for k in written if not k.startswith(prefixes)) == []
    assert {p.split(":")[0] for p in prefixes} == {"emq", "bull"}
    # BullMQ's queues are named in the scope too (bullmq_worker's Node workers are handed the same
    # kind of name; its stage, 10 CPU seconds of Node and Python drivers, is left out here)
    assert any(k.startswith("bull:") for k in written)
    user_keys_intact(client)


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_direct_locust_run_records_its_queues_before_their_first_key(
    tmp_path: Path, server: EmbeddedRedis, forks: ForkedCommands
) -> None:
    """`locust -f bench/locustfile.py --headless`, its folder its own: the queue's prefix is in its
    meta.json once the window opens; killed with SIGKILL, its keys are removed by `clean`."""
    client = redis.Redis(port=server.port)
    seed(client)
    command = [sys.executable, "-m", "locust", "-f", "bench/locustfile.py", "--headless", "--only-summary"]
    command += ["--workers", "2", "--warmup-s", "0.3", "--measure-s", "30", "--queue", "mine"]
    results = tmp_path / "results"
    env = {**os.environ, "REDIS_URL": server.url, "EMQ_RESULTS_DIR": str(results)}
    log_path = tmp_path / "locust.txt"
    with log_path.open("wb") as log:
        locust = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until(lambda: WINDOW_OPEN in log_path.read_text(), START_DEADLINE_S, "the window to open")
    finally:
        os.killpg(locust.pid, signal.SIGKILL)
        locust.wait()
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    meta = meta_of(run_dir)
    assert meta["keys"] == {"url": server.url, "own_server": False, "prefixes": ["emq:{mine}:"]}
    assert meta["complete"] is False
    assert_clean_removes_exactly(forks, run_dir, client)
