"""Redis's own duration of the longest script call in a span of time, from SLOWLOG.

A call's time at the client includes a round trip and the client's own pauses: at a million
active ids the sliced sweep's longest call took 15.2 ms at the client and 1.09 ms inside Redis
(run 20261201-144822-stress). SLOWLOG logs every command slower than its threshold (µs), so
nothing logged bounds every call by it. Read-only: the threshold is the server's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

SCRIPT_CALLS = frozenset({b"EVALSHA", b"EVAL", b"evalsha", b"eval"})
TIGHT_THRESHOLD_US = 1000  # nothing logged bounds a call only this low (Redis's default: 10 ms)


@dataclass(frozen=True)
class SlowlogSpan:
    """What SLOWLOG said about the script calls of one span: the longest logged (µs, None when
    none was), the threshold below which a call is not logged (None: unknown, or logging
    off), and whether entries of the span were pushed out of the log before it was read."""

    longest_us: int | None
    threshold_us: int | None
    overflowed: bool = False
    slow_calls: int = 0  # script calls of the span logged (slower than the threshold)

    def _tight(self) -> bool:
        """SLOWLOG can tell: no entry of the span overflowed, and its threshold is known and tight."""
        return (
            not self.overflowed and self.threshold_us is not None and self.threshold_us <= TIGHT_THRESHOLD_US
        )

    def bound_us(self) -> int | None:
        """The longest call's Redis time, or an upper bound on it (the threshold) when none was
        logged; None when SLOWLOG cannot tell."""
        if self.longest_us is not None and not self.overflowed:
            return self.longest_us
        return self.threshold_us if self._tight() else None

    def slow_count(self) -> int | None:
        """How many script calls of the span were slower than the threshold; None when SLOWLOG cannot tell."""
        return self.slow_calls if self._tight() else None


def _latest_id(node: redis.Redis) -> int:
    entries = node.slowlog_get(1)
    return int(entries[0]["id"]) if entries else -1


def threshold_us(node: redis.Redis) -> int | None:
    """The server's slowlog-log-slower-than (µs); None when it is off (< 0) or CONFIG is
    refused (a managed Redis)."""
    try:
        raw: Any = node.config_get("slowlog-log-slower-than").get("slowlog-log-slower-than")
        value = int(raw if raw is not None else -1)
    except (redis.RedisError, ValueError):
        return None
    return value if value >= 0 else None


class SlowlogWatch:
    """``start()`` before a span, ``stop()`` after: the span's longest script call, by Redis."""

    def __init__(self, node: redis.Redis) -> None:
        self.node = node
        self.threshold = threshold_us(node)
        self.from_id = -1
        self.usable = True

    def start(self) -> None:
        try:
            self.from_id = _latest_id(self.node)
        except redis.RedisError:  # SLOWLOG refused (a managed Redis): the span says nothing
            self.usable = False

    def stop(self) -> SlowlogSpan:
        if not self.usable:
            return SlowlogSpan(None, None)
        try:
            logged = max(0, _latest_id(self.node) - self.from_id)
            entries: list[dict[str, Any]] = self.node.slowlog_get(logged) if logged else []
        except redis.RedisError:
            return SlowlogSpan(None, None)
        mine = [e for e in entries if int(e["id"]) > self.from_id]
        scripts = [int(e["duration"]) for e in mine if _name(e) in SCRIPT_CALLS]
        return SlowlogSpan(
            max(scripts) if scripts else None,
            self.threshold,
            overflowed=len(mine) < logged,
            slow_calls=len(scripts),
        )


def _name(entry: dict[str, Any]) -> bytes:
    command = entry.get("command", b"")
    if isinstance(command, str):
        command = command.encode()
    return bytes(command).split(b" ", 1)[0]
