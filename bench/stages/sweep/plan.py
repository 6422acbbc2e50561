"""Which sweep points run, in which order, and with which pyperf settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.errors import BenchError
from bench.harness.profile import SweepOptions
from bench.protocol.base import check_protocol_names, protocol_named
from bench.protocol.sweep import SWEEPERS, variants_of
from bench.stages.sweep.scenario import SCENARIOS

ECHOMQ = "echomq"

# Why a variant of a protocol gets slow enough to be capped, by the point's label (a capped row's
# `skipped` says it). The reason differs by protocol: echomq-deadline's sweep is linear.
SLOW_BECAUSE = {
    "atomic": "one LREM scan of active per reclaimed id makes it quadratic",
    "bullmq.atomic": "one LREM scan of active per reclaimed id makes it quadratic",
    "echomq-deadline.atomic": "linear (ids taken from the end of active); capped to keep the run short",
    "app_side": "one round trip per command, about five per stalled job",
    "app_side_pipelined": "each LREM scans active past the live jobs: quadratic once a share stalls",
}
# Below this size a point runs inside the pyperf process (--in-process): a worker
# process's start (~0.5 s of imports) would cost more than the point's sweeps.
IN_PROCESS_BELOW = 10_000
WARMUP_BELOW = 100_000  # a warm-up value costs a whole sweep: skipped where that is seconds


def variant_label(protocol: str, variant: str) -> str:
    """The variant, led by its protocol unless that is the suite's own: ``bullmq.atomic``."""
    return variant if protocol == ECHOMQ else f"{protocol}.{variant}"


@dataclass(frozen=True)
class SweepCase:
    variant: str
    scenario: str
    size: int
    protocol: str = ECHOMQ

    @property
    def label(self) -> str:
        return variant_label(self.protocol, self.variant)

    @property
    def name(self) -> str:
        """pyperf's benchmark name."""
        return f"sweep/{self.label}/{self.scenario}/{self.size}"

    @property
    def slug(self) -> str:
        return f"{self.label}.{self.scenario}.{self.size}"


@dataclass(frozen=True)
class Point:
    point: SweepCase
    skipped: str | None = None  # why it is not measured


# A cap's key: (protocol, variant, scenario); protocol None is every protocol's.
CapKey = tuple[str | None, str, str]


def parse_caps(caps: Sequence[str]) -> dict[CapKey, tuple[int, str]]:
    """``[protocol.]variant:scenario:max_size`` ('*' for every scenario) ->
    {(protocol or None, variant, scenario): (max, entry)}. A cap without a protocol applies
    to the variant in every protocol; one with a protocol overrides it for that protocol
    (``echomq-deadline.atomic:all_stalled:100000``: its sweep is not quadratic there)."""
    parsed: dict[CapKey, tuple[int, str]] = {}
    for entry in caps:
        parts = [p.strip() for p in entry.strip().split(":")]
        if len(parts) != 3 or not parts[2].isdigit():
            raise BenchError(
                f"sweep-caps entry {entry!r} is not [protocol.]variant:scenario:max_size; "
                "e.g. atomic:all_stalled:10000"
            )
        named, scenario, limit = parts
        protocol, dot, variant = named.rpartition(".")
        if dot:
            check_protocol_names((protocol,))
        if variant not in SWEEPERS:
            raise BenchError(f"sweep-caps entry {entry!r}: unknown variant; use one of {', '.join(SWEEPERS)}")
        if scenario != "*" and scenario not in SCENARIOS:
            raise BenchError(
                f"sweep-caps entry {entry!r}: unknown scenario; use '*' or one of {', '.join(SCENARIOS)}"
            )
        for each in SCENARIOS if scenario == "*" else (scenario,):
            parsed[(protocol or None, variant, each)] = (int(limit), entry.strip())
    return parsed


def over_cap(caps: dict[CapKey, tuple[int, str]], point: SweepCase) -> str | None:
    """Why ``point`` is over its cap (its protocol's own, else the variant's in any); None if not."""
    own = caps.get((point.protocol, point.variant, point.scenario))
    limit, entry = own or caps.get((None, point.variant, point.scenario), (0, ""))
    if not entry or point.size <= limit:
        return None
    return f"over the cap {entry}: {SLOW_BECAUSE.get(point.label, 'capped by the profile')}"


def points_of(options: SweepOptions, protocols: Sequence[str] = (ECHOMQ,)) -> list[Point]:
    """Every point in the order it runs: size ascending, then protocol (one pyperf run), then
    scenario, then variant, for each protocol the variant is a sweep of."""
    for variant in options.sweep_variants:
        if variant not in SWEEPERS:
            raise BenchError(f"unknown sweep variant {variant!r}; use some of {', '.join(SWEEPERS)}")
    for scenario in options.sweep_scenarios:
        if scenario not in SCENARIOS:
            raise BenchError(f"unknown sweep scenario {scenario!r}; use some of {', '.join(SCENARIOS)}")
    check_protocol_names(protocols)
    for protocol in protocols:
        if not variants_of(protocol, options.sweep_variants):
            own = ", ".join(protocol_named(protocol).sweep_variants or SWEEPERS)
            asked = ", ".join(options.sweep_variants)
            raise BenchError(f"no sweep variant of {asked} is a {protocol} sweep; add one of {own}")
    caps = parse_caps(options.sweep_caps)
    cases = [
        SweepCase(variant, scenario, size, protocol)
        for size in sorted(set(options.sweep_sizes))
        for protocol in protocols
        for scenario in options.sweep_scenarios
        for variant in variants_of(protocol, options.sweep_variants)
    ]
    return [Point(case, over_cap(caps, case)) for case in cases]


def run_order(planned: Sequence[Point]) -> list[tuple[int, str, list[Point]]]:
    """The planned points as (size, protocol, points), one pyperf run over one grown queue each: the
    stage and its ETA both walk this, so the progress line counts every point the stage reports."""
    groups: dict[tuple[int, str], list[Point]] = {}
    for planned_point in planned:  # points_of() orders by size, then protocol: the groups keep it
        groups.setdefault((planned_point.point.size, planned_point.point.protocol), []).append(planned_point)
    return [(size, protocol, points) for (size, protocol), points in groups.items()]


def loops_for(size: int) -> int:
    """Sweeps timed per pyperf value: several at small sizes, where one sweep is ~100 µs."""
    return max(1, min(20, 1000 // size))


def pyperf_options(size: int, reps: int) -> list[str]:
    """``reps`` values a point from one process (what is measured is Redis's work): pyperf's
    default, 20 processes x 3 values, would take hours, each timed sweep restoring its state."""
    options = ["--processes", "1", "--values", str(reps)]
    options += ["--warmups", "1" if size < WARMUP_BELOW else "0", "--loops", str(loops_for(size))]
    if size < IN_PROCESS_BELOW:
        options.append("--in-process")
    return options
