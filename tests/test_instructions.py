"""Redis's cost in instructions (valgrind's callgrind): a count steal cannot move.

The tests count on redis-servers under callgrind (bench.harness.callgrind). Two servers
take the same seeds and wall clock, the counts of the same calls agree within 0.5% with a busy process
beside the second server, and a script with one more redis.call costs more (and compare calls it
worse). Two module servers, quiet_server and busy_server, each read their seeds and clock as they
start, and the seeds test compares them; the changed script is counted on the quiet one, against its
counts (quiet_counts). The hog test counts on two fresh servers of its own. A third, started as it
comes (unpinned_server), never counts. The stage itself, its
state and its rows: tests/test_instructions_stage.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.harness import callgrind
from bench.harness.callgrind import PINNED_MS, CallgrindRedis, Count, seed_refused, valgrind_missing
from bench.protocol.base import EchoMQ
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.counted import COMPLETED, QueueState
from bench.protocol.phases import Inputs, run_phases
from bench.report.compare.metrics import compare_runs
from bench.results.instructions import (
    INSTRUCTIONS_BEYOND,
    INSTRUCTIONS_LEAST,
    INSTRUCTIONS_UNPINNED_BEYOND,
    InstructionsCompletedRow,
)
from bench.stages.instructions import parts
from bench.stages.instructions.parts import parts_of
from bench.stages.instructions.rows import LEAD_CALLS, fresh
from tests.helpers import idle_hog

needs_valgrind = pytest.mark.skipif(
    valgrind_missing() is not None, reason=f"cannot count instructions: {valgrind_missing()}"
)
pytestmark = [pytest.mark.valgrind]

# A script of two commands on fixed keys and a fixed value, as the issue measured it.
TWO_COMMANDS = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])"
CALLS = 100


@contextmanager
def counting(scope: str = "command") -> Iterator[tuple[CallgrindRedis, Client]]:
    with CallgrindRedis("command" if scope == "command" else "server") as server:
        client = RedisSettings.from_url(server.url).connect()
        try:
            client.ping()  # the connection's own set-up commands, before any count
            yield server, client
        finally:
            client.close()


def two_command_counts(server: CallgrindRedis, client: Client) -> tuple[float, float]:
    """Instructions a call of TWO_COMMANDS over CALLS calls and over 2 x CALLS, after a warm-up."""
    sha = client.script_load(TWO_COMMANDS)

    def call() -> object:
        return client.evalsha(sha, 1, "instr:key", "v" * 16)

    for _ in range(50):
        call()
    return server.measure(call, CALLS).total / CALLS, server.measure(call, 2 * CALLS).total / (2 * CALLS)


def phase_measures(
    server: CallgrindRedis, client: Client, protocol: str | EchoMQ = "echomq"
) -> dict[str, Count]:
    """Each phase of the script cost's count over 50 calls, by function, fixed inputs, after 50
    uncounted calls of each phase up to extendLock (the healthy sweep's warm-up, 50 sweeps of 100
    jobs, would cost as much as the rest of it)."""
    fresh(client)
    uncounted = lambda action, n: [action() for _ in range(n)]  # noqa: E731
    run_phases(client, 50, protocol, uncounted, Inputs.fixed("instr-w"), until="extendLock")
    return dict(run_phases(client, 50, protocol, server.measure, Inputs.fixed("instr-a")))


def phase_counts(measured: dict[str, Count]) -> dict[str, float]:
    """Instructions a call of each phase."""
    return {step: count.total / 50 for step, count in measured.items()}


def by_part(count: Count) -> dict[str, float]:
    """A count's instructions a call (of 50), by part of Redis."""
    found: dict[str, float] = {}
    for cost in parts_of(count.functions, count.total, 50):
        found[cost.part] = found.get(cost.part, 0.0) + cost.instructions
    return found


# compare's rule for instructions: 0.5% on a pinned seed, 1% where this machine refuses unshare
BEYOND = INSTRUCTIONS_BEYOND if seed_refused() is None else INSTRUCTIONS_UNPINNED_BEYOND


def near(a: float, b: float) -> bool:
    """Within compare's rule for instructions, or within the 1,000 instructions below which
    compare claims nothing."""
    return abs(b / a - 1) <= BEYOND or abs(b - a) <= INSTRUCTIONS_LEAST


def pinned_inputs(server: CallgrindRedis) -> tuple[object, ...]:
    """What the server took from outside: its seed (INFO's run_id, 40 hex characters drawn from
    the same seed as its hash tables'), its wall clock (TIME, and a stream's ids, the clock's
    millisecond), and random()'s draws (a sorted set's node levels, in its memory's size)."""
    client = RedisSettings.from_url(server.url).connect()
    try:
        ids = [client.xadd("instr:stream", {"f": "v"}) for _ in range(2)]
        client.zadd("instr:zset", {f"member-{i}": i for i in range(1_000)})  # a skiplist, not a listpack
        size = client.memory_usage("instr:zset", samples=0)  # every node's allocation, level by level
        return str(client.info("server")["run_id"]), tuple(client.time()), tuple(ids), size
    finally:
        client.close()


@dataclass(frozen=True)
class Started:
    """One of the module's counting servers (whole-server scope), and what it took from outside as
    it started: pinned_inputs, read before anything else ran on it."""

    server: CallgrindRedis
    client: Client
    pinned: tuple[object, ...]


def skip_without_valgrind() -> None:
    if valgrind_missing() is not None:
        pytest.skip(f"cannot count instructions: {valgrind_missing()}")


@contextmanager
def started() -> Iterator[Started]:
    skip_without_valgrind()
    with counting("server") as (server, client):
        yield Started(server, client, pinned_inputs(server))


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[Started]:
    with started() as quiet:
        yield quiet


@pytest.fixture(scope="module")
def busy_server() -> Iterator[Started]:
    """The second server: nothing runs on it but its inputs' reading, until the hog test counts on it."""
    with started() as busy:
        yield busy


@pytest.fixture(scope="module")
def unpinned_server() -> Iterator[CallgrindRedis]:
    """A server started as it comes (its seeds and clock not pinned), never counted."""
    skip_without_valgrind()
    server = CallgrindRedis("command")
    server.seed_pinned = False
    with server:
        yield server


@dataclass(frozen=True)
class QuietCounts:
    """The quiet server's counts: TWO_COMMANDS a call over N and 2N, and echomq's phases."""

    script: float
    script_2n: float
    measured: dict[str, Count]


@pytest.fixture(scope="module")
def quiet_counts(quiet_server: Started) -> QuietCounts:
    script, script_2n = two_command_counts(quiet_server.server, quiet_server.client)
    return QuietCounts(script, script_2n, phase_measures(quiet_server.server, quiet_server.client))


@needs_valgrind
@pytest.mark.skipif(seed_refused() is not None, reason=f"the seed cannot be pinned: {seed_refused()}")
@pytest.mark.timeout(120)
def test_two_servers_take_the_same_seeds_and_clock_and_an_unpinned_one_does_not(
    quiet_server: Started, busy_server: Started, unpinned_server: CallgrindRedis
) -> None:
    first, second = quiet_server, busy_server  # each one's inputs read as it started, before any count
    assert first.server.seed_pinned and second.server.seed_pinned
    pinned = first.pinned
    assert second.pinned == pinned
    seconds, ms = divmod(PINNED_MS, 1000)
    assert pinned[1] == (seconds, ms * 1000)  # the clock stands still
    assert pinned[2] == (f"{PINNED_MS}-0".encode(), f"{PINNED_MS}-1".encode())
    # a server started as it comes: its own seed and clock
    assert not unpinned_server.seed_pinned
    run_id, clock, ids, _ = pinned_inputs(unpinned_server)
    assert run_id != pinned[0] and clock != pinned[1] and ids != pinned[2]


@needs_valgrind
@pytest.mark.timeout(120)
def test_the_counted_server_allocates_by_its_calls_alone_not_by_the_clock(
    unpinned_server: CallgrindRedis,
) -> None:
    """A counted server's allocators, pinned or not (shown by the unpinned one: the quiet and the
    busy servers run nothing but the same calls)."""
    # jemalloc's background thread and its time-based purging moved extendLock 0.27% a server
    client = RedisSettings.from_url(unpinned_server.url).connect()
    try:
        assert client.config_get("jemalloc-bg-thread") == {"jemalloc-bg-thread": "no"}
        stats = client.execute_command("MEMORY", "MALLOC-STATS")
        text = stats.decode() if isinstance(stats, bytes) else str(stats)
        if "jemalloc" in str(client.info("memory").get("mem_allocator", "")):
            assert "opt.background_thread: false" in text
            assert "opt.dirty_decay_ms: -1" in text and "opt.muzzy_decay_ms: -1" in text
    finally:
        client.close()


def test_without_a_c_compiler_the_inputs_are_not_pinned_and_the_reason_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "cc" else real_which(tool))
    reason = seed_refused.__wrapped__()
    assert reason is not None and "cc" in reason and "apt-get install gcc" in reason


@needs_valgrind
@pytest.mark.timeout(60)
def test_a_pin_that_does_not_build_stops_the_server_with_the_compilers_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "pinned_inputs.c"
    broken.write_text("int gettimeofday(void) { return }\n")
    monkeypatch.setattr(callgrind, "PIN_SOURCE", broken)
    server = CallgrindRedis("command")
    monkeypatch.setattr(server, "seed_pinned", True)
    with pytest.raises(BenchError, match=r"^cc could not build pinned_inputs\.c: .*error"):
        server.start()
    server.stop()


@needs_valgrind
@pytest.mark.timeout(120)
def test_two_servers_count_the_same_calls_alike_with_a_cpu_hog_beside_the_second() -> None:
    # The whole server's count: its parts are what the breakdown splits (instructions_parts.csv).
    # Two fresh servers: the module's shared ones, counted after the other tests' idle minutes under
    # a loaded make test, once gave a first count 18,071 instructions over twice (0.79% a call).
    with counting("server") as (server, client):
        quiet_script, quiet_script_2n = two_command_counts(server, client)
        quiet_measured = phase_measures(server, client)
    with counting("server") as (server, client), idle_hog():  # the hog beside the counts, not the start
        busy_script, busy_script_2n = two_command_counts(server, client)
        busy_measured = phase_measures(server, client)
    quiet_phases, busy_phases = phase_counts(quiet_measured), phase_counts(busy_measured)
    assert quiet_script > 1000 and abs(busy_script / quiet_script - 1) <= BEYOND
    # a cost per call: 2N calls count twice N's, within compare's rule
    assert abs(quiet_script_2n / quiet_script - 1) <= BEYOND
    assert abs(busy_script_2n / busy_script - 1) <= BEYOND
    assert quiet_phases.keys() == busy_phases.keys() and len(quiet_phases) == 6
    for step, count in quiet_phases.items():
        print(f"{step}: {count:.1f} quiet, {busy_phases[step]:.1f} beside a hog")
    for step, count in quiet_phases.items():
        assert count > 1000 and near(count, busy_phases[step]), (step, count, busy_phases[step])
    # a fused job's parts of 5% or more agree within 1% beside the hog
    quiet = by_part(quiet_measured["moveToFinished (fetch next = 1)"])
    busy = by_part(busy_measured["moveToFinished (fetch next = 1)"])
    large = [part for part, n in quiet.items() if n >= 0.05 * sum(quiet.values())]
    assert len(large) >= 4, quiet
    for part in large:
        assert abs(busy[part] / quiet[part] - 1) <= 0.01, (part, quiet[part], busy[part])


class OneCallMore(EchoMQ):
    """echomq with one more redis.call at the top of moveToFinished: a change a time would drown."""

    name = "echomq"  # the same point in compare: only its script changed

    def script_sources(self) -> Mapping[str, str]:
        sources = dict(super().script_sources())
        sources["move_to_finished"] = 'redis.call("EXISTS", KEYS[1])\n' + sources["move_to_finished"]
        return sources


def frames_of(counts: dict[str, float], seed_pinned: bool = True) -> dict[str, pd.DataFrame]:
    """A run's frames holding only instructions.csv rows of these per-call counts."""
    rows = [
        {"run_id": "r", "protocol": "echomq", "profile": "p", "step": step, "active_size": 0, "unit": "call",
         "calls": 50, "instructions_per_call": n, "server_instructions_per_call": n + 5000,
         "seed_pinned": seed_pinned}
        for step, n in counts.items()
    ]  # fmt: skip
    return {"instructions": pd.DataFrame(rows)}


def test_compare_claims_a_change_beyond_half_a_percent_on_pinned_seeds_and_beyond_1_on_random() -> None:
    base = {"moveToActive": 200_000.0, "extendLock": 30_000.0}
    moved = {"moveToActive": 201_400.0, "extendLock": 30_000.0}  # +0.7%, 1,400 a call
    pinned = compare_runs(frames_of(base), frames_of(moved))
    verdicts = pinned.rows.set_index(["point", "metric"])["verdict"]
    assert verdicts["step=moveToActive", "instructions_per_call"] == "worse"
    assert verdicts["step=extendLock", "instructions_per_call"] == "same"
    assert not any("seed" in note for note in pinned.notes)
    random = compare_runs(frames_of(base), frames_of(moved, seed_pinned=False))
    verdicts = random.rows.set_index(["point", "metric"])["verdict"]
    assert verdicts["step=moveToActive", "instructions_per_call"] == "same"
    assert any("seed was random in run B" in note for note in random.notes)


@needs_valgrind
@pytest.mark.timeout(120)
def test_one_more_redis_call_in_move_to_finished_costs_more_and_compare_says_worse(
    quiet_server: Started, quiet_counts: QuietCounts
) -> None:
    base_measured = quiet_counts.measured  # echomq's phases on this server, as the changed ones next
    changed_measured = phase_measures(quiet_server.server, quiet_server.client, OneCallMore())
    base, changed = phase_counts(base_measured), phase_counts(changed_measured)
    finishes = ("moveToFinished (fetch next = 0)", "moveToFinished (fetch next = 1)")
    for step in finishes:
        assert not near(base[step], changed[step]) and changed[step] > base[step], (step, base, changed)
    for step in ("addJob", "extendLock"):  # scripts not touched: the same count
        assert near(base[step], changed[step]), step
    rows = compare_runs(frames_of(base), frames_of(changed)).rows.set_index("point")
    judged = rows[rows["metric"] == "instructions_per_call"]["verdict"]
    for step in finishes:
        assert judged[f"step={step}"] == "worse"
    assert judged["step=addJob"] == "same"
    # where the one more redis.call('EXISTS') went: its command's body, and dispatch most of all
    step = "moveToFinished (fetch next = 0)"
    split = [parts_of(m[step].functions, m[step].total, 50) for m in (base_measured, changed_measured)]
    before, after = ({(c.part, c.detail): c.instructions for c in costs} for costs in split)
    grown = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in set(before) | set(after)}
    assert grown[(parts.COMMAND, "exists")] > 0
    growth: dict[str, float] = {}
    for (part, _), delta in grown.items():
        growth[part] = growth.get(part, 0.0) + delta
    assert max(growth, key=lambda p: growth[p]) in (parts.DISPATCH, parts.UNNAMED), growth
    assert growth[parts.DISPATCH] > 0.1 * sum(growth.values()), growth


# ---- the report and the results page (no valgrind: a fixture run's instructions.csv) ----------

FIXTURES = Path(__file__).parent / "data"


def test_the_report_and_the_page_show_the_counts_beside_the_timed_us_and_the_clean_share() -> None:
    from bench.report.load import load_run
    from bench.report.results_page import quiet_check, script_cost_table
    from bench.report.sections.instructions import instructions_section

    data = load_run(FIXTURES / "20240505-100000-smoke")
    text = "\n".join(instructions_section(data))
    assert "## Redis's cost in instructions" in text and "network and the kernel are outside" in text
    # the fused cycle's count beside its timed µs (script_cost.csv's median)
    assert "| echomq | fused cycle | job | 258,550 | 266,633 | +0.04% | 39.06 |" in text
    assert "began on an empty queue" in text  # a run from before the stated state
    table = script_cost_table(data)
    assert table is not None
    fused = table.set_index("step").loc["fused cycle", "echomq"]
    assert fused.endswith("258,550 instructions"), fused
    assert "clean windows (neither contended nor saturated)" in quiet_check(data)
    # a run without instructions.csv (every published run so far) renders as it did
    older = load_run(FIXTURES / "20240501-100000-smoke")
    assert instructions_section(older) == []
    plain = script_cost_table(older)
    assert (
        plain is not None
        and not plain.apply(lambda c: c.astype(str).str.contains("instructions")).any().any()
    )


def test_the_report_says_the_state_and_a_job_against_the_completed_sets_size(tmp_path: Path) -> None:
    from bench.report.load import load_run
    from bench.report.sections.instructions import instructions_section
    from bench.results.files import write_rows

    run = tmp_path / "20240505-100000-smoke"
    shutil.copytree(FIXTURES / run.name, run)
    meta = json.loads((run / "meta.json").read_text())
    state = {**QueueState(other_keys=2049).sizes(), "lead_calls": LEAD_CALLS}
    (run / "meta.json").write_text(json.dumps({**meta, "instructions": {"calls": 100, "state": state}}))
    counts = {
        ("fused cycle", 0): 200_000.0,
        ("fused cycle", COMPLETED): 202_000.0,
        ("two-call cycle", 0): 250_000.0,
    }
    rows = [
        InstructionsCompletedRow(run_id=run.name, protocol="echomq", profile="smoke", step=step,
                                 completed_size=size, unit="job", calls=100, instructions_per_call=n)
        for (step, size), n in counts.items()
    ]  # fmt: skip
    write_rows(run, InstructionsCompletedRow, rows)
    text = "\n".join(instructions_section(load_run(run)))
    assert "began at one queue state: 0 waiting, 0 active, 10,000 completed" in text
    assert "| echomq | fused cycle | 200,000 (-1.0%) | 202,000 |" in text
    assert "| echomq | two-call cycle | 250,000 | — |" in text  # not counted at the stated state


def test_a_counted_server_runs_its_allocators_so_their_work_follows_the_calls() -> None:
    """glibc's malloc (Valkey 8's Lua heap) with no fastbins and no trimming, jemalloc never
    purging: each set in the counted server's environment, and recorded for meta.json. Without
    the first, valkey 8.0.1's counts over N and 2N differed by up to 0.8% (its fastbins merged
    every so many frees); with it, within 0.08%."""
    env = callgrind.allocator_env()
    assert "glibc.malloc.mxfast=0" in env["GLIBC_TUNABLES"].split(":")
    assert env["MALLOC_CONF"] == env["JE_MALLOC_CONF"] == "dirty_decay_ms:-1,muzzy_decay_ms:-1"
    server = CallgrindRedis.__new__(CallgrindRedis)  # its command line only: no server started
    server.seed_pinned = False
    server.scope = "command"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CallgrindRedis, "out_file", Path("/nonexistent/callgrind.out"))
        prefix = server.command_prefix()
    assert prefix[0] == "env" and prefix.index("valgrind") > 1
    assert {f"{name}={value}" for name, value in env.items()} <= set(prefix[: prefix.index("valgrind")])


def test_how_quiet_a_run_was_counts_measured_windows_not_parts_nor_counts() -> None:
    """A shard's copy of a window, an instruction count under callgrind and its parts are not windows
    (the blind recompute of 20261206-092723: 1,241 "rows" held 919 instruction parts)."""
    from bench.report.load import load_run
    from bench.report.publish import PUBLISHED_DIR
    from bench.report.results_page import quiet_check
    from bench.results.stages import WINDOW_FRAMES

    data = load_run(PUBLISHED_DIR / "20261206-092723-default")
    assert not {"instructions", "instructions_parts", "finish_fetch_shards"} & WINDOW_FRAMES
    windows = sum(len(f) for name, f in data.frames.items() if name in WINDOW_FRAMES)
    assert windows < sum(len(f) for f in data.frames.values())
    assert f" of {windows} windows contended;" in quiet_check(data)
