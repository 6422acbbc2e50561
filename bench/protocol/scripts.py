"""Loads lua/ into redis-py Script objects, once per client."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script

from bench.paths import LUA_DIR

_INCLUDE = re.compile(r'^-- @include "([A-Za-z0-9_]+)"\s*$', re.MULTILINE)

# The protocol's scripts, by the name the client uses, and their files.
SCRIPT_FILES: dict[str, str] = {
    "add_job": "addJob-6.lua",
    "move_to_active": "moveToActive-11.lua",
    "move_to_finished": "moveToFinished-14.lua",
    "sweep": "moveStalledJobsToWait-8.lua",
    "extend_lock": "extendLock-2.lua",
}


def _expand(text: str, seen: set[str]) -> str:
    """Replace each ``-- @include "x"`` with lua/includes/x.lua, each at most once."""

    def include(match: re.Match[str]) -> str:
        part = match.group(1)
        if part in seen:
            return f"-- ({part} included above)"
        seen.add(part)
        path = LUA_DIR / "includes" / f"{part}.lua"
        return _expand(path.read_text(), seen)

    return _INCLUDE.sub(include, text)


@cache
def script_source(file_name: str) -> str:
    """The full source sent to Redis for one script file, includes expanded."""
    return _expand((LUA_DIR / file_name).read_text(), set())


@dataclass
class Scripts:
    """The protocol's scripts registered on one client, loaded on the server."""

    add_job: Script
    move_to_active: Script
    move_to_finished: Script
    sweep: Script
    extend_lock: Script
    extra: dict[str, Script]

    def shas(self) -> dict[str, str]:
        named = {name: getattr(self, name).sha for name in SCRIPT_FILES}
        return {**named, **{name: s.sha for name, s in self.extra.items()}}

    def by_step(self, step: str) -> Script:
        """A protocol step's script (``add_job``...), or an extra script by its file name."""
        if step in SCRIPT_FILES:
            script: Script = getattr(self, step)
            return script
        return self.extra[step]

    def load(self, client: redis.Redis | RedisCluster) -> None:
        """SCRIPT LOAD every script, so no timed call pays for a NOSCRIPT reload."""
        for script in [*(getattr(self, n) for n in SCRIPT_FILES), *self.extra.values()]:
            script.sha = client.script_load(script.script)


def load_scripts(
    client: redis.Redis | RedisCluster, extra_files: tuple[str, ...], sources: Mapping[str, str]
) -> Scripts:
    """Register a protocol's five scripts (``sources``, by step) and ``extra_files`` from lua/,
    and load them."""
    registered = {name: client.register_script(sources[name]) for name in SCRIPT_FILES}
    extra = {f: client.register_script(script_source(f)) for f in extra_files}
    scripts = Scripts(extra=extra, **registered)
    scripts.load(client)
    return scripts
