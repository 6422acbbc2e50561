"""Collecting the garbage of Redis's Lua VM before a timed call, so the call pays for its own only.

A script call over a million ids (the atomic sweep) leaves about 100 MB of Lua garbage and a string
table sized for a million strings. Lua collects it in steps during the calls that follow, and halves
the string table at most once a collection, rehashing it whole: measured at a million ids, the sliced
sweep's longest call inside Redis was 24-26 ms after an atomic sweep, 13 ms after one full
collection, and 1.6 ms after six (experiments/sliced_after_big_script.py). Redis exposes Lua's
``collectgarbage`` to scripts; this runs it until the VM stops shrinking. No key is read or written.
"""

from __future__ import annotations

import redis

COLLECT = "collectgarbage('collect') return collectgarbage('count')"  # KB in use after the collection
MOST_ROUNDS = 12  # a string table for millions of strings halves once a round


def collect_lua_garbage(node: redis.Redis) -> int:
    """Full collections on ``node`` (the server, or a cluster master, whose VM is meant) until Lua's
    memory stops going down; the rounds it took."""
    before = float(node.eval(COLLECT, 0))
    for rounds in range(1, MOST_ROUNDS):
        after = float(node.eval(COLLECT, 0))
        if after >= before:
            return rounds
        before = after
    return MOST_ROUNDS
