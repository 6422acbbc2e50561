"""`python -m bench.sweep_cost.pyperf_program`: the pyperf program for one size's points.

The sweep stage runs it as a subprocess (pyperf spawns worker processes and
owns argv). Each point (variant, scenario, size) is one ``bench_time_func``
benchmark, registered in a fixed order (bench/sweep_cost/plan.py). The time
function (bench/sweep_cost/timing.py) times the sweep calls only, and writes
what pyperf does not measure to side files, which the stage merges with
pyperf's values into sweep_cost.csv (bench/sweep_cost/summary.py).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pyperf

from bench.errors import BenchError
from bench.protocol.connection import RedisSettings
from bench.sweep_cost.plan import Point
from bench.sweep_cost.scenario import BENCH_MAX_STALLED, stalled_count
from bench.sweep_cost.timing import PointBench

PROGRAM = "bench.sweep_cost.pyperf_program"
URL_ENV = "EMQ_SWEEP_REDIS_URL"  # the workers' Redis URL: in the environment, not on argv


def _add_point_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", required=True, help="the queue holding the snapshot")
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--points", required=True, help="variant:scenario,... in order")
    parser.add_argument("--side-dir", required=True)
    parser.add_argument("--slice", type=int, default=1000)
    parser.add_argument("--probe-rate-hz", type=float, default=500.0)


def _forward_point_args(cmd: list[str], args: argparse.Namespace) -> None:
    """pyperf's hook: pass our options on to each worker it spawns."""
    cmd.extend(["--queue", args.queue, "--size", str(args.size), "--points", args.points])
    cmd.extend(["--side-dir", args.side_dir, "--slice", str(args.slice)])
    cmd.extend(["--probe-rate-hz", str(args.probe_rate_hz)])


def main() -> None:
    runner = pyperf.Runner(program_args=("-m", PROGRAM), add_cmdline_args=_forward_point_args)
    _add_point_args(runner.argparser)
    args = runner.parse_args()
    url = os.environ.get(URL_ENV)
    if not url:
        raise BenchError(f"{URL_ENV} is not set; run the sweep through `python -m bench sweep`")
    bench = PointBench(
        RedisSettings.from_url(url),
        args.queue,
        Path(args.side_dir),
        slice_size=args.slice,
        probe_rate_hz=args.probe_rate_hz,
        warmups=args.warmups or 0,
    )
    try:
        for spec in args.points.split(","):
            variant, scenario = spec.split(":")
            point = Point(variant, scenario, args.size)
            metadata = {
                "sweep_variant": variant,
                "sweep_scenario": scenario,
                "active_size": args.size,
                "stalled_jobs": stalled_count(args.size, scenario),
                "max_stalled": BENCH_MAX_STALLED,
                "sweep_slice": args.slice,
                "probe_rate_hz": args.probe_rate_hz,
            }
            runner.bench_time_func(point.name, bench.time_point, point, metadata=metadata)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
