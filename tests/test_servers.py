"""Servers side by side (the profile key servers, docs/servers.md): each binary checked before a
run starts, started embedded and named from its own INFO; finish_fetch runs its Redis-bound point
on each, into a file of its own; a protocol whose scripts a server refuses is left out on it, and
the run goes on (the instructions stage's other side: tests/test_instructions.py)."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from bench.harness.context import RunContext
from bench.harness.profile import FinishFetchOptions, Profile
from bench.harness.server import ServerInfo, find_binary
from bench.protocol.base import _LOADED, PROTOCOLS, EchoMQ
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.counted import BASELINES
from bench.protocol.phases import refusal
from bench.report.cli import report_main
from bench.report.load import load_run
from bench.report.sections.servers import servers_section
from bench.stages.finish_fetch.remeasure import Budget
from bench.stages.finish_fetch.rows import Ledger
from bench.stages.finish_fetch.servers import run_servers
from bench.stages.instructions import stage
from bench.stages.instructions.plan import Point
from bench.stages.instructions.stage import count_all
from tests.helpers import csv_rows
from tests.test_instructions import needs_valgrind
from tests.test_instructions_stage import prebuilt

REPO = Path(__file__).resolve().parent.parent
BINARY = shutil.which("redis-server")
needs_binary = pytest.mark.skipif(BINARY is None, reason="no redis-server on PATH to name")


def _version(binary: str) -> str:
    said = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    return next(part[2:] for part in said.split() if part.startswith("v="))


def run_bench(tmp_path: Path, profile: str, *flags: str) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "servers.conf"
    conf.write_text(profile)
    results = str(tmp_path / "results")
    return subprocess.run(
        [sys.executable, "-m", "bench", "run", "--profile", str(conf), "--results", results, *flags],
        cwd=REPO, capture_output=True, text=True, timeout=150,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["missing", "not executable"])
def test_a_server_binary_missing_or_not_executable_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    binary = tmp_path / "redis-server"
    if kind == "not executable":
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o644)
    out = run_bench(tmp_path, f"servers = /usr/bin/redis-server, {binary}\n", "--stages", "instructions")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("echomq-bench: error: profile key servers:") and str(binary) in line
    assert ("does not exist" if kind == "missing" else "is not executable") in line, line
    assert not (tmp_path / "results").exists()  # refused before any folder


TINY = """
stages = finish_fetch
strategies = fused
repetitions = 1
workers = 2
concurrency = 4
bound-concurrency = 8
producers = 1
batch-size = 20
payload-bytes = 20
warmup-s = 0.1
measure-s = 0.5
rtt-ms = 0
raw-driver = false
fidelity-calls = 0
"""


@needs_binary
@pytest.mark.locust
@pytest.mark.timeout(160)
def test_the_bound_point_runs_on_each_named_server_into_a_file_of_its_own(
    tmp_path: Path, figures_undrawn: None
) -> None:
    assert BINARY is not None
    out = run_bench(tmp_path, TINY + f"servers = {BINARY}\n")
    assert out.returncode == 0, out.stderr
    (run_dir,) = (tmp_path / "results").iterdir()
    rows = csv_rows(run_dir / "finish_fetch_servers.csv")
    name = f"redis {_version(BINARY)}"
    assert [(r["server"], r["strategy"], r["concurrency"], r["rtt_ms"]) for r in rows] == [
        (name, "fused", "8", "0.0"),
    ]
    assert all(r["audit_ok"] == "True" and int(r["jobs"]) > 0 for r in rows)
    assert list((run_dir / "servers").iterdir()) == [run_dir / "servers" / name.replace(" ", "-")]
    with (run_dir / "finish_fetch.csv").open() as handle:  # the main grid's file holds none of them
        assert "server" not in next(csv.reader(handle))
    assert report_main([str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text()
    assert "## Servers side by side" in report and f"| {name} | echomq |" in report


class RefusedByServer(EchoMQ):
    """echomq whose moveToFinished calls a command no server has: a script the server refuses."""

    name = "refused-test"

    def script_sources(self) -> Mapping[str, str]:
        sources = dict(super().script_sources())
        sources["move_to_finished"] = 'redis.call("NOSUCHCOMMAND")\n' + sources["move_to_finished"]
        return sources


@needs_valgrind
@pytest.mark.timeout(120)
def test_a_protocol_whose_scripts_a_server_refuses_is_left_out_on_it_and_the_rest_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(PROTOCOLS, RefusedByServer.name, f"{__name__}:RefusedByServer")
    monkeypatch.setitem(_LOADED, RefusedByServer.name, RefusedByServer())
    # the stated state built on a plain server: the counted ones restore it, then refuse the scripts
    monkeypatch.setattr(stage, "QueueStaging", lambda state: prebuilt(state, find_binary()[0]))
    points = [Point("none", "baselines"), Point(RefusedByServer.name, "phases")]
    counted = count_all(points, 50)
    assert counted.points == [Point("none", "baselines")]
    assert [c.step for c in counted.by_scope["server"][0]] == list(BASELINES)
    (why,) = counted.left_out.values()
    assert list(counted.left_out) == [RefusedByServer.name] and "Unknown Redis command" in why, why


@needs_binary
@pytest.mark.timeout(60)
def test_a_protocol_a_server_refuses_is_left_out_of_its_bound_point_in_one_line_and_the_report_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert BINARY is not None
    monkeypatch.setitem(PROTOCOLS, RefusedByServer.name, f"{__name__}:RefusedByServer")
    monkeypatch.setitem(_LOADED, RefusedByServer.name, RefusedByServer())
    settings = RedisSettings.from_url("redis://127.0.0.1:1/0")  # the servers are the stage's own
    profile = Profile("tiny", servers=(BINARY,), finish_fetch=FinishFetchOptions(bound_concurrency=8))
    ctx = RunContext(profile, settings, ServerInfo(settings.url, "PATH", None, "7.0"), tmp_path)
    ledger = Ledger(tmp_path, profile.finish_fetch, Budget(0, 0.0))
    assert run_servers(ctx, (RefusedByServer.name,), ledger) == []  # no trial ran, and the run went on
    name = f"redis {_version(BINARY)}"
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "left out" in ln]
    assert f"finish_fetch: {RefusedByServer.name} left out on {name}, which refused its scripts:" in line
    assert "Unknown Redis command" in line, line
    data = load_run(tmp_path)
    assert data.meta.finish_fetch is not None
    assert list(data.meta.finish_fetch.left_out[name]) == [RefusedByServer.name]
    assert any(f"{RefusedByServer.name} left out on {name}" in ln for ln in servers_section(data))


def test_refusal_is_the_servers_own_line_and_none_for_a_protocol_it_runs(client: Client) -> None:
    refused = refusal(client, RefusedByServer())
    assert refused is not None and "Unknown Redis command" in refused and "\n" not in refused
    assert refusal(client, "echomq") is None
    assert not list(client.scan_iter(match="emq:*"))  # the probe's queues are removed
