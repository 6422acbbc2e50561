"""The sliced sweep's work per call follows its slice, not the length of active: counted, never timed.

Each call of a pass is measured from the server: the commands the script ran
inside it (INFO commandstats) and how much the sweep's marks changed, in set
members and in bytes (MEMORY USAGE of stalled and stalled-prev over every
member, hash-table slots included). A pass that rebuilt stalled from empty
fails the byte bound: the set's table doubles up to a slot per active id
inside one call, and dropping the previous pass's set frees every mark at
once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from bench.protocol.commandstats import CommandStats
from bench.protocol.queue import Queue, now_ms
from bench.protocol.sweep import SLICED_PASS_KEYS, AtomicSlicedSweeper
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, ScenarioQueue, stalled_share

pytestmark = pytest.mark.protocol

SLICE = 100
CHUNK = 25  # ids the script takes an RPOP, checking its budget between
SIZES = (1_000, 20_000)
NO_BUDGET = 0  # a call always takes its whole slice: its count of calls is exact
# Commands inside one call: at most 4 per visited id (SISMEMBER, EXISTS, SREM,
# HINCRBY), a few a chunk of 25 (RPOP, the batched pushes, TIME) and a few for
# the pass (its hash, LLEN, SCARD...).
COMMANDS_PER_ID = 4
COMMANDS_PER_CALL = 40
# A mark is a dict entry and a short sds, under 64 bytes: a call that adds or
# drops one mark per visited id stays well under this.
BYTES_PER_ID = 100
MEASURED = ("info", "memory|usage", "evalsha")  # the test's own commands


@dataclass(frozen=True)
class CallWork:
    """What one call of a pass did, as the server counts it."""

    commands: int  # commands the script ran inside the call
    marks: int  # members added to or dropped from stalled and stalled-prev, together
    mark_bytes: int  # how far the memory of those two keys moved, either way


def _marks(queue: Queue) -> tuple[int, int]:
    """Members and bytes (every member sampled) of the keys the sweep keeps marks in."""
    client, keys = queue.client, queue.keys
    members = size = 0
    for key in (keys.stalled, keys.key("stalled-prev")):
        members += int(client.scard(key))
        size += int(client.memory_usage(key, samples=0) or 0)
    return members, size


def pass_work(queue: Queue, budget_us: int = NO_BUDGET) -> list[CallWork]:
    """One whole pass of the sliced sweep, call by call, with what each call did."""
    script = queue.scripts.by_step(AtomicSlicedSweeper.script_file)
    keys = queue.keys
    work: list[CallWork] = []
    members, size = _marks(queue)
    while True:
        before = CommandStats.read(queue.client)
        args = [BENCH_MAX_STALLED, keys.prefix, now_ms(), 0, SLICE, budget_us]
        reply = script(keys.sweep_keys(), args)
        inside = CommandStats.read(queue.client).since(before, exclude=MEASURED)
        members_after, size_after = _marks(queue)
        work.append(CallWork(inside.total_calls, abs(members_after - members), abs(size_after - size)))
        members, size = members_after, size_after
        if len(reply) < 3:
            return work


@pytest.fixture(scope="module")
def scenarios(settings) -> Iterator[dict[int, ScenarioQueue]]:
    client = settings.connect()
    built: dict[int, ScenarioQueue] = {}
    try:
        for size in SIZES:
            queue = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}")
            AtomicSlicedSweeper(queue)  # loads the script
            built[size] = ScenarioQueue(queue, []).grow(size)
        yield built
    finally:
        for scenario in built.values():
            scenario.queue.delete()
        client.close()


@pytest.fixture(scope="module")
def measured(scenarios: dict[int, ScenarioQueue]) -> Callable[[str], dict[int, list[CallWork]]]:
    """Each size's pass over a scenario, from its snapshot, measured once for every test."""
    done: dict[str, dict[int, list[CallWork]]] = {}

    def measure(scenario: str) -> dict[int, list[CallWork]]:
        if scenario not in done:
            done[scenario] = _measure(scenarios, scenario)
        return done[scenario]

    return measure


def _measure(scenarios: dict[int, ScenarioQueue], scenario: str) -> dict[int, list[CallWork]]:
    """Checked on the way: the pass takes a call a slice and reclaims exactly the stalled."""
    found: dict[int, list[CallWork]] = {}
    for size, built in scenarios.items():
        stalled = stalled_share(built.ids, scenario)
        built.restore(stalled)
        found[size] = pass_work(built.queue)
        assert len(found[size]) == size // SLICE  # no call beyond the visits
        keys = built.queue.keys
        assert built.queue.client.exists(*(keys.key(k) for k in SLICED_PASS_KEYS)) == 0
        assert built.queue.client.llen(keys.wait) == len(stalled)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["healthy", "mixed", "all_stalled"])
def test_commands_per_call_follow_the_slice_not_the_list(measured, scenario: str):
    found = measured(scenario)
    most = {size: max(call.commands for call in calls) for size, calls in found.items()}
    assert all(m <= COMMANDS_PER_ID * SLICE + COMMANDS_PER_CALL for m in most.values()), most
    assert most[SIZES[-1]] <= most[SIZES[0]] + 2, most  # flat: 20x the ids, the same calls
    worst = {size: max(call.marks for call in calls) for size, calls in found.items()}
    assert all(m <= SLICE for m in worst.values()), worst  # at most a mark per visited id


@pytest.mark.parametrize("scenario", ["healthy", "mixed"])
def test_no_call_grows_or_frees_the_marks_by_more_than_its_slice(measured, scenario: str):
    """The marks' memory moves by at most a mark per visited id in any call, at any size.

    Not asked of all_stalled: there every mark goes, as every job leaves active,
    and Redis shrinks a set's table once it is under a tenth full, freeing the
    old table in one call, whichever sweep drains it (the protocol's DEL frees
    it all at once)."""
    found = measured(scenario)
    worst = {size: max(call.mark_bytes for call in calls) for size, calls in found.items()}
    assert all(b <= BYTES_PER_ID * SLICE for b in worst.values()), worst


def test_a_healthy_pass_writes_no_mark(measured):
    """Every active id is marked already: a healthy pass only reads the marks."""
    found = measured("healthy")
    changed = {size: [c for c in calls if c.marks or c.mark_bytes] for size, calls in found.items()}
    assert changed == {size: [] for size in SIZES}, changed  # the calls that changed a mark


def test_stray_marks_are_dropped_by_a_re_mark_of_bounded_calls(scenarios):
    """Marks of ids not in active (an outside LREM) go, as the protocol's sweep drops them:
    the pass that finds them visits active once more, still a slice or two a call."""
    built = scenarios[SIZES[0]]
    client, keys = built.queue.client, built.queue.keys
    built.restore([])
    client.sadd(keys.stalled, *(f"gone-{i}" for i in range(50)))
    calls = pass_work(built.queue)
    visits = SIZES[0] // SLICE
    assert len(calls) == 2 * visits  # the re-mark's visits count against the slice too
    assert max(call.commands for call in calls) <= COMMANDS_PER_ID * SLICE + COMMANDS_PER_CALL
    assert {i.decode() for i in client.smembers(keys.stalled)} == set(built.ids)
    assert client.lrange(keys.active, 0, -1) == [i.encode() for i in built.ids]  # order kept
    assert client.llen(keys.wait) == 0
    assert client.exists(*(keys.key(k) for k in SLICED_PASS_KEYS)) == 0


@pytest.mark.parametrize("scenario", ["healthy", "all_stalled"])
def test_a_spent_time_budget_ends_a_call_after_its_first_chunk(scenarios, scenario: str):
    """With a budget of 1 µs every call is over it after one chunk of 25 ids (visiting 25 ids
    takes longer), so it stops there: four times the calls, and the same pass: every stalled
    job reclaimed once, in the order of a pass without a budget, active's order kept."""
    built = scenarios[SIZES[0]]
    client, keys = built.queue.client, built.queue.keys
    stalled = stalled_share(built.ids, scenario)
    outcomes = []
    for budget_us, calls_expected in ((NO_BUDGET, SIZES[0] // SLICE), (1, SIZES[0] // CHUNK)):
        built.restore(stalled)
        calls = pass_work(built.queue, budget_us)
        assert len(calls) == calls_expected
        outcomes.append((client.lrange(keys.wait, 0, -1), client.lrange(keys.active, 0, -1)))
    assert outcomes[0] == outcomes[1]
    wait, active = outcomes[1]
    assert sorted(wait) == sorted(i.encode() for i in stalled)
    assert active == [i.encode() for i in built.ids if i not in set(stalled)]
