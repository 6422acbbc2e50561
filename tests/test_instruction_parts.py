"""Where Redis's instructions go: callgrind's per-function costs read from its dump format, each
function put in exactly one part by one declared table of rules, and the parts adding up to the
count. On real servers (tests/test_instructions.py): every step's parts add up, a fused job's agree
beside a CPU hog, and one more redis.call shows in dispatch and its command."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench.harness.callgrind import function_costs
from bench.protocol import counted
from bench.report.sections import instructions as section
from bench.report.sections.instructions import call_price_findings
from bench.stages.instructions import parts
from bench.stages.instructions.parts import PARTS, RULES, part_of, parts_of

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


def _part_rows(step: str, costs: dict[tuple[str, str], float]) -> list[dict[str, object]]:
    return [
        {"server": "", "protocol": "none", "step": step, "part": part, "detail": detail,
         "server_instructions_per_call": value}
        for (part, detail), value in costs.items()
    ]  # fmt: skip


def test_the_price_of_one_redis_call_is_a_tenth_of_the_ten_calls_scripts_extra_beyond_exists() -> None:
    one = {(parts.DISPATCH, ""): 3_000.0, (parts.LUA, ""): 2_000.0, (parts.NETWORK, ""): 5_000.0}
    ten = {
        (parts.DISPATCH, ""): 13_000.0, (parts.LUA, ""): 8_000.0, (parts.NETWORK, ""): 5_000.0,
        (parts.COMMAND, "exists"): 500.0, (parts.REPLIES, ""): 1_500.0,
    }  # fmt: skip
    frame = pd.DataFrame(_part_rows(counted.RETURN_ONE, one) + _part_rows(counted.TEN_CALLS, ten))
    (line,) = call_price_findings(frame)
    # (13,000 + 8,000 + 500 + 1,500 - 3,000 - 2,000) / 10 = 1,800, of which EXISTS's body 50
    assert "adds 1,800 instructions" in line and "50 in the command's own body" in line, line
    assert "1,750 beyond it" in line and "most in script call and dispatch 1,000, Lua interpreter 600" in line
    assert call_price_findings(frame[frame["step"] != counted.TEN_CALLS]) == []  # an older run: no line


def test_the_report_names_the_baselines_as_the_counter_writes_them() -> None:
    assert (section.RETURN_ONE, section.TEN_CALLS, section.TEN) == (
        counted.RETURN_ONE, counted.TEN_CALLS, counted.TEN_CALLS_N,
    )  # fmt: skip
    assert counted.TEN_CALLS_SCRIPT.count("redis.call('EXISTS'") == counted.TEN_CALLS_N
