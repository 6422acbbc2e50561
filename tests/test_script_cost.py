"""The per-script cost measurement: each phase is exactly its script's EVALSHA calls."""

import pytest

from bench.errors import BenchError
from bench.protocol.script_cost import measure_scripts
from bench.script_cost import main

pytestmark = pytest.mark.protocol


def test_each_phase_counts_exactly_its_calls(client):
    rows = measure_scripts(client, 20)
    assert [name.split(" ")[0] for name, _, _ in rows] == [
        "addJob", "moveToActive", "moveToFinished", "moveToFinished", "extendLock", "moveStalledJobsToWait",
    ]  # fmt: skip
    for name, calls, usec in rows:
        assert calls == 20, name  # the server counted one EVALSHA per call: no re-sends, no reloads
        assert usec > 0, name


def test_bullmqs_scripts_are_measured_phase_by_phase_too(client):
    rows = measure_scripts(client, 20, "bullmq")
    assert [name.split(" ")[0] for name, _, _ in rows] == [
        "addJob", "moveToActive", "moveToFinished", "moveToFinished", "extendLock", "moveStalledJobsToWait",
    ]  # fmt: skip
    for name, calls, usec in rows:
        assert calls == 20 and usec > 0, name  # the sweep's throttle key is cleared, not a no-op call


def test_the_command_prints_each_protocols_figures_and_its_extra_commands(capsys):
    assert main(["--calls", "3", "--protocols", "echomq,echomq-deadline"]) == 0
    out = capsys.readouterr().out
    assert "echomq-deadline µs/call" in out
    assert out.count("[zadd +1, zrem +1]") == 2  # the fused and the two-call cycle
    assert "[zadd +1]" in out  # extendLock


def test_an_unknown_protocol_is_refused_before_a_server_starts():
    with pytest.raises(BenchError, match="unknown protocol 'nope'"):
        main(["--protocols", "echomq,nope"])
