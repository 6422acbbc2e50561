"""The race audit's plan: which variants, how many sweepers, which delays, and the settings they make."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bench.errors import BenchError
from bench.harness.profile import RaceOptions
from bench.protocol.base import check_protocol_names, protocol_named
from bench.protocol.scripts import SCRIPT_FILES
from bench.protocol.sweep import SWEEPERS, has_gap, is_sliced, variants_of

# The profile's defaults are the plan's: one place for each.
_DEFAULTS = RaceOptions()
SWEEPERS_MIN, SWEEPERS_MAX = 2, 16
ALL = "all"


def variant_names(requested: Iterable[str]) -> tuple[str, ...]:
    """The requested variants, checked against the sweep registry; ``all`` is every one in it."""
    requested = tuple(requested)
    choose = f"choose from {ALL}, {', '.join(SWEEPERS)}"
    if unknown := [name for name in requested if name != ALL and name not in SWEEPERS]:
        raise BenchError(f"unknown race variant {unknown[0]!r}; {choose}")
    names = tuple(dict.fromkeys(v for name in requested for v in (SWEEPERS if name == ALL else (name,))))
    if not names:
        raise BenchError(f"no race variant given; {choose}")
    return names


def extra_scripts(variants: Iterable[str]) -> tuple[str, ...]:
    """Script files of lua/ the variants need beyond echomq's own (a protocol's own sweep,
    ``atomic``, comes with its scripts)."""
    protocol = set(SCRIPT_FILES.values())
    classes = [SWEEPERS[variant] for variant in variants]
    scripts = [
        getattr(cls, "script_file", None) for cls in classes if not getattr(cls, "protocol_step", False)
    ]
    return tuple(dict.fromkeys(s for s in scripts if isinstance(s, str) and s not in protocol))


@dataclass(frozen=True)
class Point:
    """One point of the plan: run ``reps`` times, its counts summed into one race.csv row."""

    variant: str
    sweepers: int
    stalled_jobs: int
    delay_ms: float
    workers: int
    max_stalled: int = _DEFAULTS.race_max_stalled
    deadline_s: float = _DEFAULTS.race_deadline_s
    slice_size: int = _DEFAULTS.race_slice
    protocol: str = "echomq"

    def label(self) -> str:
        delay = f"{self.delay_ms:g} ms" if has_gap(self.variant) else "none (atomic)"
        sliced = is_sliced(self.variant)
        return (
            f"{self.protocol} {self.variant} sweepers={self.sweepers} jobs={self.stalled_jobs} "
            f"delay={delay} workers={self.workers}" + (f" slice={self.slice_size}" if sliced else "")
        )


@dataclass(frozen=True)
class RacePlan:
    variants: tuple[str, ...]
    sweepers: tuple[int, ...]
    stalled_jobs: int
    delays_ms: tuple[float, ...]
    reps: int
    workers: int
    max_stalled: int = _DEFAULTS.race_max_stalled
    deadline_s: float = _DEFAULTS.race_deadline_s
    slice_size: int = _DEFAULTS.race_slice
    protocols: tuple[str, ...] = ("echomq",)

    @classmethod
    def from_options(cls, options: RaceOptions, protocols: tuple[str, ...] = ("echomq",)) -> RacePlan:
        """The profile's race keys (and its protocols) as a plan, checked."""
        plan = cls(
            variants=variant_names(options.race_variants),
            sweepers=options.race_sweepers,
            stalled_jobs=options.race_jobs,
            delays_ms=options.race_delay_ms,
            reps=options.race_reps,
            workers=options.race_workers,
            max_stalled=options.race_max_stalled,
            deadline_s=options.race_deadline_s,
            slice_size=options.race_slice,
            protocols=protocols,
        )
        plan.check()
        return plan

    def check(self) -> None:
        for k in self.sweepers:
            if not SWEEPERS_MIN <= k <= SWEEPERS_MAX:
                raise BenchError(
                    f"race sweepers = {k} is outside {SWEEPERS_MIN}..{SWEEPERS_MAX}; "
                    "a race needs two or more sweepers at once"
                )
        for delay in self.delays_ms:
            if delay < 0:
                raise BenchError(f"race delay {delay:g} ms is negative; use 0 or more")
        for name, value, low in (
            ("jobs", self.stalled_jobs, 1),
            ("reps", self.reps, 1),
            ("workers", self.workers, 0),
            ("max stalled", self.max_stalled, 0),
            ("slice", self.slice_size, 1),
        ):
            if value < low:
                raise BenchError(f"race {name} = {value} is below {low}; use {low} or more")
        if self.deadline_s <= 0:
            raise BenchError(f"race deadline {self.deadline_s:g} s must be above 0")
        check_protocol_names(self.protocols)
        for protocol in self.protocols:
            if not variants_of(protocol, self.variants):
                raise BenchError(
                    f"no race variant of {', '.join(self.variants)} is a {protocol} sweep; "
                    f"add one of {', '.join(protocol_named(protocol).sweep_variants or SWEEPERS)}"
                )


def points_of(plan: RacePlan) -> list[Point]:
    """Every setting; an atomic variant has no gap to delay, so it runs once, at delay 0.
    The protocols alternate innermost, so their runs of one setting sit side by side."""
    return [
        Point(variant, k, plan.stalled_jobs, delay, plan.workers, plan.max_stalled, plan.deadline_s,
              plan.slice_size, protocol)
        for k in plan.sweepers
        for variant in plan.variants
        for delay in dict.fromkeys(plan.delays_ms if has_gap(variant) else (0.0,))
        for protocol in plan.protocols
        if variant in variants_of(protocol, plan.variants)
    ]  # fmt: skip
