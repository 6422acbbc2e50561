"""The server's own count of calls and µs per command (INFO commandstats), and deltas of it; and
its own CPU (INFO cpu), which a load row's ``redis_cpu_pct`` is read from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from bench.protocol.connection import primaries


@dataclass(frozen=True)
class CommandStats:
    """INFO commandstats at one moment: calls and µs per command, as the server counts them,
    and the calls it refused before running them (``rejected_calls``: BUSY, OOM; Redis 6.2+)."""

    calls: Mapping[str, int]
    usec: Mapping[str, int]
    rejected: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, client: redis.Redis | RedisCluster) -> CommandStats:
        # A cluster client's INFO answers for every master together (CountingRedisCluster.info).
        raw: Mapping[str, Any] = client.info("commandstats")
        stats = {key.removeprefix("cmdstat_"): value for key, value in raw.items()}
        return cls(
            {name: int(value["calls"]) for name, value in stats.items()},
            {name: int(value["usec"]) for name, value in stats.items()},
            {name: int(value.get("rejected_calls", 0)) for name, value in stats.items()},
        )

    def since(self, earlier: CommandStats, exclude: tuple[str, ...] = ("info",)) -> CommandStats:
        """The calls and µs between ``earlier`` and this snapshot, per command."""
        names = set(self.calls) - set(exclude)
        return CommandStats(
            {n: self.calls[n] - earlier.calls.get(n, 0) for n in names},
            {n: self.usec[n] - earlier.usec.get(n, 0) for n in names},
            {n: self.rejected.get(n, 0) - earlier.rejected.get(n, 0) for n in names},
        )

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_usec(self) -> int:
        return sum(self.usec.values())


# Commands a client sends itself. Redis also counts the commands a script runs
# inside (and their µs are already inside the EVALSHA's), so per-job figures
# take only these.
CLIENT_COMMANDS = ("evalsha", "eval", "bzpopmin", "script|load", "script", "ping")


def redis_cpu_seconds(info: Mapping[str, Any]) -> float:
    """used_cpu_sys + used_cpu_user from INFO cpu: the server's CPU since it started."""
    return float(info.get("used_cpu_sys", 0.0)) + float(info.get("used_cpu_user", 0.0))


def client_side(stats: CommandStats, names: tuple[str, ...] = CLIENT_COMMANDS) -> CommandStats:
    """Only the commands a client sent, not those run inside scripts."""
    return CommandStats(
        {n: c for n, c in stats.calls.items() if n in names},
        {n: u for n, u in stats.usec.items() if n in names},
    )


def read_per_master(client: Any) -> dict[str, CommandStats]:
    """INFO commandstats of each master (host:port) on its own; one server is its only master.
    Read once here, so the masters' figures add up to the whole exactly (``added``)."""
    return {name: CommandStats.read(node) for name, node in primaries(client)}


def added(parts: Iterable[CommandStats]) -> CommandStats:
    """Several masters' figures as one: calls, µs and refusals summed per command."""
    calls: Counter[str] = Counter()
    usec: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    for part in parts:
        calls.update(part.calls)
        usec.update(part.usec)
        rejected.update(part.rejected)
    return CommandStats(dict(calls), dict(usec), dict(rejected))
