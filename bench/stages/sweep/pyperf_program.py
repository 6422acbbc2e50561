"""`python -m bench.stages.sweep.pyperf_program`: the pyperf program for one size's points.

The sweep stage runs it as a subprocess (pyperf spawns workers and owns argv); each point is one
``bench_time_func`` benchmark, timed by timing.py, which writes what pyperf does not measure to
side files.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, get_origin, get_type_hints

import pyperf
import redis

from bench.errors import BenchError
from bench.protocol.connection import RedisSettings
from bench.protocol.refusal import refused
from bench.protocol.sweep import DEFAULT_SLICE, DEFAULT_SLICE_BUDGET_US
from bench.results.files import write_json
from bench.stages.sweep.plan import SweepCase
from bench.stages.sweep.probe import DEFAULT_RATE_HZ
from bench.stages.sweep.scenario import BENCH_MAX_STALLED, stalled_count
from bench.stages.sweep.timing import PointBench

REFUSED_FILE = "refused.json"  # a worker met a refusal (protocol/refusal.py): its line and kind

PROGRAM = "bench.stages.sweep.pyperf_program"
URL_ENV = "EMQ_SWEEP_REDIS_URL"  # the workers' Redis URL: in the environment, not on argv


@dataclass(frozen=True)
class ProgramSettings:
    """What the program is told beyond pyperf's options: ``argv()`` writes every field as ``--field-name
    value``, ``from_args`` reads them back in each worker pyperf spawns, so no default lives twice."""

    queue: str  # the queue holding the snapshot
    size: int
    points: tuple[tuple[str, str], ...]  # (variant, scenario), in the order pyperf runs them
    side_dir: Path
    slice_size: int = DEFAULT_SLICE
    slice_budget_us: int = DEFAULT_SLICE_BUDGET_US
    probe_rate_hz: float = DEFAULT_RATE_HZ
    protocol: str = "echomq"  # the queue's protocol: one pyperf run measures one protocol's points

    @staticmethod
    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    def argv(self) -> list[str]:
        return [arg for f in fields(self) for arg in (self.flag(f.name), _encode(getattr(self, f.name)))]

    def command(self, output: Path, pyperf_args: list[str]) -> list[str]:
        """The whole command line: this program, these settings, pyperf's own options."""
        return [
            sys.executable, "-m", PROGRAM, *self.argv(),
            "--inherit-environ", URL_ENV, "-o", str(output), *pyperf_args,
        ]  # fmt: skip

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        # Every field is required: argv() always writes them all.
        for f in fields(cls):
            parser.add_argument(cls.flag(f.name), dest=f.name, required=True)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProgramSettings:
        hints = get_type_hints(cls)
        return cls(**{f.name: _decode(hints[f.name], getattr(args, f.name)) for f in fields(cls)})

    def point_list(self) -> list[SweepCase]:
        return [SweepCase(variant, scenario, self.size, self.protocol) for variant, scenario in self.points]


def _encode(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(f"{variant}:{scenario}" for variant, scenario in value)
    return str(value)


def _decode(kind: Any, text: str) -> Any:
    if get_origin(kind) is tuple:
        return tuple(tuple(spec.split(":", 1)) for spec in text.split(","))
    return kind(text)


def forward_settings(cmd: list[str], args: argparse.Namespace) -> None:
    """pyperf's hook: pass our settings on to each worker it spawns."""
    cmd.extend(ProgramSettings.from_args(args).argv())


def main() -> None:
    runner = pyperf.Runner(program_args=("-m", PROGRAM), add_cmdline_args=forward_settings)
    ProgramSettings.add_arguments(runner.argparser)
    args = runner.parse_args()
    settings = ProgramSettings.from_args(args)
    if not (url := os.environ.get(URL_ENV)):
        raise BenchError(f"{URL_ENV} is not set; run the sweep through `python -m bench sweep`")
    bench = PointBench(
        RedisSettings.from_url(url),
        settings.queue,
        settings.side_dir,
        slice_size=settings.slice_size,
        slice_budget_us=settings.slice_budget_us,
        probe_rate_hz=settings.probe_rate_hz,
        warmups=args.warmups or 0,
        protocol=settings.protocol,
    )
    try:
        for point in settings.point_list():
            metadata = {
                "protocol": point.protocol,
                "sweep_variant": point.variant,
                "sweep_scenario": point.scenario,
                "active_size": point.size,
                "stalled_jobs": stalled_count(point.size, point.scenario),
                "max_stalled": BENCH_MAX_STALLED,
                "sweep_slice": settings.slice_size,
                "sweep_slice_budget_us": settings.slice_budget_us,
                "probe_rate_hz": settings.probe_rate_hz,
            }
            runner.bench_time_func(point.name, bench.time_point, point, metadata=metadata)
    except redis.RedisError as exc:
        if (said := refused(exc, bench.settings.where)) is None:
            raise
        # the stage reads it after pyperf ends: one line, not a worker's traceback
        write_json(settings.side_dir / REFUSED_FILE, {"line": str(said), "kind": said.kind})
        sys.exit(2)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
