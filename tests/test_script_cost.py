"""The per-script cost measurement: each phase is exactly its script's EVALSHA calls."""

import json
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.harness.context import RunContext
from bench.harness.profile import FinishFetchOptions, Profile
from bench.harness.run_folder import run_alone
from bench.harness.server import ServerInfo
from bench.protocol.phases import measure_phases
from bench.stages.script_cost import stage
from tests.helpers import csv_rows

pytestmark = pytest.mark.protocol


def test_each_phase_counts_exactly_its_calls(client):
    rows = measure_phases(client, 20)
    assert [name.split(" ")[0] for name, *_ in rows] == [
        "addJob", "moveToActive", "moveToFinished", "moveToFinished", "extendLock", "moveStalledJobsToWait",
    ]  # fmt: skip
    for name, calls, usec, _ in rows:
        assert calls == 20, name  # the server counted one EVALSHA per call: no re-sends, no reloads
        assert usec > 0, name


def test_bullmqs_scripts_are_measured_phase_by_phase_too(client):
    rows = measure_phases(client, 20, "bullmq")
    assert [name.split(" ")[0] for name, *_ in rows] == [
        "addJob", "moveToActive", "moveToFinished", "moveToFinished", "extendLock", "moveStalledJobsToWait",
    ]  # fmt: skip
    for name, calls, usec, _ in rows:
        assert calls == 20 and usec > 0, name  # the sweep's throttle key is cleared, not a no-op call


def test_an_unknown_protocol_is_refused_before_a_server_starts():
    with pytest.raises(BenchError, match="unknown protocol 'nope'"):
        run_alone(stage, ["--protocols", "echomq,nope"])


def test_the_stage_writes_each_steps_row_a_repetition(tmp_path: Path, settings, redis_server, capsys):
    """In a run, the stage measures each step alone, protocols alternating, into script_cost.csv,
    and prints each protocol's figures and its extra commands."""
    server = ServerInfo(redis_server.url, redis_server.source, redis_server.binary, redis_server.version())
    profile = Profile(
        "quick", protocols=("echomq", "echomq-deadline"), finish_fetch=FinishFetchOptions(repetitions=2)
    )
    stage.run_stage(RunContext(profile, settings, server, tmp_path))
    out = capsys.readouterr().out
    assert "echomq-deadline µs/call" in out
    assert out.count("[zadd +1, zrem +1]") == 2  # the fused and the two-call cycle
    assert "[zadd +1]" in out  # extendLock
    rows = csv_rows(tmp_path / "script_cost.csv")
    steps = {"fused cycle", "two-call cycle", "extendLock", "healthy sweep (100 active)"}
    for protocol in ("echomq", "echomq-deadline"):
        for rep in ("1", "2"):
            mine = {r["step"]: r for r in rows if r["protocol"] == protocol and r["rep"] == rep}
            assert set(mine) == steps, (protocol, rep)
            assert json.loads(mine["fused cycle"]["commands"])["evalsha"] == 1
            assert json.loads(mine["two-call cycle"]["commands"])["evalsha"] == 2
    # A B A B: the protocols take turns, a repetition a round
    assert [r["protocol"] for r in rows][:: len(steps)] == ["echomq", "echomq-deadline"] * 2
