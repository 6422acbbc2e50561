"""HdrHistograms in µs: make, record, encode, merge, summarise. Pure: no Redis here."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hdrh.histogram import HdrHistogram

from bench.results.files import write_atomic

# 1 µs to 10 minutes, 3 significant digits: every latency the suite can see.
LOWEST_US = 1
HIGHEST_US = 600_000_000
SIGNIFICANT_DIGITS = 3
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(histogram: HdrHistogram, value_us: float, count: int = 1) -> None:
    """Record a latency in µs (``count`` times: the jobs of one exchange), clamped into the
    trackable range."""
    histogram.record_value(min(max(int(value_us), LOWEST_US), HIGHEST_US), count)


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
    """p50, p90, p99, p999, max and count, in µs (all 0 for an empty histogram)."""
    values = {name: int(histogram.get_value_at_percentile(p)) for name, p in PERCENTILES.items()}
    return {**values, "max": int(histogram.get_max_value()), "count": int(histogram.get_total_count())}


def write_hdr(path: Path, histogram: HdrHistogram) -> None:
    write_atomic(path, encode(histogram) + "\n")


def read_hdr(path: Path) -> HdrHistogram:
    return decode(path.read_text().strip())
