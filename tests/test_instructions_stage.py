"""The instructions stage (tests/test_instructions.py holds the counted server's own promises): a
queue brought to the stated state, a protocol's phases counted over N and 2N calls alike, the rows
of the two scopes, and a tiny profile's every step written, or one line and nothing without valgrind.

The stage runs once for the module on a tiny profile (tiny_run): the test of its every step and the
test of its counts over N and 2N read the same run folder. The stated state's completed set and
events stream are built on a plain server of the same binary, not under callgrind: a counted server
only RESTOREs them, as the stage's second scope does the first's dumps.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pandas as pd
import pytest

from bench.harness.callgrind import valgrind_missing
from bench.harness.context import RunContext
from bench.harness.profile import InstructionsOptions, Profile
from bench.harness.server import EmbeddedRedis, ServerInfo, find_binary
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.counted import COMPLETED, QueueStaging, QueueState
from bench.protocol.phases import FIXED_START_MS, Inputs, keys_added
from bench.protocol.queue import Producer, Queue
from bench.results.instructions import InstructionsCompletedRow, InstructionsPartRow, InstructionsRow
from bench.stages.instructions import stage
from bench.stages.instructions.parts import PARTS
from bench.stages.instructions.plan import Point
from bench.stages.instructions.rows import LEAD_CALLS, PHASES_QUEUE, Counted, rows_of
from tests.test_instructions import needs_valgrind

pytestmark = [pytest.mark.valgrind]


def prebuilt(state: QueueState, binary: str) -> QueueStaging:
    """A staging of ``state`` whose completed set and events stream are built (ZADD, XADD, DUMP) on a
    plain server of ``binary``: a counted server restores the same bytes, without running 20,000
    writes under callgrind first."""
    staging = QueueStaging(state)
    with EmbeddedRedis(binary=binary) as plain:
        client = RedisSettings.from_url(plain.url).connect()
        try:
            staging.prepare(client, "echomq", PHASES_QUEUE)
        finally:
            client.close()
    return staging


def test_a_queue_is_brought_to_the_stated_state_with_room_in_its_tables(client: Client) -> None:
    state = QueueState(completed=300, events=250, other_keys=65)
    name = f"t-state-{uuid.uuid4().hex[:8]}"
    QueueStaging(state).stage(client, "echomq", name)
    queue = Queue.open(client, name, clock=Inputs.fixed(name).clock)
    try:
        keys = queue.keys
        assert client.zcard(keys.completed) == 300 and client.xlen(keys.events) == 250
        assert client.llen(keys.wait) == 0 and client.llen(keys.active) == 0
        fillers = list(client.scan_iter(match=keys.key("filler:*"), count=1000))
        assert len(fillers) == 65 and all(client.pttl(key) > 0 for key in fillers)
        # the next ids have the digits of the last: a job's, and an event's sequence where the clock
        # stands still at the fixed clock's instant (the counted server's)
        last_event = client.xinfo_stream(keys.events)["last-generated-id"]
        assert last_event == f"{FIXED_START_MS}-{state.last_id}".encode()
        assert Producer(queue).add("{}") == str(state.last_id + 1)
    finally:
        queue.delete()
    # the other keys double Redis's key tables once, before a count, with room for the phases'
    for calls in (100, 200, 400):
        other = QueueState.for_phases(calls, LEAD_CALLS).other_keys
        table = 2 * (other - 1)  # a power of two, and one: the last doubles the tables
        assert (other - 1) & (other - 2) == 0 and other + keys_added(calls, LEAD_CALLS) < table


# echomq-deadline: echomq's steps and a sorted set of the jobs in flight (its sweeps: atomic and sliced)
TINY_PROTOCOL = "echomq-deadline"
TINY_CALLS = 50
TINY = InstructionsOptions(
    instructions_calls=TINY_CALLS,
    instructions_sweep_variants=("atomic", "atomic_sliced"),
    instructions_sweep_sizes=(10,),
    instructions_completed_sizes=(0, COMPLETED),
)


def context(tmp_path: Path, servers: tuple[str, ...] = ()) -> RunContext:
    settings = RedisSettings.from_url("redis://127.0.0.1:1/0")  # the stage starts servers of its own
    server = ServerInfo(settings.url, "PATH", None, "7.0")
    profile = Profile("tiny", protocols=(TINY_PROTOCOL,), servers=servers, instructions=TINY)
    return RunContext(profile, settings, server, tmp_path)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The stage run once on a tiny profile, on the server binary it names (servers): its run
    folder and the binary. The tests below read what it wrote."""
    if valgrind_missing() is not None:
        pytest.skip(f"cannot count instructions: {valgrind_missing()}")
    binary, _ = find_binary()
    folder = tmp_path_factory.mktemp("tiny-instructions")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stage, "QueueStaging", lambda state: prebuilt(state, binary))
        stage.run_stage(context(folder, servers=(binary,)))
    return folder, binary


def test_without_valgrind_the_stage_says_so_and_writes_no_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stage, "valgrind_missing", lambda: "valgrind is not on PATH")
    stage.run_stage(context(tmp_path))
    assert not (tmp_path / InstructionsRow.FILE).exists()
    assert "instructions: skipped, valgrind is not on PATH" in capsys.readouterr().err
    assert '"skipped": "valgrind is not on PATH"' in (tmp_path / "meta.json").read_text()


def test_a_row_pairs_the_two_scopes_counts_and_says_how_linear_they_are() -> None:
    point = Point("echomq", "phases")
    command = [Counted("extendLock", "call", 0, 100, 30_300.0, 30_000.0)]
    server = [Counted("extendLock", "call", 0, 100, 36_000.0, 36_000.0)]
    ids = {"run_id": "r", "profile": "p"}
    (row,) = rows_of([point], {"command": [command], "server": [server]}, ids, True)
    assert (
        row.seed_pinned
        and row.instructions_per_call == 30_300.0
        and row.server_instructions_per_call == 36_000.0
    )
    assert row.instructions_2n_diff_pct == 1.0 and row.server_instructions_2n_diff_pct == 0.0
    sweep = [Counted("sweep atomic", "stalled id", 10, 1, 4000.0)]
    (row,) = rows_of(
        [Point("echomq", "sweep", "atomic", 10)], {"command": [sweep], "server": [sweep]}, ids, False
    )
    assert row.instructions_2n_diff_pct is None and row.active_size == 10


@needs_valgrind
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_stage_writes_every_step_of_a_tiny_profile(tiny_run: tuple[Path, str]) -> None:
    """On the server binary a profile names (servers), named from its own INFO."""
    tmp_path, binary = tiny_run
    frame = pd.read_csv(tmp_path / InstructionsRow.FILE)
    said = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    version = next(part[2:] for part in said.split() if part.startswith("v="))
    assert set(frame["server"]) == {f"redis {version}"}
    about = json.loads((tmp_path / "meta.json").read_text())["instructions"]
    assert about["servers"] == {f"redis {version}": binary}
    # a protocol's steps are of one stated queue state, said in meta.json and on each row
    assert about["state"]["completed"] == COMPLETED and about["state"]["lead_calls"] == LEAD_CALLS
    phases = frame["protocol"] == TINY_PROTOCOL
    assert set(frame.loc[phases & (frame["active_size"] == 0), "completed_size"]) == {COMPLETED}
    assert set(frame.loc[~phases | (frame["active_size"] > 0), "completed_size"]) == {0}
    # a job against the completed set's size: the stated state's is the phases' own count
    jobs = pd.read_csv(tmp_path / InstructionsCompletedRow.FILE).set_index(["step", "completed_size"])
    assert set(jobs.index) == {
        (job, size) for job in ("fused cycle", "two-call cycle") for size in (0, COMPLETED)
    }
    stated = frame[phases & (frame["step"] == "fused cycle")].iloc[0]
    assert jobs.loc[("fused cycle", COMPLETED), "instructions_per_call"] == stated["instructions_per_call"]
    assert (
        jobs.loc[("fused cycle", 0), "calls"] == TINY_CALLS
        and jobs.loc[("fused cycle", COMPLETED), "calls"] == 2 * TINY_CALLS
    )
    steps = set(zip(frame["protocol"], frame["step"], frame["active_size"], strict=True))
    assert ("none", "PING", 0) in steps and ("none", "EVALSHA return 1", 0) in steps
    assert {(TINY_PROTOCOL, "fused cycle", 0), (TINY_PROTOCOL, "two-call cycle", 0)} <= steps
    assert {(TINY_PROTOCOL, "sweep atomic", 10), (TINY_PROTOCOL, "sweep atomic_sliced", 10)} <= steps
    assert (frame["instructions_per_call"] > 0).all()
    # the whole request holds the command, and more: its read and its reply
    assert (frame["server_instructions_per_call"] > frame["instructions_per_call"]).all()
    ping = frame[frame["step"] == "PING"].iloc[0]
    assert abs(ping["instructions_2n_diff_pct"]) < 0.5 and abs(ping["server_instructions_2n_diff_pct"]) < 0.5
    by_step = frame.set_index("step")
    fused, two_call = by_step.loc["fused cycle"], by_step.loc["two-call cycle"]
    assert fused["unit"] == "job"
    # what fusing saves a job at the server: a second request's read and reply, beyond the scripts
    saved_server = two_call["server_instructions_per_call"] - fused["server_instructions_per_call"]
    saved_command = two_call["instructions_per_call"] - fused["instructions_per_call"]
    assert saved_server > saved_command
    # every step split by part, the parts adding up to its whole-server count
    parts_frame = pd.read_csv(tmp_path / InstructionsPartRow.FILE)
    assert set(parts_frame["part"]) <= set(PARTS)
    summed = parts_frame.groupby(["protocol", "step", "active_size"])["server_instructions_per_call"].sum()
    whole = frame.set_index(["protocol", "step", "active_size"])["server_instructions_per_call"]
    assert set(summed.index) == set(whole.index)
    assert ((summed / whole.loc[summed.index] - 1).abs() <= 0.001).all()


@needs_valgrind
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_instruction_count_at_a_fixed_state_is_the_same_a_call_over_n_and_2n(
    tiny_run: tuple[Path, str],
) -> None:
    """Every step of a protocol's phases, counted over 2N calls at the stated state and over their
    first N, costs the same a call within 0.5% (inside command execution: the tiny run's
    instructions_2n_diff_pct). On a queue that began empty a fused job's count over N was 5.3%
    above its count over 2N (the completed set a listpack until 128, each insert a scan of it).
    echomq-deadline: echomq's steps and a sorted set of the jobs in flight, its sweep cheap."""
    frame = pd.read_csv(tiny_run[0] / InstructionsRow.FILE)
    counted = frame[(frame["protocol"] == TINY_PROTOCOL) & (frame["active_size"] == 0)]
    assert {"fused cycle", "two-call cycle", "extendLock"} <= set(counted["step"])
    for step in counted.itertuples():
        print(f"{step.step}: {step.instructions_2n_diff_pct:+.3f}% over 2N against N")
    for step in counted.itertuples():
        assert step.completed_size == COMPLETED and step.calls == 2 * TINY_CALLS, step
        assert pd.notna(step.instructions_2n_diff_pct) and abs(step.instructions_2n_diff_pct) <= 0.5, step
