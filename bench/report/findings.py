"""What a run found, in words: a few sentences, each derived by a rule from the run's clean cells.

Every sentence carries its figure, its [min-max] over repetitions and its conditions; each
finding ends with its source (the run, the regime). A rule that finds no clean cell says the
figure was not measured cleanly, and states nothing. Nothing here is typed by hand: the README's
block and the top of each report.md are these sentences.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from bench.report.columns import QUEUE_P50, QUEUE_P99, clean, measured, regime
from bench.report.load import RunData
from bench.report.predict import Point, run_workers, what_if
from bench.report.ratios import paired_ratios
from bench.report.sections.script_cost import BASE as SCRIPT_BASE
from bench.report.sections.script_cost import Extra, extra_cost
from bench.results.finish_fetch import Regime

NOT_CLEAN = "not measured cleanly"
# Redis's busy-reply-threshold (5 s; lua-time-limit before 7.0): past it, other clients get BUSY.
BUSY_MS = 5000.0
SLOW_MS = 1.0  # a call past 1 ms holds every other client for a noticeable time
WHAT_IF_RTT = 5.0  # the rtt a reader asks about most: a cloud Redis in another zone
APP_SIDE = ("app_side", "app_side_pipelined")
RACE_COUNTS = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish")


@dataclass(frozen=True)
class Finding:
    """One finding: a short topic, its sentences, and where they come from."""

    topic: str
    sentences: tuple[str, ...]
    source: str

    def markdown(self) -> str:
        return f"- **{self.topic}.** " + " ".join((*self.sentences, self.source))


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def span(lo: float, hi: float, form: Callable[[float], str]) -> str:
    return f"[{form(lo)}-{form(hi)}]"


def count(value: object) -> str:
    return f"{float(value):,.0f}"  # type: ignore[arg-type]


def about(value: float) -> str:
    """Two significant figures: an extrapolated size claims no more."""
    return f"{float(f'{value:.2g}'):,.0f}"


def ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.2g} ms"


def _in_flight(concurrency: object) -> str:
    c = int(float(concurrency))  # type: ignore[arg-type]
    return f"{c} job in flight" if c == 1 else f"{c} jobs in flight"


def _finish_fetch(data: RunData) -> pd.DataFrame | None:
    """finish_fetch.csv's rows, an older run's empty concurrency and job time as 1 and 0."""
    frame = data.frames.get("finish_fetch")
    if frame is None or frame.empty or "strategy" not in frame.columns:
        return None
    return frame.assign(
        concurrency=frame["concurrency"].fillna(1) if "concurrency" in frame else 1,
        job_ms=frame["job_ms"].fillna(0) if "job_ms" in frame else 0,
    )


def _regimes(frame: pd.DataFrame) -> str:
    names = sorted(set(regime(frame)))
    return " and ".join(names) + (" regime" if len(names) == 1 else " regimes")


def _source(data: RunData, *parts: str) -> str:
    return "Source: " + ", ".join((f"run {data.run_id}", *(p for p in parts if p))) + "."


# -- finish-then-fetch ------------------------------------------------------------------------


def fusing(data: RunData) -> Finding | None:
    """Fused over two calls at each point, from the repetition pairs whose both sides are clean;
    where every protocol's range spans 1, the gain has vanished; a ratio whose rtt missed is named,
    not quoted."""
    frame = _finish_fetch(data)
    if frame is None:
        return None
    frame = _headline_rows(frame)
    pairs = paired_ratios(frame[clean(frame)])
    pairs = pairs[pairs["other"] == "two_call"]
    every = paired_ratios(frame)
    every = every[every["other"] == "two_call"]
    if every.empty:
        return None
    topic = "Fusing finish and fetch"
    if pairs.empty:
        return Finding(topic, (f"Fused against two calls was {NOT_CLEAN}.",), _source(data))
    sentences = []
    gone_at: list[tuple[float, float]] = []
    for (concurrency, rtt), point in pairs.groupby(["concurrency", "rtt_ms"], sort=True):
        spans = point["lo"] <= 1  # a pair at or below 1: no gain measured
        quoted = ~point["rtt_missed"]  # a ratio over two networks is not quoted
        kept = [
            f"{r.protocol} {_paired(r.median, r.lo, r.hi, r.pairs)}"
            for r in point[quoted & ~spans].itertuples()
        ]
        lost = [
            f"{r.protocol} {_paired(r.median, r.lo, r.hi, r.pairs)}"
            for r in point[quoted & spans].itertuples()
        ]
        missed = ", ".join(str(p) for p in point.loc[~quoted, "protocol"])
        where = f"At {_in_flight(concurrency)} per worker and rtt {rtt:g} ms"
        if kept:
            sentences.append(f"{where}, fused does {', '.join(kept)} the jobs/s of two calls.")
        if lost:
            gone_at.append((float(concurrency), float(rtt)))  # type: ignore[arg-type]
            lead = f"{where}, the gain" if not kept else "The gain"
            sentences.append(f"{lead} is gone for {', '.join(lost)}.")
        if missed:
            lead = f"{where}, the rtt paid" if not (kept or lost) else "The rtt paid"
            sentences.append(f"{lead} missed for {missed}: no ratio quoted.")
    for (concurrency, rtt), _ in every.groupby(["concurrency", "rtt_ms"], sort=True):
        if not ((pairs["concurrency"] == concurrency) & (pairs["rtt_ms"] == rtt)).any():
            sentences.append(f"At {_in_flight(concurrency)} and rtt {rtt:g} ms it was {NOT_CLEAN}.")
    paced = _limits(frame, gone_at)
    if paced:
        sentences.append(f"Where it is gone, {paced} set the pace (the limit column), not the round trip.")
    used = int(pairs["pairs"].sum())
    total = int(every["pairs"].sum())
    workers = "/".join(f"{w:g}" for w in sorted(frame["workers"].dropna().unique()))
    source = _source(data, _regimes(frame), f"{workers} workers", f"{used} of {total} pairs clean")
    return Finding(topic, tuple(sentences), source)


def _headline_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a throughput ratio is read from: the backlog regime's when the run has it (a drain
    rate, the wait list never dry), else every closed-loop row (an older run's steady ones). An open
    row ran both strategies at one offered rate: its jobs/s ratio is 1 by design."""
    regimes = regime(frame)
    if (regimes == Regime.BACKLOG).any():
        return frame[regimes == Regime.BACKLOG]
    return frame[regimes != Regime.OPEN]


def _paired(median: object, lo: object, hi: object, pairs: object) -> str:
    low, high, middle = (float(v) for v in (lo, hi, median))  # type: ignore[arg-type]
    if pairs == 1:
        return f"{ratio(middle)} (1 pair)"
    return f"{ratio(middle)} [{low:.2f}-{high:.2f}]"


def _limits(frame: pd.DataFrame, points: list[tuple[float, float]]) -> str:
    """The sides the clean rows at ``points`` named as their limit, most named first."""
    if not points or "limit" not in frame.columns:
        return ""
    at = pd.Series(False, index=frame.index)
    for concurrency, rtt in points:
        at |= (frame["concurrency"] == concurrency) & (frame["rtt_ms"] == rtt)
    named = frame.loc[at & clean(frame), "limit"].replace("", pd.NA).dropna()
    sides = [str(side) for side in named.value_counts().index]
    return " or ".join(["Redis" if side == "redis" else f"the {side}" for side in sides][:2])


def fusing_predicted(data: RunData) -> Finding | None:
    """What fusing buys at a 5 ms rtt, which the run did not measure: the model's ratio from the
    parts of the run's own cells, marked predicted."""
    frame = _finish_fetch(data)
    if frame is None or (frame["rtt_ms"] == WHAT_IF_RTT).any():  # measured: the fusing finding says it
        return None
    workers = run_workers(frame)
    levels = sorted({int(c) for c in frame["concurrency"].dropna()})
    table = what_if(data, [Point(workers, c, WHAT_IF_RTT) for c in levels])
    if table.empty:
        return None
    sentences = []
    for c, rows in table.groupby("concurrency", sort=True):
        each = ", ".join(f"{p} {float(r):.2f}x" for p, r in zip(rows["protocol"], rows["fused / two_call"],
                                                               strict=True))  # fmt: skip
        where = f"At {_in_flight(c)} and rtt {WHAT_IF_RTT:g} ms"
        sentences.append(f"{where}, the model predicts fused does {each} the jobs/s of two calls.")
    source = _source(data, "predicted by the closed-loop model, not measured", f"{workers} workers")
    return Finding(f"Fusing at rtt {WHAT_IF_RTT:g} ms (predicted)", tuple(sentences), source)


def queue_latency(data: RunData) -> Finding | None:
    """What fusing does to queue latency: from open-regime rows only; otherwise not measured."""
    frame = _finish_fetch(data)
    if frame is None:
        return None
    topic = "Queue latency"
    open_rows = frame[(regime(frame) == Regime.OPEN) & clean(frame)]
    p50, p99 = QUEUE_P50, QUEUE_P99
    if (regime(frame) != Regime.OPEN).all():
        text = "Not measured: the run has no open-regime rows, and closed-loop latency measures the backlog."
        return Finding(topic, (text,), _source(data))
    if open_rows.empty or not (measured(open_rows, p50) and measured(open_rows, p99)):
        return Finding(topic, (f"The open-regime rows were {NOT_CLEAN}.",), _source(data))
    sentences = []
    keys = ["protocol", "concurrency", "rtt_ms", "target_rate"]
    for key, cell in open_rows.groupby(keys, sort=True):
        protocol, concurrency, rtt, rate = (str(key[0]), *(float(k) for k in key[1:]))  # type: ignore[arg-type]
        by = cell.groupby("strategy")
        medians = by[[p50, p99]].median()
        parts = [f"{s} p50 {ms(row[p50] / 1e3)}, p99 {ms(row[p99] / 1e3)}" for s, row in medians.iterrows()]
        offered = f" at {rate:,.0f} jobs/s offered" if rate > 0 else ""
        where = f"{protocol}{offered}, {_in_flight(concurrency)}, rtt {rtt:g} ms"
        sentences.append(f"{where}: {'; '.join(parts)}.")
    return Finding(topic, tuple(sentences), _source(data, "open regime", "medians over clean repetitions"))


def redis_limit(data: RunData) -> Finding | None:
    """Where Redis set the pace, and the jobs/s one Redis core takes: jobs/s over Redis's CPU share
    at the clean rows where Redis was the limit."""
    frame = _finish_fetch(data)
    if frame is None or "limit" not in frame.columns:
        return None
    topic = "When Redis is the limit"
    rows = frame[clean(frame) & (frame["limit"] == "redis")]
    if rows.empty:
        text = "Redis set the pace at no clean cell: the client or the round trip did."
        return Finding(topic, (text,), _source(data, _regimes(frame)))
    points = sorted({(c, r) for c, r in zip(rows["concurrency"], rows["rtt_ms"], strict=True)})
    where = ", ".join(f"{_in_flight(c)} and rtt {r:g} ms" for c, r in points)
    cpu = rows["redis_cpu_pct"].astype(float) if "redis_cpu_pct" in rows else pd.Series(dtype=float)
    per_core = rows["jobs_per_s"].astype(float) / (cpu / 100)
    sentences = [f"Redis set the pace at {where}."]
    parts = []
    for protocol in dict.fromkeys(rows["protocol"]):
        mine = per_core[rows["protocol"] == protocol].dropna()
        if not mine.empty:
            parts.append(f"{protocol} {count(mine.median())} {span(mine.min(), mine.max(), count)}")
    if parts:
        sentences.append(f"One Redis core then takes {', '.join(parts)} jobs/s.")
    return Finding(topic, tuple(sentences), _source(data, _regimes(rows), "jobs/s over Redis's CPU share"))


# -- the sweep --------------------------------------------------------------------------------


def _crossing(
    points: list[tuple[float, float, bool]], limit: float, at_least: tuple[tuple[float, float], ...] = ()
) -> str:
    """``points``: (active size, longest hold ms, whether SLOWLOG only bounds the hold from above).
    ``at_least``: (size, ms) a call is known to have held Redis at least. The size at which the
    hold passes ``limit``, interpolated log-log between clean points, or a bound."""
    measured = sorted((s, h) for s, h, bound in points if not bound)
    below = [s for s, h, bound in points if h < limit or (bound and h <= limit)]
    above = sorted(s for s, h in measured if h >= limit)
    known = sorted(s for s, h in at_least if h >= limit)
    if known and (not above or known[0] < above[0]):
        return f"at or below {count(known[0])}"
    if above:
        first = above[0]
        under = [(s, h) for s, h in measured if s < first and h < limit]
        if under:
            (s0, h0), (s1, h1) = under[-1], next((s, h) for s, h in measured if s == first)
            slope = math.log(h1 / h0) / math.log(s1 / s0)
            size = s0 * (limit / h0) ** (1 / slope) if slope > 0 else first
            return f"about {about(size)}"
        return f"at or below {count(first)}"
    if len(measured) >= 2:
        (s0, h0), (s1, h1) = measured[-2], measured[-1]
        slope = math.log(h1 / h0) / math.log(s1 / s0) if h1 > h0 else 0.0
        if slope > 0.5:
            return f"about {about(s1 * (limit / h1) ** (1 / slope))} (extrapolated)"
    largest = max((s for s, _, _ in points), default=0.0)
    return f"not up to {count(largest)}" if below else NOT_CLEAN


def sweep_holds(data: RunData) -> Finding | None:
    """Each variant's all-stalled sweep: where its longest call inside Redis passes 1 ms and 5 s,
    from clean points; which variants to run: those with no race and a hold that stays short."""
    frame = data.frames.get("sweep")
    if frame is None or frame.empty:
        return None
    rows = frame[(frame["scenario"] == "all_stalled") & (frame["reps"].fillna(0) > 0)]
    ok = rows[clean(rows)]
    sentences = []
    short: list[str] = []
    unclean: list[str] = []
    race_free = _race_free(data)
    for protocol, variant in dict.fromkeys(zip(rows["protocol"], rows["variant"], strict=True)):
        name = variant if protocol == "echomq" else f"{protocol} {variant}"
        mine = ok[(ok["protocol"] == protocol) & (ok["variant"] == variant)]
        points = [
            (float(r.active_size), float(r.redis_hold_ms_max), float(r.redis_slow_calls_max or 0) == 0)
            for r in mine.itertuples()
            if not math.isnan(float(r.redis_hold_ms_max))
        ]
        if not points:
            unclean.append(name)
            continue
        largest = max(points)
        hold = f"≤ {ms(largest[1])}" if largest[2] else ms(largest[1])
        held = _held_at_least(data, protocol) if variant == "atomic" else ()
        sentences.append(
            f"{name}: longest call {hold} at {count(largest[0])} jobs{_growth(points)}; "
            f"over 1 ms {_crossing(points, SLOW_MS, held)}, over 5 s {_crossing(points, BUSY_MS, held)}."
        )
        if (largest[2] or largest[1] <= 10 * SLOW_MS) and (protocol, variant) in race_free:
            short.append(name)
    if short:
        sentences.insert(0, f"Run an atomic sweep that is sliced or indexed: {', '.join(short)}.")
    if unclean:
        sentences.append(f"Not measured cleanly: {', '.join(unclean)}.")
    source = _source(data, "all-stalled scenario", "active-list size in jobs", "longest call inside Redis")
    return Finding("The stalled sweep", tuple(sentences), source)


def _growth(points: list[tuple[float, float, bool]]) -> str:
    """How the hold grows between the two largest clean sizes: its log-log slope, named."""
    measured = sorted((s, h) for s, h, bound in points if not bound)
    if len(measured) < 2 or measured[-1][0] == measured[-2][0]:
        return ""
    (s0, h0), (s1, h1) = measured[-2], measured[-1]
    slope = math.log(h1 / h0) / math.log(s1 / s0)
    if slope >= 1.6:
        return f", quadratic (slope {slope:.1f})"
    if 0.7 <= slope < 1.4:
        return f", linear (slope {slope:.1f})"
    return f", slope {slope:.1f}"


def _race_free(data: RunData) -> set[tuple[str, str]]:
    """(protocol, variant) whose clean race rows counted no race at all."""
    frame = data.frames.get("race")
    if frame is None or frame.empty:
        return set()
    rows = frame[clean(frame)]
    counted = rows[list(RACE_COUNTS)].sum(axis=1)
    keys = list(zip(rows["protocol"].astype(str), rows["variant"].astype(str), strict=True))
    raced = {key for key, n in zip(keys, counted, strict=True) if n > 0}
    return set(keys) - raced


def _held_at_least(data: RunData, protocol: str) -> tuple[tuple[float, float], ...]:
    """The hazard check's calls that failed: each held Redis at least until it failed."""
    frame = data.frames.get("sweep_hazard")
    if frame is None or frame.empty or "error" not in frame.columns:
        return ()
    failed = frame[(frame["protocol"] == protocol) & (frame["error"].fillna("").astype(str) != "")]
    return tuple(
        (float(s), float(e) * 1e3) for s, e in zip(failed["stalled_jobs"], failed["elapsed_s"], strict=True)
    )


def races(data: RunData) -> Finding | None:
    """The app-side loop's races per 10,000 reclaims, over its clean settings; the atomic ones' zero."""
    frame = data.frames.get("race")
    if frame is None or frame.empty:
        return None
    rows = frame[clean(frame)]
    sentences = []
    for variant in APP_SIDE:
        mine = rows[rows["variant"] == variant]
        if mine.empty:
            if (frame["variant"] == variant).any():
                sentences.append(f"{variant}: {NOT_CLEAN}.")
            continue
        reclaims = (mine["stalled_jobs"] * mine["reps"]).astype(float)
        rate = mine["double_recoveries"].astype(float) / reclaims * 1e4
        lost = mine["lost_attempt_updates"].sum() / reclaims.sum() * 1e4
        sentences.append(
            f"{variant} counts {count(rate.median())} double recoveries per 10,000 reclaims "
            f"{span(rate.min(), rate.max(), count)}, and {count(lost)} lost attempt counts."
        )
        if rate.min() >= 0.9e4:
            sentences.append("So nearly every stalled job is recovered twice or more.")
    atomic = rows[~rows["variant"].isin(APP_SIDE)]
    if not atomic.empty:
        n = int(atomic[list(RACE_COUNTS)].to_numpy().sum())
        sentences.append(f"The atomic variants count {n} races in {len(atomic)} clean settings.")
    if not sentences:
        return None
    settings = f"{len(rows)} of {len(frame)} settings clean"
    return Finding("Races", tuple(sentences), _source(data, "2 and 8 sweepers", settings)
                   if set(frame["sweepers"]) == {2, 8} else _source(data, settings))  # fmt: skip


def hazard(data: RunData) -> Finding | None:
    """BullMQ's stalled check against a client's socket timeout: BUSY replies, a call that fails."""
    frame = data.frames.get("sweep_hazard")
    if frame is None or frame.empty:
        return None
    sentences = []
    for row in frame.itertuples():
        if row.client != "bullmq":
            continue
        sentences.append(
            f"At {count(row.stalled_jobs)} stalled jobs, BullMQ's stalled check held Redis past a "
            f"{row.socket_timeout_s:g} s socket timeout; the call failed after {row.elapsed_s:.1f} s."
        )
        sentences.append(f"Other clients got {count(row.probe_busy)} BUSY replies meanwhile.")
    if not sentences:
        return None
    return Finding("BullMQ's stalled check", tuple(sentences), _source(data, "one call, sweep_hazard.csv"))


def node_worker(data: RunData) -> Finding | None:
    """BullMQ's Node Worker against its Python port, by jobs in flight, clean repetitions."""
    frame = data.frames.get("bullmq_worker")
    if frame is None or frame.empty:
        return None
    rows = frame[clean(frame)]
    node = rows[rows["driver"] == "node_worker"].groupby("concurrency")["jobs_per_s"]
    port = rows[rows["driver"] == "bullmq_worker"].groupby("concurrency")["jobs_per_s"]
    if node.ngroups == 0:
        return Finding("BullMQ's workers", (f"The Node Worker was {NOT_CLEAN}.",), _source(data))
    steps = " -> ".join(f"{count(v)}" for v in node.median())
    levels = ", ".join(f"{c:g}" for c in node.median().index)
    sentences = [f"BullMQ's Node Worker does {steps} jobs/s at {levels} jobs in flight."]
    both = node.median().index.intersection(port.median().index)
    if len(both):
        done = ", ".join(f"{count(port.median()[c])} at {c:g}" for c in both)
        times = ", ".join(ratio(node.median()[c] / port.median()[c]) for c in both)
        sentences.append(f"Its Python port does {done}: the Node Worker does {times} as many.")
    spread = ", ".join(f"{c:g}: {span(g.min(), g.max(), count)}" for c, g in node)
    return Finding("BullMQ's workers", tuple(sentences),
                   _source(data, "medians of clean repetitions", f"Node's range {spread}"))  # fmt: skip


def deadline_cost(data: RunData) -> Finding | None:
    """What echomq-deadline costs Redis a job beyond echomq: in instructions where the run counted
    them (steal cannot move a count), else the script cost's paired rounds of timed µs."""
    counted = _deadline_instructions(data)
    if counted is not None:
        return counted
    frame = data.frames.get("script_cost")
    if frame is None or frame.empty or "echomq-deadline" not in set(frame["protocol"]):
        return None
    if not clean(frame).all():
        frame = frame[clean(frame)]
    parts = []
    for step in ("fused cycle", "extendLock"):
        base = frame[(frame["step"] == step) & (frame["protocol"] == SCRIPT_BASE)]
        mine = frame[(frame["step"] == step) & (frame["protocol"] == "echomq-deadline")]
        if base.empty or mine.empty:
            continue
        extra = extra_cost(base, mine)
        parts.append(
            f"{extra.median:+.1f} µs [{extra.lo:+.1f} to {extra.hi:+.1f}] per {step} ({_rounds(extra)})"
        )
    if not parts:
        return None
    text = f"echomq-deadline costs Redis {' and '.join(parts)} beyond echomq."
    return Finding("echomq-deadline's price", (text,), _source(data, "script cost, each step alone, timed"))


def _rounds(extra: Extra) -> str:
    """What the paired rounds say: more (or less) in every one, or both ways."""
    if extra.lo > 0:
        return "more in every round"
    if extra.hi < 0:
        return "less in every round"
    return "within the rounds' noise"


def _instructions(data: RunData) -> pd.DataFrame | None:
    frame = data.frames.get("instructions")
    return None if frame is None or frame.empty else frame


def _count(frame: pd.DataFrame, protocol: str, step: str, column: str) -> float | None:
    found = frame[(frame["protocol"] == protocol) & (frame["step"] == step)][column].dropna()
    return float(found.iloc[0]) if not found.empty else None


def _deadline_instructions(data: RunData) -> Finding | None:
    frame = _instructions(data)
    if frame is None or "echomq-deadline" not in set(frame["protocol"]):
        return None
    parts = []
    for step, per in (("fused cycle", "fused job"), ("extendLock", "extendLock")):
        base = _count(frame, SCRIPT_BASE, step, "instructions_per_call")
        mine = _count(frame, "echomq-deadline", step, "instructions_per_call")
        if base and mine:
            parts.append(f"{mine - base:+,.0f} instructions per {per} ({mine / base - 1:+.0%})")
    if not parts:
        return None
    text = f"echomq-deadline costs Redis {' and '.join(parts)} beyond echomq, inside command execution."
    source = _source(data, "instructions counted under valgrind's callgrind, inputs fixed")
    return Finding("echomq-deadline's price", (text,), source)


def redis_work(data: RunData) -> Finding | None:
    """What fusing saves Redis a job, in instructions: inside command execution (the scripts) and
    for the whole server (reading requests, writing replies). Client, network and kernel are
    outside both counts."""
    frame = _instructions(data)
    if frame is None:
        return None
    sentences = []
    for protocol in (p for p in dict.fromkeys(frame["protocol"]) if p != "none"):
        fused = _count(frame, protocol, "fused cycle", "server_instructions_per_call")
        two = _count(frame, protocol, "two-call cycle", "server_instructions_per_call")
        inside_fused = _count(frame, protocol, "fused cycle", "instructions_per_call")
        inside_two = _count(frame, protocol, "two-call cycle", "instructions_per_call")
        if not (fused and two and inside_fused and inside_two):
            continue
        sentences.append(
            f"{protocol}: a fused job costs Redis {fused:,.0f} instructions, two calls {two:,.0f}; "
            f"fusing saves {1 - fused / two:.0%} of the whole server's work a job "
            f"({1 - inside_fused / inside_two:.0%} inside the scripts)."
        )
    if not sentences:
        return None
    source = _source(data, "instructions counted under valgrind's callgrind, inputs fixed; "
                           "client, network and kernel not counted")  # fmt: skip
    return Finding("Redis's work a job", tuple(sentences), source)


RULES: tuple[Callable[[RunData], Finding | None], ...] = (
    fusing, fusing_predicted, queue_latency, redis_limit, redis_work,
    sweep_holds, races, hazard, node_worker, deadline_cost,
)  # fmt: skip


def findings(data: RunData) -> list[Finding]:
    return [found for rule in RULES if (found := rule(data)) is not None]


def findings_lines(data: RunData) -> list[str]:
    """The findings as markdown bullets; an empty list when the run has nothing to say."""
    return [found.markdown() for found in findings(data)]
