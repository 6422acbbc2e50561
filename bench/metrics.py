"""Measurement: HdrHistograms in µs, and the server's own count of calls and µs (commandstats)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from hdrh.histogram import HdrHistogram

# 1 µs to 10 minutes, 3 significant digits: every latency the suite can see.
LOWEST_US = 1
HIGHEST_US = 600_000_000
SIGNIFICANT_DIGITS = 3
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(histogram: HdrHistogram, value_us: float) -> None:
    """Record a latency in µs, clamped into the trackable range."""
    histogram.record_value(min(max(int(value_us), LOWEST_US), HIGHEST_US))


def encode(histogram: HdrHistogram) -> str:
    """HdrHistogram's compressed base64 form: exact, and small enough for Locust's messages."""
    return histogram.encode().decode("ascii")


def decode(encoded: str | bytes) -> HdrHistogram:
    return HdrHistogram.decode(encoded if isinstance(encoded, bytes) else encoded.encode("ascii"))


def merge(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    """One histogram holding every count of the given ones (exact)."""
    merged = new_histogram()
    for histogram in histograms:
        merged.add(histogram)
    return merged


def summary(histogram: HdrHistogram) -> dict[str, int]:
    """p50, p90, p99, p999 and max in µs (0 for an empty histogram)."""
    if histogram.get_total_count() == 0:
        return {**dict.fromkeys(PERCENTILES, 0), "max": 0, "count": 0}
    values = {name: int(histogram.get_value_at_percentile(p)) for name, p in PERCENTILES.items()}
    return {
        **values,
        "max": int(histogram.get_max_value()),
        "count": int(histogram.get_total_count()),
    }


def write_hdr(path: Path, histogram: HdrHistogram) -> None:
    from bench.results import write_atomic

    write_atomic(path, encode(histogram) + "\n")


def read_hdr(path: Path) -> HdrHistogram:
    return decode(path.read_text().strip())


@dataclass(frozen=True)
class CommandStats:
    """INFO commandstats at one moment: calls and µs per command, as the server counts them."""

    calls: Mapping[str, int]
    usec: Mapping[str, int]

    @classmethod
    def read(cls, client: redis.Redis) -> CommandStats:
        raw: Mapping[str, Any] = client.info("commandstats")
        calls: dict[str, int] = {}
        usec: dict[str, int] = {}
        for key, value in raw.items():
            name = key.removeprefix("cmdstat_")
            calls[name] = int(value["calls"])
            usec[name] = int(value["usec"])
        return cls(calls, usec)

    def since(self, earlier: CommandStats, exclude: tuple[str, ...] = ("info",)) -> CommandStats:
        """The calls and µs between ``earlier`` and this snapshot, per command."""
        names = set(self.calls) - set(exclude)
        return CommandStats(
            {n: self.calls[n] - earlier.calls.get(n, 0) for n in names},
            {n: self.usec[n] - earlier.usec.get(n, 0) for n in names},
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


def client_side(stats: CommandStats, names: tuple[str, ...] = CLIENT_COMMANDS) -> CommandStats:
    """Only the commands a client sent, not those run inside scripts."""
    return CommandStats(
        {n: c for n, c in stats.calls.items() if n in names},
        {n: u for n, u in stats.usec.items() if n in names},
    )
