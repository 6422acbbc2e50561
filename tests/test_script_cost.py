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


def test_bullmqs_scripts_are_measured_phase_by_phase_too(client):
    rows = measure_scripts(client, 20, "bullmq")
    assert [name.split(" ")[0] for name, _, _ in rows] == [
        "addJob", "moveToActive", "moveToFinished", "moveToFinished", "extendLock", "moveStalledJobsToWait",
    ]  # fmt: skip
    for name, calls, usec in rows:
        assert calls == 20 and usec > 0, name  # the sweep's throttle key is cleared, not a no-op call
