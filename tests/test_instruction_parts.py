"""Where Redis's instructions go: callgrind's per-function costs read from its dump format, each
function put in exactly one part by one declared table of rules, and the parts adding up to the
count; on a real server, one more redis.call shows where it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.callgrind import CallgrindRedis, Count, function_costs
from bench.protocol.connection import Client
from bench.protocol.phases import Inputs, run_phases
from bench.stages.instructions import parts
from bench.stages.instructions.parts import PARTS, RULES, part_of, parts_of
from bench.stages.instructions.rows import fresh
from tests.test_instructions import OneCallMore, counting, cpu_hog, needs_valgrind

SMALL = Path(__file__).parent / "data" / "callgrind" / "small.out"
REDIS = "/usr/bin/redis-server"


def test_self_costs_leave_out_a_calls_inclusive_line_and_follow_the_compressed_names() -> None:
    costs = function_costs(SMALL)
    assert costs == {
        (REDIS, "readQueryFromClient"): 50,
        (REDIS, "call"): 100,
        (REDIS, "zaddGenericCommand"): 220,
        (REDIS, "zslInsert"): 80,
        ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "0x00000000000012a0"): 50,
        (REDIS, "0x0000000000159c70"): 150,
        (REDIS, "luaV_execute"): 250,
        (REDIS, "call'2"): 100,
    }
    assert sum(costs.values()) == 1000  # the dump's totals line


def test_the_parts_of_the_small_dump_add_up_to_its_count() -> None:
    """The count (callgrind's summary) is split as the functions' costs split: here 3,000 over 2 units,
    each part 1.5 times its functions' 1,000."""
    split = {(p.part, p.detail): p.instructions for p in parts_of(function_costs(SMALL), 3000, 2)}
    assert split == {
        (parts.LUA, ""): 375,
        (parts.DISPATCH, ""): 300,  # call and its recursion call'2
        (parts.COMMAND, "zadd"): 330,
        (parts.DATA, "sorted set"): 120,
        (parts.ALLOCATOR, ""): 75,  # unnamed, but in jemalloc
        (parts.NETWORK, ""): 75,
        (parts.UNNAMED, ""): 225,
    }
    assert sum(split.values()) == 1500


@pytest.mark.parametrize(
    ("function", "part", "detail"),
    [
        ((REDIS, "luaV_execute"), parts.LUA, ""),
        ((REDIS, "lua_pushlstring"), parts.LUA, ""),
        ((REDIS, "luaRedisGenericCommand"), parts.DISPATCH, ""),
        ((REDIS, "evalShaCommand"), parts.DISPATCH, ""),
        ((REDIS, "luaArgsToRedisArgv"), parts.DISPATCH, ""),
        ((REDIS, "zaddGenericCommand"), parts.COMMAND, "zadd"),
        ((REDIS, "xaddCommand"), parts.COMMAND, "xadd"),
        ((REDIS, "genericHgetallCommand"), parts.COMMAND, "hgetall"),
        ((REDIS, "zslInsert"), parts.DATA, "sorted set"),
        ((REDIS, "zslInsert.lto_priv.0"), parts.DATA, "sorted set"),
        ((REDIS, "call'2"), parts.DISPATCH, ""),
        ((REDIS, "lpInsert"), parts.DATA, "listpack"),
        ((REDIS, "quicklistPushHead"), parts.DATA, "list"),
        ((REDIS, "streamAppendItem"), parts.DATA, "stream"),
        ((REDIS, "siphash_nocase"), parts.DATA, "dict (keys, hash fields)"),
        ((REDIS, "_addReplyProtoToList"), parts.REPLIES, ""),
        ((REDIS, "lookupKeyWrite"), parts.BOOKKEEPING, ""),
        ((REDIS, "zmalloc"), parts.ALLOCATOR, ""),
        (("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "0x00000000000012a0"), parts.ALLOCATOR, ""),
        ((REDIS, "readQueryFromClient"), parts.NETWORK, ""),
        ((REDIS, "0x0000000000159c70"), parts.UNNAMED, ""),
        (("/usr/lib/x86_64-linux-gnu/libc.so.6", "__printf_fp_l"), parts.REST, "number formatting"),
        ((REDIS, "serverCron"), parts.REST, ""),
    ],
)
def test_each_function_falls_in_the_part_its_rule_names(
    function: tuple[str, str], part: str, detail: str
) -> None:
    assert part_of(function) == (part, detail)


def test_every_rule_names_a_declared_part() -> None:
    assert {rule.part for rule in RULES} <= set(PARTS)


@needs_valgrind
@pytest.mark.timeout(180)
def test_one_more_redis_call_shows_in_dispatch_and_its_command_and_the_parts_add_up() -> None:
    """echomq's moveToFinished with one more redis.call('EXISTS', ...): its extra instructions are
    the script call's dispatch and the EXISTS command's body, more than any other part's."""
    step = "moveToFinished (fetch next = 0)"

    def split(protocol: object) -> dict[tuple[str, str], float]:
        with counting("server") as (server, client):
            fresh(client)
            run_phases(
                client, 50, protocol, lambda action, n: [action() for _ in range(n)], Inputs.fixed("w")
            )
            found: dict[str, Count] = dict(
                run_phases(client, 50, protocol, server.measure, Inputs.fixed("a"))
            )
        count = found[step]
        split = {(p.part, p.detail): p.instructions for p in parts_of(count.functions, count.total, 50)}
        assert abs(sum(split.values()) - count.total / 50) <= count.total / 50 * 0.001
        return split

    base, more = split("echomq"), split(OneCallMore())
    grown = {key: more.get(key, 0.0) - base.get(key, 0.0) for key in set(base) | set(more)}
    by_part: dict[str, float] = {}
    for (part, _), delta in grown.items():
        by_part[part] = by_part.get(part, 0.0) + delta
    assert grown[(parts.COMMAND, "exists")] > 0  # the script's own EXISTS, and the one more
    assert max(by_part, key=lambda p: by_part[p]) in (parts.DISPATCH, parts.UNNAMED), by_part
    assert by_part[parts.DISPATCH] > 0.1 * sum(by_part.values()), by_part


def _fused_parts(server: CallgrindRedis, client: Client) -> dict[str, float]:
    """A fused job's whole-server count by part, 50 calls, fixed inputs, after a warm-up."""
    fresh(client)
    run_phases(client, 50, "echomq", lambda act, n: [act() for _ in range(n)], Inputs.fixed("w"))
    found: dict[str, Count] = dict(run_phases(client, 50, "echomq", server.measure, Inputs.fixed("a")))
    count = found["moveToFinished (fetch next = 1)"]
    by_part: dict[str, float] = {}
    for cost in parts_of(count.functions, count.total, 50):
        by_part[cost.part] = by_part.get(cost.part, 0.0) + cost.instructions
    return by_part


@needs_valgrind
@pytest.mark.timeout(180)
def test_a_fused_jobs_parts_agree_within_1_pct_on_two_servers_with_a_hog_beside_the_second() -> None:
    with counting("server") as (server, client):
        quiet = _fused_parts(server, client)
    with cpu_hog(), counting("server") as (server, client):
        busy = _fused_parts(server, client)
    whole = sum(quiet.values())
    large = [part for part, n in quiet.items() if n >= 0.05 * whole]
    assert len(large) >= 4, quiet
    for part in large:
        assert abs(busy[part] / quiet[part] - 1) <= 0.01, (part, quiet[part], busy[part])
