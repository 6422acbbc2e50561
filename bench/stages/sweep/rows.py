"""sweep_cost.csv's typed rows from pyperf's values and the side files, and pyperf's JSON merged."""

from __future__ import annotations

import glob
import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyperf

from bench.harness.machine import MachineSample
from bench.harness.profile import SweepOptions
from bench.protocol.sweep import is_sliced
from bench.results.files import HDR_DIR, PYPERF_DIR, hdr_name, read_json, write_atomic
from bench.results.hdr import decode, summary, write_hdr
from bench.results.rows import RunIds
from bench.results.sweep import SweepCostRow
from bench.stages.sweep.plan import Point, SweepCase
from bench.stages.sweep.probe import ProbeWindow

PYPERF_JSON = f"{PYPERF_DIR}/sweep_pyperf.json"  # every size's, merged (one a size beside it)
SIDE_DIR = f"{PYPERF_DIR}/side"  # what each timed value saw besides its time


@dataclass
class SizeOutcome:
    """One pyperf run's results: values (seconds a sweep) per benchmark name, a failure, and the
    machine during each point's window."""

    values: dict[str, list[float]] = field(default_factory=dict)
    failure: str | None = None
    machine: dict[str, MachineSample] = field(default_factory=dict)
    # a worker met a server that refuses every call: its line (protocol/refusal.py) and kind
    refused: tuple[str, str] | None = None


def load_side(run_dir: Path, point: SweepCase) -> list[dict[str, Any]]:
    """Every timed value's side record for ``point``, from each worker process."""
    pattern = str(run_dir / SIDE_DIR / f"{glob.escape(point.slug)}.*.json")
    return [value for path in sorted(glob.glob(pattern)) for value in read_json(Path(path))["values"]]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class SideSummary:
    """A point's side measurements over all its timed values (None: no value recorded)."""

    values: int
    round_trips: float | None
    server_us: float | None
    hold_ms_max: float | None
    redis_hold_ms_max: float | None
    redis_slow_calls_max: int | None
    probe: ProbeWindow
    errors: list[str]

    def probe_us(self, figure: str) -> int | None:
        """The probe's ``figure`` ("p99", "max": bench.results.hdr.summary's), µs; None: none sent."""
        return summary(self.probe.histogram)[figure] if self.probe.sent else None


def _max_known(values: list[Any]) -> Any:
    """The largest of ``values``; None when there is none or one could not tell (None: SLOWLOG's,
    or a side record older than the figure)."""
    return None if not values or None in values else max(values)


def side_summary(run_dir: Path, point: SweepCase) -> SideSummary:
    side = load_side(run_dir, point)
    probe = ProbeWindow()
    for r in side:
        probe.add(ProbeWindow(decode(r["probe_hdr"]), r["probe_busy"], r["probe_errors"], r["probe_sent"]))
    hold_us = _max_known([r.get("redis_hold_us") for r in side])  # the longest call inside Redis
    return SideSummary(
        values=len(side),
        round_trips=_median([n for r in side for n in r["round_trips"]]),
        server_us=_median([n for r in side for n in r["server_us"]]),
        hold_ms_max=round(max(r["hold_s"] for r in side) * 1e3, 4) if side else None,
        redis_hold_ms_max=None if hold_us is None else round(hold_us / 1e3, 4),
        redis_slow_calls_max=_max_known([n for r in side for n in r.get("redis_slow_calls", [None])]),
        probe=probe,
        errors=sorted({e for record in side for e in record["errors"]}),
    )


def row_of(
    run_dir: Path, planned: Point, outcome: SizeOutcome | None, ids: RunIds, options: SweepOptions
) -> SweepCostRow:
    """One point's sweep_cost.csv row (and its probe histogram under hdr/)."""
    point = planned.point
    row = SweepCostRow(
        run_id=ids.run_id,
        protocol=ids.protocol,
        profile=ids.profile,
        variant=point.variant,
        scenario=point.scenario,
        active_size=point.size,
        slice_size=options.sweep_slice,
        probe_rate_hz=options.probe_rate_hz,
        # the budget a sliced call ran under; no other variant has one
        slice_budget_us=options.sweep_slice_budget_us if is_sliced(point.variant) else None,
    )
    if planned.skipped:
        return replace(row, skipped=planned.skipped)
    values = outcome.values.get(point.name, []) if outcome else []
    side = side_summary(run_dir, point)
    errors = list(side.errors)
    if not values:
        errors.insert(0, outcome.failure if outcome and outcome.failure else "pyperf wrote no values")
    else:
        median_s = statistics.median(values)
        row = replace(
            row,
            reps=len(values),
            sweep_ms_median=round(median_s * 1e3, 4),
            sweep_ms_stdev=round(statistics.stdev(values) * 1e3, 4) if len(values) > 1 else 0.0,
            us_per_active_job=round(median_s * 1e6 / point.size, 4),
        )
    if side.values:
        write_hdr(run_dir / HDR_DIR / hdr_name("sweep", point.slug, 0, "probe"), side.probe.histogram)
        row = replace(
            row,
            round_trips=side.round_trips,
            server_us=side.server_us,
            hold_ms_max=side.hold_ms_max,
            redis_hold_ms_max=side.redis_hold_ms_max,
            redis_slow_calls_max=side.redis_slow_calls_max,
            probe_p99_us=side.probe_us("p99"),
            probe_max_us=side.probe_us("max"),
            probe_busy=side.probe.busy,
        )
    machine = outcome.machine.get(point.name) if outcome else None
    if machine is not None:
        row = replace(row, **machine.row_fields())
    return replace(row, skipped="error: " + "; ".join(errors)) if errors else row


def merge_pyperf(run_dir: Path) -> None:
    """Every size's pyperf JSON in one suite: sweep_pyperf.json (`python -m pyperf show` reads it)."""
    sizes = (
        p for p in (run_dir / PYPERF_DIR).glob("sweep_*.json") if p.stem.removeprefix("sweep_").isdigit()
    )
    benches = [
        bench for path in sorted(sizes) for bench in pyperf.BenchmarkSuite.load(str(path)).get_benchmarks()
    ]
    if benches:
        text = io.StringIO()
        pyperf.BenchmarkSuite(benches).dump(text)
        write_atomic(run_dir / PYPERF_JSON, text.getvalue())
