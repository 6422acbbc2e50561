"""BullMQ's Node package as a peer: its driver's contract against a real Redis, the stage without
node or without the installed peer, and `make venv` without node.

Tests marked ``node`` run the peer; they skip, saying why, where node or the peer is missing."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.__main__ import main as bench_main
from bench.paths import REPO
from bench.protocol.audit import audit
from bench.protocol.commandstats import CLIENT_COMMANDS, CommandStats
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Queue
from bench.stages.bullmq_worker import node
from bench.stages.bullmq_worker.node import NodePeer, find_peer
from bench.stages.bullmq_worker.plan import NODE_DRIVERS
from bench.stages.bullmq_worker.worker_process import URL_ENV, WINDOW_FROM

CONTRACT = {
    "driver", "concurrency", "jobs", "duration_s", "cpu_s", "calls", "usec", "redis_cpu_s", "errors",
    "scripts",
}  # fmt: skip


@pytest.fixture(scope="module")
def peer() -> NodePeer:
    found = find_peer()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture
def node_queue(client: Client) -> Iterator[Queue]:
    """A fresh queue under BullMQ's keys (bull:{name}:...), deleted after the test."""
    queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol="bullmq")
    yield queue
    queue.delete()


def driver(peer: NodePeer, settings: RedisSettings, *args: str) -> dict:
    """One command of the Node driver; its one JSON line."""
    env = {**os.environ, URL_ENV: settings.url}
    done = subprocess.run(peer.command(*args), capture_output=True, text=True, env=env, timeout=50)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    return json.loads(line)


def filled_and_run(
    peer: NodePeer, settings: RedisSettings, queue: Queue, mode: str, jobs: int, concurrency: int
) -> tuple[list[str], dict]:
    ids = driver(peer, settings, "fill", "--queue", queue.keys.tag, "--jobs", str(jobs))["ids"]
    assert len(set(ids)) == jobs
    counted = ",".join(CLIENT_COMMANDS)
    before = CommandStats.read(queue.client)
    line = driver(
        peer, settings, "run", "--mode", mode, "--queue", queue.keys.tag, "--jobs", str(jobs),
        "--concurrency", str(concurrency), "--count", counted,
    )  # fmt: skip
    # the driver's own count of its EVALSHAs, by script, is the server's (nothing else runs here):
    # each one ran, or met NOSCRIPT and ran as the EVAL ioredis sent after it
    ran = CommandStats.read(queue.client).since(before).calls
    assert sum(line["scripts"].values()) == ran["evalsha"] + ran.get("eval", 0)
    # each script it names by the SHA1 of the installed source is one the server now holds
    assert all(queue.client.script_exists(*(peer.scripts[name] for name in line["scripts"])))
    return ids, line


@pytest.mark.node
@pytest.mark.slow
def test_the_node_worker_makes_one_script_call_a_job(peer, settings, node_queue):
    ids, line = filled_and_run(peer, settings, node_queue, "node_worker", 3000, 1)
    assert set(line) == CONTRACT and line["driver"] == "node_worker" and line["errors"] == []
    assert line["concurrency"] == 1 and line["duration_s"] > 0 and line["cpu_s"] > 0
    assert line["redis_cpu_s"] > 0  # the server's own CPU over the window (INFO cpu)
    # the window opens at the 1,000th completion, at the moment the server runs the first mark's read
    # (how many more completed while it travelled depends on the machine: not asserted)
    assert 0 < line["jobs"] <= 3000 - WINDOW_FROM
    assert set(line["calls"]) <= set(CLIENT_COMMANDS) and set(line["usec"]) == set(line["calls"])
    # BullMQ's Worker finishes each job with fetch next on: one EVALSHA a job (commandstats)
    assert round(sum(line["calls"].values()) / line["jobs"], 2) == 1.00
    assert line["scripts"]["moveToFinished-14.lua"] == 3000
    assert line["scripts"]["moveToActive-11.lua"] <= 3  # the first fetch, and after the queue ran dry
    result = audit(node_queue, ids)
    assert result.ok and result.counts["completed"] == 3000, result.verdict
    # every key BullMQ's Worker made is under the queue's prefix: deleting the queue leaves none
    assert node_queue.delete() > 3000
    assert list(node_queue.client.scan_iter(match=f"*{node_queue.keys.name}*")) == []


@pytest.mark.node
@pytest.mark.slow
@pytest.mark.parametrize(("mode", "calls_a_job"), [("node_manual_two_call", 2.0), ("node_manual_fused", 1.0)])
def test_manual_processing_makes_its_script_calls_a_job(peer, settings, node_queue, mode, calls_a_job):
    jobs, concurrency = 2000, 4
    ids, line = filled_and_run(peer, settings, node_queue, mode, jobs, concurrency)
    assert set(line) == CONTRACT and line["driver"] == mode and line["concurrency"] == concurrency
    # the window's EVALSHAs, exact but for the calls in flight as its first mark was taken (one a loop)
    assert abs(line["calls"]["evalsha"] - calls_a_job * line["jobs"]) <= concurrency, line
    # exactly: every job finished once; a fetch a job, or only each loop's first with fetch next on
    fetches = jobs if mode == "node_manual_two_call" else concurrency
    assert line["scripts"] == {"moveToActive-11.lua": fetches, "moveToFinished-14.lua": jobs}
    result = audit(node_queue, ids)
    assert result.ok and result.counts["completed"] == jobs, result.verdict


@pytest.mark.node
def test_the_peer_lists_the_sha_of_each_script_it_sends(peer):
    # moveToFinished's SHA as ioredis sends it: the SHA1 of the text BullMQ defines the command with
    assert (
        peer.bullmq
        == node.json_value(node.PEER / "node_modules" / "bullmq" / "package.json", "version")
        == node.json_value(node.PEER / "package-lock.json", "packages", "node_modules/bullmq", "version")
    )
    assert {"moveToActive-11.lua", "moveToFinished-14.lua", "addStandardJob-9.lua"} <= set(peer.scripts)
    assert all(len(sha) == 40 for sha in peer.scripts.values())
    assert peer.shas_of(["moveToFinished-14.lua"]) == {
        "moveToFinished-14.lua": peer.scripts["moveToFinished-14.lua"]
    }


@pytest.mark.node
def test_a_bad_driver_call_is_one_line_and_exit_2(peer, tmp_path):
    env = {**os.environ, URL_ENV: "redis://127.0.0.1:1/0"}
    for args, says in [
        (["run", "--mode", "nope", "--queue", "q", "--jobs", "2000"], "--mode nope: use one of node_worker"),
        (["fill", "--queue", "q", "--jobs", "5"], "cannot reach Redis"),
        (["jump"], "unknown command jump"),
    ]:
        done = subprocess.run(peer.command(*args), capture_output=True, text=True, env=env, timeout=30)
        assert done.returncode == 2 and done.stdout == ""
        [line] = done.stderr.splitlines()
        assert line.startswith("echomq-bench node driver: error: ") and says in line, line


def test_without_node_on_path_the_peer_says_why_in_one_line(tmp_path):
    assert (
        find_peer(path=str(tmp_path))
        == "node is not on PATH: install Node.js 18 or newer, then run make venv"
    )


@pytest.mark.node
def test_a_peer_folder_not_installed_says_run_make_venv(peer, tmp_path):
    for name in ("package.json", "package-lock.json", node.DRIVER_FILE):
        shutil.copy(node.PEER / name, tmp_path / name)
    assert find_peer(tmp_path) == f"bullmq {peer.bullmq} is not installed in {tmp_path}: run make venv"


@pytest.mark.slow
def test_without_node_the_stage_runs_its_python_rows_and_says_why_in_one_line(
    tmp_path: Path, settings, monkeypatch, capsys
):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("REDIS_URL", settings.url)
    conf = tmp_path / "bw.conf"
    keys = ["protocols = bullmq", "bullmq-worker-concurrency = 1", "bullmq-worker-jobs = 1001"]
    conf.write_text("\n".join([*keys, "bullmq-worker-reps = 1", "bullmq-worker-window-s = 0", ""]))
    results = tmp_path / "results"
    argv = ["run", "--profile", str(conf), "--stages", "bullmq_worker", "--results", str(results)]
    assert bench_main(argv) == 0
    [run_dir] = list(results.iterdir())
    with (run_dir / "bullmq_worker.csv").open() as handle:
        assert [r["driver"] for r in csv.DictReader(handle)] == ["bullmq_worker", "fused", "two_call"]
    reason = "node is not on PATH: install Node.js 18 or newer, then run make venv"
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["bullmq_worker"]["node"] == {"absent": reason}
    assert f"  No Node rows: {reason}" in capsys.readouterr().out.splitlines()


MAKE = shutil.which("make")


def make_node_step(path: str) -> subprocess.CompletedProcess[str]:
    """The Makefile's npm step, as `make venv` runs it, with PATH set to ``path``."""
    assert MAKE is not None
    stamp = "peers/bullmq-node/node_modules/.installed-stamp"
    command = [MAKE, "--no-print-directory", "-W", "peers/bullmq-node/package-lock.json", stamp]
    return subprocess.run(command, cwd=REPO, env={"PATH": path}, capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(MAKE is None or not (REPO / "Makefile").exists(), reason="needs make and the checkout")
def test_make_venv_goes_on_without_node_or_when_npm_fails(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = make_node_step(str(empty))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "node is not on PATH: BullMQ's Node package not installed, its rows are left out"
    ]
    node_bin = shutil.which("node")
    if node_bin is None:
        return
    broken = tmp_path / "broken-npm"
    broken.mkdir()
    (broken / "node").symlink_to(node_bin)
    (broken / "npm").write_text("#!/bin/sh\necho 'npm: no registry' >&2\nexit 1\n")
    (broken / "npm").chmod(0o755)
    done = make_node_step(str(broken))
    assert done.returncode == 0, done.stderr
    assert "npm ci failed in peers/bullmq-node: BullMQ's Node rows are left out" in done.stdout


def test_the_report_says_why_the_node_rows_are_absent_or_which_scripts_node_sent():
    from bench.report.sections.bullmq_worker import versions_lines
    from bench.results.bullmq_worker import BullmqWorkerMeta

    def section(about: dict) -> BullmqWorkerMeta:  # meta.json's bullmq_worker section, as it reads
        return BullmqWorkerMeta(**about)

    reason = "node is not on PATH: install Node.js 18 or newer, then run make venv"
    assert versions_lines(section({"node": {"absent": reason}})) == [
        f"> **No Node rows**: BullMQ's Node package did not run here: {reason}.",
        "",
    ]
    about = {"python_bullmq": "3.4.4", "node": {"bullmq": "6.7.0", "ioredis": "5.11.1", "node": "20.1.0",
             "scripts_called": {"moveToActive-11.lua": "d96c", "moveToFinished-14.lua": "6966"}}}  # fmt: skip
    [line, _] = versions_lines(section(about))
    assert line.startswith(
        "BullMQ's Node package 6.7.0 (ioredis 5.11.1, node 20.1.0); its Python port 3.4.4."
    )
    assert line.endswith("`moveToActive-11.lua` `d96c`, `moveToFinished-14.lua` `6966`.")
    about["scripts_called"] = {"moveToActive-11.lua": "aaaa", "moveToFinished-14.lua": "6966"}  # the port's
    [line, _] = versions_lines(section(about))
    assert line.endswith("`6966`. The same SHA1 (the same Lua) in the Python port: `moveToFinished-14.lua`.")
    assert versions_lines(section({})) == []  # a run from before the Node package: nothing said


def test_a_runs_jobs_are_sized_from_its_last_rate_so_the_window_lasts():
    from bench.harness.profile import BullmqWorkerOptions
    from bench.stages.bullmq_worker.plan import MAX_JOBS, Point, jobs_for, points_of, short_window

    options = BullmqWorkerOptions(bullmq_worker_concurrency=(1, 8), bullmq_worker_jobs=3000)
    assert jobs_for(options, None) == 3000  # no rate yet: the profile's jobs
    assert jobs_for(options, 14_000.0) == WINDOW_FROM + 21_000  # 1 s at 14,000 jobs/s, 50% room
    assert jobs_for(options, 100.0) == 3000  # never fewer than the profile's
    assert jobs_for(options, 1e9) == MAX_JOBS
    assert jobs_for(BullmqWorkerOptions(bullmq_worker_window_s=0), 14_000.0) == 6000  # sizing off
    assert short_window(options, 0.99) and not short_window(options, 1.0)
    node_runs = [Point(d, c) for c in (1, 8) for d in (*NODE_DRIVERS, "bullmq_worker")]
    assert points_of(options, node=True) == [*node_runs, Point("fused", 1), Point("two_call", 1)]
    assert [r.driver for r in points_of(options, node=False)] == ["bullmq_worker"] * 2 + ["fused", "two_call"]


def test_the_profile_names_which_bullmq_drivers_run() -> None:
    """bullmq-worker-drivers picks BullMQ's drivers (make bench runs the Node ones alone); a name
    that is none of them is one line, before anything runs."""
    from bench.errors import BenchError
    from bench.harness.profile import BullmqWorkerOptions, Profile
    from bench.stages.bullmq_worker.plan import Point, points_of
    from bench.stages.bullmq_worker.stage import check_profile

    options = BullmqWorkerOptions(bullmq_worker_concurrency=(1, 8), bullmq_worker_drivers=NODE_DRIVERS)
    node_runs = [Point(d, c) for c in (1, 8) for d in NODE_DRIVERS]
    assert points_of(options, node=True) == [*node_runs, Point("fused", 1), Point("two_call", 1)]
    assert points_of(options, node=False) == [Point("fused", 1), Point("two_call", 1)]
    wrong = Profile("t", bullmq_worker=BullmqWorkerOptions(bullmq_worker_drivers=("node_worker", "nope")))
    with pytest.raises(BenchError, match="bullmq-worker-drivers: unknown driver 'nope'"):
        check_profile(wrong)


def test_a_run_never_measured_is_sized_from_its_neighbours_rates() -> None:
    """Its concurrency's fastest rate first, its driver's next: a first run at the profile's jobs
    ended its window in 0.2-0.4 s and ran again."""
    from bench.stages.bullmq_worker.plan import Point, expected_rate

    rates = {Point("node_worker", 1): 6_000.0, Point("node_manual_fused", 1): 7_000.0}
    assert expected_rate({}, Point("node_worker", 1)) is None
    assert expected_rate(rates, Point("node_worker", 1)) == 6_000.0  # its own
    assert expected_rate(rates, Point("node_manual_two_call", 1)) == 7_000.0  # its concurrency's
    assert expected_rate(rates, Point("node_worker", 8)) == 6_000.0  # its driver's
    rates[Point("node_manual_fused", 8)] = 17_000.0
    assert expected_rate(rates, Point("node_worker", 8)) == 17_000.0
    assert expected_rate(rates, Point("bullmq_worker", 50)) is None
