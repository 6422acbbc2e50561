"""What-if: the model's jobs/s at points a run did not measure, from the parts it did
(`echomq-bench predict RUN --rtt-ms 5 --concurrency 16 --job-ms 2`).

Each line is marked predicted and names the measured cell its parts come from: the clean rows of
the same protocol and strategy at the nearest concurrency (the client's and Redis's µs a job change
with how many jobs share a round trip), then the nearest payload, then the nearest job time. The
rtt paid is the asked rtt plus what that cell paid above its own; jobs an exchange scale with the
jobs in flight. The model adds the asked job time itself; it has no per-byte term, so the asked
payload only picks the cell, and predict_main says so under the table.
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.errors import BenchError
from bench.report.columns import clean, closed_loop, filled, rtt_paid_ms
from bench.report.load import RunData, load_run
from bench.report.markdown import markdown_table
from bench.report.model import Machine, Parts, machine_of, predict, redis_us_per_job
from bench.results.files import RESULTS_DIR, resolve_run

PREDICTED = "predicted"
PAYLOAD_HELP = (
    "a job's payload, bytes (default: the run's): it picks the measured cell of the nearest payload "
    "and changes nothing else; the model has no per-byte term"
)
# The what-if grid the report shows: rtts and jobs in flight a reader may have.
WHAT_IF_RTT_MS = (1.0, 2.0, 5.0, 10.0, 20.0)
WHAT_IF_CONCURRENCY = (1, 8, 32)


@dataclass(frozen=True)
class Point:
    workers: int
    concurrency: int
    rtt_ms: float
    job_ms: float = 0.0
    payload_bytes: float | None = None  # None: the run's own


@dataclass(frozen=True)
class Guess:
    jobs_per_s: float
    parts_from: str  # the measured cell whose parts it used
    payload_from: float  # that cell's payload, bytes: the payload the line really stands on


def _cells(frame: pd.DataFrame, machine: Machine) -> pd.DataFrame:
    """A row a cell: its clean repetitions' parts, medians (every repetition's when none is clean)."""
    rows = filled(frame, concurrency=1, job_ms=0.0, payload_bytes=0).assign(
        rtt_paid=rtt_paid_ms(frame),
        redis_us=[redis_us_per_job(r, whole_cpu=not machine.cluster) for _, r in frame.iterrows()],
        clean=clean(frame),
    )
    keys = ["protocol", "strategy", "concurrency", "rtt_ms", "job_ms", "payload_bytes"]
    cells = []
    for key, group in rows.groupby(keys, sort=True):
        use = group[group["clean"]] if group["clean"].any() else group
        cells.append({
            **dict(zip(keys, key, strict=True)),
            "round_trips_per_job": use["round_trips_per_job"].median(),
            "client_us": use["loadgen_cpu_us_per_job"].median(),
            "redis_us": use["redis_us"].median(),
            "overshoot_ms": (use["rtt_paid"] - use["rtt_ms"]).fillna(0).median(),
        })  # fmt: skip
    return pd.DataFrame(cells)


def _log_distance(value: float, to: float) -> float:
    return abs(math.log(max(float(value), 1)) - math.log(max(to, 1.0)))


def _nearest(cells: pd.DataFrame, point: Point) -> pd.Series | None:
    """The cell nearest in jobs in flight (log scale), then in payload (log scale), then in job
    time (the first of equals); one with an rtt when the point has one."""
    if cells.empty:
        return None
    with_rtt = cells[(cells["rtt_ms"] > 0) == (point.rtt_ms > 0)]
    pool = with_rtt if not with_rtt.empty else cells
    payload = point.payload_bytes
    distance = {
        at: (_log_distance(concurrency, point.concurrency),
             _log_distance(size, payload) if payload is not None else 0.0, abs(float(job) - point.job_ms))
        for at, concurrency, size, job in zip(pool.index, pool["concurrency"], pool["payload_bytes"],
                                              pool["job_ms"], strict=True)
    }  # fmt: skip
    return pool.loc[min(distance, key=distance.__getitem__)]


def guess(cells: pd.DataFrame, protocol: str, strategy: str, point: Point, machine: Machine) -> Guess | None:
    mine = cells[(cells["protocol"] == protocol) & (cells["strategy"] == strategy)]
    if (base := _nearest(mine, point)) is None:
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
        job_ms=point.job_ms,  # a wait the model adds itself: the asked one, not the cell's
        client_us=float(base["client_us"]),
        processes=machine.processes,
        redis_us=float(base["redis_us"]),
        cores=machine.cores,
        redis_beside=machine.redis_beside,
    )
    payload, job = float(base["payload_bytes"]), float(base["job_ms"])
    held = f" job {job:g} ms" if job else ""
    source = f"c{float(base['concurrency']):g} rtt {float(base['rtt_ms']):g}{held}, {payload:,.0f} B"
    return Guess(predict(parts).jobs_per_s, source, payload)


def what_if(data: RunData, points: list[Point]) -> pd.DataFrame:
    """A row a protocol and point: fused and two_call predicted, their ratio, each marked."""
    # an open-loop run only has no cell whose jobs/s the workers set
    if (frame := data.frame("finish_fetch")) is None or (closed := closed_loop(frame)).empty:
        return pd.DataFrame()
    machine = machine_of(data.meta)
    cells = _cells(closed, machine)
    rows = []
    for protocol in dict.fromkeys(frame["protocol"]):
        for point in points:
            fused = guess(cells, protocol, "fused", point, machine)
            two = guess(cells, protocol, "two_call", point, machine)
            if fused is None or two is None:
                continue
            payload = fused.payload_from if point.payload_bytes is None else point.payload_bytes
            rows.append({
                "protocol": protocol, "workers": point.workers, "concurrency": point.concurrency,
                "rtt_ms": point.rtt_ms, "job_ms": point.job_ms,
                "payload B": f"{payload:,.0f}",
                "fused jobs/s": round(fused.jobs_per_s),
                "two_call jobs/s": round(two.jobs_per_s),
                "fused / two_call": f"{fused.jobs_per_s / two.jobs_per_s:.2f}",
                "parts from": fused.parts_from, "": PREDICTED,
            })  # fmt: skip
    return pd.DataFrame(rows)


def _run_median(frame: pd.DataFrame | None, column: str, default: float) -> float:
    """The median of a column over the run's rows, ``default`` when the run does not say."""
    if frame is None or column not in frame.columns or frame[column].isna().all():
        return default
    return float(frame[column].median())


def run_workers(frame: pd.DataFrame | None) -> int:
    """The run's worker connections, 1 when it does not say."""
    return max(1, int(_run_median(frame, "workers", 1)))


def grid(data: RunData) -> list[Point]:
    """The report's what-if points at the run's own worker count and job time."""
    frame = data.frames.get("finish_fetch")
    workers, job_ms = run_workers(frame), _run_median(frame, "job_ms", 0.0)
    return [Point(workers, c, r, job_ms) for r in WHAT_IF_RTT_MS for c in WHAT_IF_CONCURRENCY]


def predict_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="echomq-bench predict",
        description="Predict fused and two_call jobs/s at points a run did not measure, from its parts.",
    )
    parser.add_argument("run", help="run folder or run id")
    parser.add_argument("--rtt-ms", type=float, nargs="+", default=[5.0], help="round-trip times, ms")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8], help="jobs in flight per worker")
    parser.add_argument("--workers", type=int, nargs="+", help="worker connections (default: the run's)")
    parser.add_argument("--job-ms", type=float, nargs="+", help="a job's hold, ms (default: the run's)")
    parser.add_argument("--payload-bytes", type=int, help=PAYLOAD_HELP)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    data = load_run(resolve_run(args.run, args.results))
    if (frame := data.frame("finish_fetch")) is None:
        raise BenchError(f"{data.run_id} has no finish_fetch.csv rows to take a model's parts from")
    jobs_ms = args.job_ms or [_run_median(frame, "job_ms", 0.0)]
    if any(c < 1 for c in args.concurrency) or any(r < 0 for r in [*args.rtt_ms, *jobs_ms]):
        raise BenchError("--concurrency must be 1 or more, --rtt-ms and --job-ms 0 or more")
    if args.payload_bytes is not None and args.payload_bytes < 0:
        raise BenchError("--payload-bytes must be 0 or more")
    workers = args.workers or [run_workers(frame)]
    at = itertools.product(workers, args.rtt_ms, args.concurrency, jobs_ms)
    points = [Point(w, c, r, j, args.payload_bytes) for w, r, c, j in at]
    table = what_if(data, points)
    print(f"Predicted by the closed-loop model from run {data.run_id}; nothing below was measured.")
    print(markdown_table(table))
    print(payload_note(table, args.payload_bytes))
    return 0


def payload_note(table: pd.DataFrame, asked: int | None) -> str:
    """What the asked payload did to the lines: nothing but pick the cell whose parts they use."""
    if asked is None or table.empty:
        return "Payload: the run's own, as each line's measured cell."
    return (
        f"Payload {asked:,} B: the model has no per-byte term, as the suite measures no cost a byte. "
        "Each line takes its parts from the measured cell of the nearest payload, named in 'parts from'."
    )
