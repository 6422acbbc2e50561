"""What-if: the model's jobs/s at points a run did not measure, from the parts it did.

`echomq-bench predict RUN --rtt-ms 5 --concurrency 16` answers "what does fusing buy at my
rtt". Each line is marked predicted and names the measured cell its parts come from: the clean
rows of the same protocol and strategy at the nearest concurrency (the client's and Redis's µs a
job change with how many jobs share a round trip). The rtt paid is the asked rtt plus what that
cell paid above its own; jobs an exchange scale with the jobs in flight.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.errors import BenchError
from bench.report.columns import clean, closed_loop, rtt_paid_ms
from bench.report.load import RunData, load_run
from bench.report.markdown import markdown_table
from bench.report.model import Parts, predict, processes_of, redis_us_per_job
from bench.results.files import RESULTS_DIR, resolve_run

PREDICTED = "predicted"
# The what-if grid the report shows: rtts and jobs in flight a reader may have.
WHAT_IF_RTT_MS = (1.0, 2.0, 5.0, 10.0, 20.0)
WHAT_IF_CONCURRENCY = (1, 8, 32)


@dataclass(frozen=True)
class Point:
    workers: int
    concurrency: int
    rtt_ms: float


@dataclass(frozen=True)
class Guess:
    protocol: str
    strategy: str
    point: Point
    jobs_per_s: float
    parts_from: str  # the measured cell whose parts it used


def _cells(frame: pd.DataFrame) -> pd.DataFrame:
    """A row a protocol, strategy, concurrency and rtt: the medians of its clean repetitions'
    parts (every repetition's when none is clean)."""
    rows = frame.assign(
        concurrency=frame["concurrency"].fillna(1) if "concurrency" in frame else 1,
        rtt_paid=rtt_paid_ms(frame),
        redis_us=[redis_us_per_job(r) for _, r in frame.iterrows()],
        clean=clean(frame),
    )
    keys = ["protocol", "strategy", "concurrency", "rtt_ms"]
    cells = []
    for key, group in rows.groupby(keys, sort=True):
        use = group[group["clean"]] if group["clean"].any() else group
        cells.append({
            **dict(zip(keys, key, strict=True)),
            "round_trips_per_job": use["round_trips_per_job"].median(),
            "client_us": use["loadgen_cpu_us_per_job"].median(),
            "redis_us": use["redis_us"].median(),
            "overshoot_ms": (use["rtt_paid"] - use["rtt_ms"]).fillna(0).median(),
            "job_ms": use["job_ms"].fillna(0).median() if "job_ms" in use else 0.0,
        })  # fmt: skip
    return pd.DataFrame(cells)


def _nearest(cells: pd.DataFrame, point: Point) -> pd.Series | None:
    """The cell nearest in jobs in flight (log scale), one with an rtt when the point has one."""
    if cells.empty:
        return None
    with_rtt = cells[(cells["rtt_ms"] > 0) == (point.rtt_ms > 0)]
    pool = with_rtt if not with_rtt.empty else cells
    distance = (pool["concurrency"].astype(float).map(math.log) - math.log(point.concurrency)).abs()
    return pool.iloc[int(distance.to_numpy().argmin())]


def guess(cells: pd.DataFrame, protocol: str, strategy: str, point: Point, processes: int) -> Guess | None:
    mine = cells[(cells["protocol"] == protocol) & (cells["strategy"] == strategy)]
    base = _nearest(mine, point)
    if base is None:
        return None
    needed = [float(base[k]) for k in ("round_trips_per_job", "client_us", "redis_us", "concurrency")]
    if not all(math.isfinite(v) and v > 0 for v in needed):
        return None  # an older run without the client's CPU or Redis's µs per job
    if point.rtt_ms == 0 and float(base["concurrency"]) != point.concurrency:
        return None  # at rtt 0 the model has no wait term to carry batching to another concurrency
    # jobs an exchange grow with the jobs in flight; at rtt 0 the rounds are not in step, so the
    # measured batching at rtt 0 scales the same way
    jobs_per_exchange = point.concurrency / float(base["concurrency"]) / float(base["round_trips_per_job"])
    paid = point.rtt_ms + float(base["overshoot_ms"]) if point.rtt_ms > 0 else 0.0
    parts = Parts(
        workers=point.workers,
        concurrency=point.concurrency,
        jobs_per_exchange=jobs_per_exchange,
        rtt_ms=paid,
        job_ms=float(base["job_ms"]),
        client_us=float(base["client_us"]),
        processes=processes,
        redis_us=float(base["redis_us"]),
    )
    source = f"c{float(base['concurrency']):g} rtt {float(base['rtt_ms']):g}"
    return Guess(protocol, strategy, point, predict(parts).jobs_per_s, source)


def what_if(data: RunData, points: list[Point]) -> pd.DataFrame:
    """A row a protocol and point: fused and two_call predicted, their ratio, each marked."""
    frame = data.frames.get("finish_fetch")
    if frame is None or frame.empty:
        return pd.DataFrame()
    closed = closed_loop(frame)
    if closed.empty:  # an open-loop run only: no cell whose jobs/s the workers set
        return pd.DataFrame()
    cells = _cells(closed)
    processes = processes_of(data.meta)
    rows = []
    for protocol in dict.fromkeys(frame["protocol"]):
        for point in points:
            fused = guess(cells, protocol, "fused", point, processes)
            two = guess(cells, protocol, "two_call", point, processes)
            if fused is None or two is None:
                continue
            rows.append({
                "protocol": protocol, "workers": point.workers, "concurrency": point.concurrency,
                "rtt_ms": point.rtt_ms, "fused jobs/s": round(fused.jobs_per_s),
                "two_call jobs/s": round(two.jobs_per_s),
                "fused / two_call": f"{fused.jobs_per_s / two.jobs_per_s:.2f}",
                "parts from": fused.parts_from, "": PREDICTED,
            })  # fmt: skip
    return pd.DataFrame(rows)


def run_workers(frame: pd.DataFrame | None) -> int:
    """The run's worker connections (the median over its rows), 1 when it does not say."""
    if frame is None or "workers" not in frame.columns or frame["workers"].isna().all():
        return 1
    return max(1, int(frame["workers"].median()))


def grid(data: RunData) -> list[Point]:
    """The report's what-if points at the run's own worker count."""
    workers = run_workers(data.frames.get("finish_fetch"))
    return [Point(workers, c, r) for r in WHAT_IF_RTT_MS for c in WHAT_IF_CONCURRENCY]


def predict_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="echomq-bench predict",
        description="Predict fused and two_call jobs/s at points a run did not measure, from its parts.",
    )
    parser.add_argument("run", help="run folder or run id")
    parser.add_argument("--rtt-ms", type=float, nargs="+", default=[5.0], help="round-trip times, ms")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8], help="jobs in flight per worker")
    parser.add_argument("--workers", type=int, nargs="+", help="worker connections (default: the run's)")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    data = load_run(resolve_run(args.run, args.results))
    frame = data.frames.get("finish_fetch")
    if frame is None or frame.empty:
        raise BenchError(f"{data.run_id} has no finish_fetch.csv rows to take a model's parts from")
    if any(c < 1 for c in args.concurrency) or any(r < 0 for r in args.rtt_ms):
        raise BenchError("--concurrency must be 1 or more and --rtt-ms 0 or more")
    workers = args.workers or [run_workers(frame)]
    points = [Point(w, c, r) for w in workers for r in args.rtt_ms for c in args.concurrency]
    table = what_if(data, points)
    print(f"Predicted by the closed-loop model from run {data.run_id}; nothing below was measured.")
    print(markdown_table(table))
    return 0
