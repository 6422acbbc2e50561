"""Redis's Lua VM collected before a timed sweep: the garbage of a big script is gone, no key touched."""

from __future__ import annotations

import pytest

from bench.protocol.connection import Client
from bench.protocol.lua_gc import MOST_ROUNDS, collect_lua_garbage

pytestmark = pytest.mark.protocol

# A script that leaves garbage: 200,000 distinct strings in a table it drops.
LITTER = "local t = {} for i = 1, 200000 do t[i] = 'litter:' .. i end return #t"


def lua_kb(client: Client) -> float:
    return float(client.eval("return collectgarbage('count')", 0))


def test_the_garbage_a_big_script_left_is_collected_and_no_key_is_touched(client: Client):
    client.set("gc:untouched", "1")
    keys_before = client.dbsize()
    collect_lua_garbage(client)
    clean = lua_kb(client)
    assert client.eval(LITTER, 0) == 200_000
    assert lua_kb(client) > clean + 1000  # a few MB of garbage left behind
    rounds = collect_lua_garbage(client)
    assert 1 <= rounds <= MOST_ROUNDS
    assert lua_kb(client) < clean + 200  # back near where it was
    assert client.dbsize() == keys_before and client.get("gc:untouched") == b"1"
    client.delete("gc:untouched")
