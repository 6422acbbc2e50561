"""The per-script cost measurement: each phase is exactly its script's EVALSHA calls."""

from bench.script_cost import measure_scripts


def test_each_phase_counts_exactly_its_calls(client):
    rows = measure_scripts(client, 20)
    assert [name.split(" ")[0] for name, _, _ in rows] == [
        "addJob", "moveToActive", "moveToFinished", "moveToFinished", "extendLock", "moveStalledJobsToWait",
    ]  # fmt: skip
    for name, calls, usec in rows:
        assert calls == 20, name  # the server counted one EVALSHA per call: no re-sends, no reloads
        assert usec > 0, name
