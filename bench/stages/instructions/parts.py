"""Where Redis's instructions go: each function callgrind counted, put in one part (the Lua
interpreter, the script call and dispatch, command bodies, data structures, the allocator, replies,
bookkeeping, the network, the rest) by the first of one declared table of rules that matches.

The rules read a function's name, and its object where the name says nothing: a binary stripped of
its static symbols (Debian's redis-server) names those by address only, so they go to "unnamed",
except in an object that says what they are (jemalloc's are the allocator's).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from bench.harness.callgrind import Function

LUA = "Lua interpreter"
DISPATCH = "script call and dispatch"
COMMAND = "command bodies"
DATA = "data structures"
ALLOCATOR = "allocator"
REPLIES = "replies"
BOOKKEEPING = "propagation and keyspace bookkeeping"
NETWORK = "networking and event loop"
UNNAMED = "unnamed (no symbols)"
REST = "the rest"
PARTS = (LUA, DISPATCH, COMMAND, DATA, ALLOCATOR, REPLIES, BOOKKEEPING, NETWORK, UNNAMED, REST)


@dataclass(frozen=True)
class Rule:
    """Functions whose name matches ``name`` (and whose object matches ``object``) are ``part``'s;
    ``detail`` names the command or data type within it (a ``\\1`` takes the name's first group)."""

    part: str
    name: str
    detail: str = ""
    object: str = ""

    def matches(self, function: Function) -> bool:
        owner, name = function
        return bool(re.search(self.name, name) and re.search(self.object, owner))


def _words(names: str) -> str:
    """A pattern matching any of ``names`` (alternatives split by |) as a whole name."""
    return rf"^(?:{names})$"


# In order: the first that matches wins.
RULES: tuple[Rule, ...] = (
    Rule(ALLOCATOR, r".", object=r"jemalloc"),
    Rule(LUA, r".", object=r"liblua"),
    Rule(UNNAMED, r"^0x[0-9a-f]+$"),
    # Redis's glue around the Lua VM, and the call of a command: what a redis.call costs beyond it
    Rule(
        DISPATCH,
        _words(
            r"call|processCommand|lookupCommand\w*|commandCheck\w+|getCommandFlags|evalGetCommandFlags"
            r"|eval\w*Command|fcall\w*Command|script[A-Z]\w*|luaRedis\w+|luaArgsToRedisArgv"
            r"|freeLuaRedisArgv|luaCallFunction|luaReplyToRedisReply|redisProtocolToLuaType\w*"
            r"|luaGetFromRegistry|luaSetErrorMetatable|luaExtract\w*|luaPush\w*|luaError\w*|ldb\w+"
            r"|ACLCheck\w+|ACLSelectorCheck\w+|moduleCallCommandFilters|lua_enablereadonlytable"
            r"|luaCreateArray|luaRedis\w*|luaSetResp|luaCreateFunction"
        ),
    ),
    Rule(ALLOCATOR, _words(r"luaAlloc|l_alloc")),  # Lua's allocator: the server's zmalloc underneath
    Rule(LUA, r"^(?:lua[A-Z]?_|luaopen_|index2adr$)"),
    # Lua's own static functions, named where the server keeps its symbols (its tables, collector,
    # string library, and the cmsgpack and cjson libraries Redis loads)
    Rule(
        LUA,
        _words(
            r"newkey|sweeplist|singlestep|resize|setarrayvector|setnodevector|mainposition|rehash"
            r"|numusearray|numusehash|computesizes|countint|reallymarkobject|propagatemark|traverse\w+"
            r"|markroot|str_\w+|ipairsaux|luaB_\w+|mp_\w+|json_\w+|strbuf_\w+|auxgetn|getgeneric"
        ),
    ),
    Rule(
        REPLIES,
        _words(
            r"_?addReply\w*|add\w*RangeReply|setDeferred\w*|prepareClientToWrite|trimReplyUnusedTailSpace"
            r"|clientHasPendingReplies|parseReply|callReply\w*|addListRangeReply"
        ),
    ),
    Rule(
        BOOKKEEPING,
        _words(
            r"propagate\w*|alsoPropagate|signalModifiedKey|\w*[nN]otifyKeyspaceEvent|touchWatchedKey"
            r"|tracking\w+|replicationFeed\w*|feedAppendOnlyFile|rewriteClientCommand\w*"
            r"|replaceClientCommandVector|lookupKey\w*|db[A-Z]\w*|setKey|getExpire|setExpire|removeExpire"
            r"|keyIsExpired|expireIfNeeded|checkType|signalKeyAsReady|handleClientsBlockedOnKeys"
            r"|slowlogPushEntryIfNeeded|hdr_record\w*|latencyAdd\w*|updateCommandLatencyHistogram"
            r"|afterCommand|postExecutionUnitOperations|LRU_CLOCK|writeCommandsDeniedByDiskError"
            r"|hasActiveChildProcess|streamRewrite\w+|getKeySlot|counts_index_for|get_bucket_index"
        ),
    ),
    Rule(COMMAND, r"^(?:generic)?([A-Za-z]+?)(?:Generic)?Command$", detail=r"\1"),
    Rule(DATA, r"^(?:zsl|zzl|zset)[A-Z]", detail="sorted set"),
    Rule(DATA, r"^(?:quicklist|__quicklist|listType|lmove)[A-Z]", detail="list"),
    Rule(DATA, r"^hashType[A-Z]", detail="hash"),
    Rule(DATA, r"^(?:setType|intset)[A-Z]", detail="set"),
    Rule(DATA, r"^(?:stream|rax)[A-Z]", detail="stream"),
    Rule(DATA, r"^lp[A-Z]", detail="listpack"),
    Rule(DATA, r"^(?:dict[A-Z]|siphash)", detail="dict (keys, hash fields)"),
    Rule(
        DATA,
        _words(
            r"_?sds\w+|create\w*Object\w*|decrRefCount|incrRefCount|tryObjectEncoding"
            r"|get(?:LongLong|Long|Double)FromObject\w*|\w*[sS]tringObjectLen|isSdsRepresentable\w+"
            r"|string2\w+|u?ll2string|digits10"
        ),
        detail="strings and objects",
    ),
    Rule(
        ALLOCATOR,
        _words(
            r"z(?:try)?(?:malloc|calloc|realloc|free)\w*|malloc|free|calloc|realloc|malloc_usable_size"
            r"|extend_to_usable|je_\w+|do_rallocx|tcache_\w+|arena_\w+|extent\w*|emap_\w+|sz_\w+"
            r"|i(?:malloc|free|sfree|salloc|ralloc)\w*|edata_\w+|pac_\w+|bin_\w+|large_\w+|rtree_\w+"
        ),
    ),
    Rule(
        NETWORK,
        _words(
            r"readQueryFromClient|process(?:Input|Multibulk|Inline)Buffer|beforeSleep|afterSleep"
            r"|handleClientsWithPendingWrites\w*|_?writeToClient|conn[A-Z]\w*|ae[A-Z]\w*|resetClient"
            r"|freeClient\w*Argv|commandProcessed|updateClientMemUsage\w*|evictClients"
            r"|freeClientsInAsyncFreeQueue|handleBlockedClientsTimeout|checkClientOutputBufferLimits"
            r"|read|write|writev|__libc_(?:read|write)"
        ),
    ),
    # Lua's numbers written as strings (redis.call's arguments) and read back: libc's printf, strtod
    Rule(
        REST, r"printf|strtod|mpn|hack_digit|round_and_return|_IO_|read_int|str_to_mpn", "number formatting"
    ),
    Rule(REST, r".", "libc: memory and strings", object=r"libc"),
)


@dataclass(frozen=True)
class PartCost:
    """One part's (and detail's) instructions a unit."""

    part: str
    detail: str
    instructions: float


# What a name carries beyond the function's own: callgrind's recursion depth (call'2), and the
# suffixes of a compiler's clones and link-time optimisation (zslInsert.lto_priv.0, .isra.0, .cold).
_BARE = re.compile(r"(?:\.(?:lto_priv|isra|constprop|part|cold|llvm)(?:\.\d+)?)*(?:'\d+)?$")


def part_of(function: Function) -> tuple[str, str]:
    """The part (and detail) ``function`` belongs to: the first rule that matches, else the rest."""
    name = _BARE.sub("", function[1])
    for rule in RULES:
        if rule.matches((function[0], name)):
            found = re.search(rule.name, name) if "\\" in rule.detail else None
            return rule.part, found.expand(rule.detail).lower() if found else rule.detail
    return REST, ""


def parts_of(functions: Mapping[Function, int], total: float, units: int) -> list[PartCost]:
    """``total`` instructions (callgrind's summary) over ``units``, split as ``functions`` split:
    each part's functions' share of their sum, so the parts add up to ``total`` exactly."""
    summed = sum(functions.values())
    by_part: Counter[tuple[str, str]] = Counter()
    for function, cost in functions.items():
        by_part[part_of(function)] += cost
    if not summed:
        return []
    order = {part: i for i, part in enumerate(PARTS)}
    return [
        PartCost(part, detail, total * cost / summed / units)
        for (part, detail), cost in sorted(by_part.items(), key=lambda item: (order[item[0][0]], -item[1]))
    ]
