"""What a run found, in words: sentences each derived by a rule from the run's clean cells, with
their figures, ranges, conditions and source; a rule without a clean cell says so and states
nothing. The README's block and the top of each report.md are these sentences, never typed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from bench.report.answers import (
    APP_SIDE,
    RACE_COUNTS,
    fusing_answer,
    fusing_cells,
    fusing_table,
    holds,
    race_rates,
    sweep_answer,
    sweep_table,
    variant_name,
)
from bench.report.columns import QUEUE_P50, QUEUE_P99, clean, filled, measured, regime, rtt_paid_ms
from bench.report.load import RunData
from bench.report.markdown import markdown_table
from bench.report.ratios import RTT_MISSED
from bench.report.sections.script_cost import BASE as SCRIPT_BASE
from bench.report.sections.script_cost import extra_cost
from bench.report.sections.sweep import records
from bench.results.finish_fetch import MISSED as DRIVER_MISSED
from bench.results.finish_fetch import Regime
from bench.results.finish_fetch import judge as judge_driver
from bench.results.sweep import MISSED as SWEEP_MISSED
from bench.results.sweep import judge_all as judge_sweep

NOT_CLEAN = "not measured cleanly"
SERVER = "server_instructions_per_call"  # the whole server's: reading, the scripts, the replies


@dataclass(frozen=True)
class Finding:
    """One finding: a short topic, its sentences, and what its figures count and where from (the run
    is named above the block)."""

    topic: str
    sentences: tuple[str, ...]
    source: str = ""

    def markdown(self) -> str:
        source = f" ({self.source}.)" if self.source else ""
        return f"- **{self.topic}.** {' '.join(self.sentences)}{source}"


def count(value: object) -> str:
    return f"{float(value):,.0f}"  # type: ignore[arg-type]


def ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.2g} ms"


def _finish_fetch(data: RunData) -> pd.DataFrame | None:
    """finish_fetch.csv's rows, an older run's empty concurrency and job time as 1 and 0."""
    if (frame := data.frame("finish_fetch")) is None or "strategy" not in frame.columns:
        return None
    return filled(frame, concurrency=1, job_ms=0)


# -- finish-then-fetch ------------------------------------------------------------------------


REPS_APART = 2.0  # p50s of one strategy's repetitions this many times apart: the median is named so


def queue_latency(data: RunData) -> Finding | None:
    """What fusing does to queue latency: from open-regime rows only; otherwise not measured."""
    if (frame := _finish_fetch(data)) is None:
        return None
    topic = "Queue latency"
    open_rows = frame[(regime(frame) == Regime.OPEN) & clean(frame)]
    p50, p99 = QUEUE_P50, QUEUE_P99
    if (regime(frame) != Regime.OPEN).all():
        text = "Not measured: the run has no open-regime rows, and closed-loop latency measures the backlog."
        return Finding(topic, (text,))
    if open_rows.empty or not (measured(open_rows, p50) and measured(open_rows, p99)):
        return Finding(topic, (f"The open-regime rows were {NOT_CLEAN}.",))
    sentences = []
    for key, point in open_rows.groupby(["protocol", "concurrency", "rtt_ms"], sort=True):
        protocol, concurrency, rtt = str(key[0]), float(key[1]), float(key[2])  # type: ignore[arg-type]
        loads = []
        for rate, cell in point.groupby("target_rate", sort=True):
            medians = cell.groupby("strategy")[[p50, p99]].median()
            both = " against ".join(f"{ms(r[p50] / 1e3)} / {ms(r[p99] / 1e3)}" for _, r in medians.iterrows())
            offered = float(rate)  # type: ignore[arg-type]
            loads.append(f"{both} at {offered:,.0f} jobs/s offered" if offered > 0 else both)
            # a median of repetitions that disagree this much describes none of them: say so
            spread = cell.groupby("strategy")[p50].agg(lambda v: v.max() / v.min() if v.min() > 0 else 1.0)
            loads[-1] += "".join(
                f" ({s}'s reps {x:.1f}x apart)" for s, x in spread.items() if x >= REPS_APART
            )
        order = " against ".join(dict.fromkeys(point["strategy"]))
        sentences.append(
            f"p50 / p99, {order}: {'; '.join(loads)} ({protocol}, {concurrency:g} in flight, rtt {rtt:g} ms)."
        )
    return Finding(topic, tuple(sentences), "open regime")


# -- the sweep --------------------------------------------------------------------------------


def hazard(data: RunData) -> Finding | None:
    """BullMQ's stalled check against a client's socket timeout: BUSY replies, a call that fails;
    from its uncontended calls (a run from before the watch columns: every call)."""
    if (frame := data.frame("sweep_hazard")) is None:
        return None
    topic, bullmq = "BullMQ's stalled check", frame[frame["client"] == "bullmq"]
    if not bullmq.empty and not clean(bullmq).any():
        return Finding(topic, (f"BullMQ's stalled check was {NOT_CLEAN}.",))
    sentences = []
    for row in bullmq[clean(bullmq)].itertuples():
        moved = f", the script still moved {count(row.moved_ids)} jobs" if row.moved_ids else ""
        sentences.append(
            f"At {count(row.stalled_jobs)} stalled jobs it held Redis past BullMQ's "
            f"{row.socket_timeout_s:g} s timeout: its client gave up after {row.elapsed_s:.1f} s{moved}, "
            f"a probe got {count(row.probe_busy)} BUSY replies."
        )
    return Finding(topic, tuple(sentences)) if sentences else None


def node_worker(data: RunData) -> Finding | None:
    """BullMQ's Node Worker against its Python port, by jobs in flight, clean repetitions."""
    if (frame := data.frame("bullmq_worker")) is None:
        return None
    rows = frame[clean(frame)]
    node = rows[rows["driver"] == "node_worker"].groupby("concurrency")["jobs_per_s"]
    # a repetition's fused over its own two-call, both clean: the median of those pairs
    fused = rows[rows["driver"] == "node_manual_fused"].set_index(["concurrency", "rep"])["jobs_per_s"]
    two = rows[rows["driver"] == "node_manual_two_call"].set_index(["concurrency", "rep"])["jobs_per_s"]
    ratios = (fused / two).dropna().groupby(level="concurrency")
    pairs, counted = ratios.median(), ratios.size().to_dict()
    if node.ngroups == 0:
        return Finding("BullMQ's workers", (f"The Node Worker was {NOT_CLEAN}.",))
    steps = ", ".join(f"{count(v)}" for v in node.median())
    levels = ", ".join(f"{c:g}" for c in node.median().index)
    sentences = [f"BullMQ's Node Worker, which fuses, does {steps} jobs/s at {levels} jobs in flight."]
    if len(pairs):
        gains = ", ".join(
            f"{r:.2f}x at {c:g}" + (" (1 pair)" if counted[c] == 1 else "") for c, r in pairs.items()
        )
        sentences.append(f"Node's own fused / two-call (clean pairs): {gains}.")
    return Finding("BullMQ's workers", tuple(sentences), "pre-filled queue")


def deadline_cost(data: RunData) -> Finding | None:
    """What echomq-deadline costs Redis a job beyond echomq: in instructions where the run counted
    them (steal cannot move a count), else the script cost's paired rounds of timed µs."""
    if (counted := _deadline_instructions(data)) is not None:
        return counted
    if (frame := data.frame("script_cost")) is None or "echomq-deadline" not in set(frame["protocol"]):
        return None
    frame = frame[clean(frame)]
    parts = []
    for step in ("fused cycle", "extendLock"):
        base = frame[(frame["step"] == step) & (frame["protocol"] == SCRIPT_BASE)]
        mine = frame[(frame["step"] == step) & (frame["protocol"] == "echomq-deadline")]
        if base.empty or mine.empty:
            continue
        extra = extra_cost(base, mine)
        every = "more" if extra.lo > 0 else "less" if extra.hi < 0 else ""  # than echomq, in each round
        rounds = f"{every} in every round" if every else "within the rounds' noise"
        parts.append(f"{extra.median:+.1f} µs [{extra.lo:+.1f} to {extra.hi:+.1f}] per {step} ({rounds})")
    if not parts:
        return None
    text = f"echomq-deadline costs Redis {' and '.join(parts)} beyond echomq."
    return Finding("echomq-deadline's price", (text,), "script cost, each step alone, timed")


def _count(frame: pd.DataFrame, protocol: str, step: str, column: str) -> float | None:
    found = frame[(frame["protocol"] == protocol) & (frame["step"] == step)][column].dropna()
    return float(found.iloc[0]) if not found.empty else None


def _deadline_instructions(data: RunData) -> Finding | None:
    if (frame := data.frame("instructions")) is None or "echomq-deadline" not in set(frame["protocol"]):
        return None
    parts = []
    for step, per in (("fused cycle", "a fused job"), ("extendLock", "an extendLock")):
        base = _count(frame, SCRIPT_BASE, step, "instructions_per_call")
        mine = _count(frame, "echomq-deadline", step, "instructions_per_call")
        if base and mine:
            parts.append(f"{mine - base:+,.0f} instructions {per} ({mine / base - 1:+.0%})")
    if not parts:
        return None
    text = f"Beyond echomq, inside the scripts: {', '.join(parts)}."
    return Finding("echomq-deadline's price", (text,))


def redis_work(data: RunData) -> Finding | None:
    """What fusing saves Redis a job, in the whole server's instructions (reading requests, running
    the scripts, writing replies). Client, network and kernel are outside the count."""
    if (frame := data.frame("instructions")) is None:
        return None
    parts = []
    for protocol in (p for p in dict.fromkeys(frame["protocol"]) if p != "none"):
        fused, two = (_count(frame, protocol, step, SERVER) for step in ("fused cycle", "two-call cycle"))
        if fused and two:
            parts.append(f"{protocol} {1 - fused / two:.0%} ({count(fused)} against {count(two)})")
    if not parts:
        return None
    text = f"Fusing saves Redis's instructions a finish-and-fetch: {', '.join(parts)}."
    return Finding("Redis's work a finish-and-fetch", (text,), "whole server, counted under callgrind")


def capacity(data: RunData) -> Finding | None:
    """What one Redis core takes, from the clean rows where Redis set the pace only: jobs/s over
    Redis's CPU share, each protocol and strategy apart. That counts each job's add too (the
    producers' addJob runs on the same Redis); without it, scaled by the instruction counts."""
    frame = _finish_fetch(data)
    if frame is None or "limit" not in frame.columns or "redis_cpu_pct" not in frame.columns:
        return None
    rows = frame[clean(frame) & (frame["limit"] == "redis") & (frame["redis_cpu_pct"].astype(float) > 0)]
    if "rtt_missed" in rows.columns:  # a row that paid another network than it says is no evidence
        rows = rows[~rows["rtt_missed"].fillna(False).astype(bool)]
    topic = "One Redis core"
    if rows.empty:
        return Finding(topic, ("Redis set the pace at no clean cell: the client or the round trip did.",))
    counts = data.frame("instructions")
    each = []
    for (protocol, strategy), mine in rows.groupby(["protocol", "strategy"], sort=False):
        per_core = float(
            (mine["jobs_per_s"].astype(float) / (mine["redis_cpu_pct"].astype(float) / 100)).median()
        )
        said = f"{protocol} {strategy} {count(per_core)}"
        cycle = "fused cycle" if strategy == "fused" else "two-call cycle"
        if counts is not None:
            add, job = (_count(counts, str(protocol), step, SERVER) for step in ("addJob", cycle))
            said += f" / {count(per_core * (add + job) / job)}" if add and job else ""
        each.append(said)
    text = f"Jobs/s with / without each job's add: {', '.join(each)}."
    node = data.frame("bullmq_worker")
    if node is not None and "redis_cpu_pct" in node.columns:
        mine = node[
            clean(node) & (node["driver"] == "node_worker") & (node["redis_cpu_pct"].astype(float) > 0)
        ]
        if not mine.empty:  # on the same basis: its jobs/s over the share of a core Redis used,
            top = mine[mine["concurrency"] == mine["concurrency"].max()]  # where Redis worked hardest
            share = top["redis_cpu_pct"].astype(float) / 100
            per_core = (top["jobs_per_s"].astype(float) / share).median()
            where = f"{int(top['concurrency'].iloc[0])} in flight, no adds"
            text += f" BullMQ's Node Worker: {count(per_core)} a core ({where})."
    pooled = "clean Redis-paced rows whose rtt held, every point pooled"
    return Finding(topic, (text,), f"{pooled}; without the add: by instruction counts")


def conditions(data: RunData) -> str:
    """What every finish_fetch figure was measured under, in one line."""
    if (frame := _finish_fetch(data)) is None:
        return ""
    frame = frame[clean(frame)]
    if frame.empty:
        return "Conditions: none to state, no clean window."

    def values(column: str, unit: str = "") -> str:
        found = sorted({float(v) for v in frame[column].dropna()}) if column in frame.columns else []
        return ", ".join(f"{v:g}" for v in found) + unit if found else "not recorded"

    paid = rtt_paid_ms(frame[frame["rtt_ms"].astype(float) > 0])
    paid_text = f"paid {paid.min():.2f}-{paid.max():.2f} ms" if not paid.empty else "none"
    reps = int(frame["rep"].max()) if "rep" in frame.columns and not frame.empty else 0
    processes = sorted({int(float(v)) for v in frame.get("loadgen_processes", pd.Series()).dropna()})
    on = f" on {processes[0]}-{processes[-1]} load processes" if len(processes) > 1 else ""
    return (
        f"Conditions: jobs of {values('job_ms', ' ms')}, {values('payload_bytes')}-byte payloads; "
        f"rtt {values('rtt_ms', ' ms')} slept client-side an exchange ({paid_text}); "
        f"{values('workers')} workers{on}; {values('measure_s', ' s')} windows x {reps} repetitions; "
        f"Redis and the load share {data.meta.cores or '?'} cores."
    )


def missed_goals(data: RunData) -> list[str]:
    """The run's goals that were missed, one line each, with the figure they touch."""
    lines = []
    if (frame := data.frame("finish_fetch")) is not None:
        judged = judge_driver(records(frame))
        lines += [f"{g.name}{g.detail()}" for g in judged if g.verdict == DRIVER_MISSED]
    if (sweep := data.frame("sweep")) is not None:
        judged_sweep = judge_sweep(records(sweep), records(data.frames.get("sweep_control")))
        lines += [f"{g.goal.name} ({g.figure})" for g in judged_sweep if g.verdict == SWEEP_MISSED]
    return lines


RULES: tuple[Callable[[RunData], Finding | None], ...] = (
    capacity, redis_work, queue_latency, hazard, node_worker, deadline_cost,
)  # fmt: skip


def findings(data: RunData) -> list[Finding]:
    return [found for rule in RULES if (found := rule(data)) is not None]


def findings_lines(data: RunData, runs: Sequence[RunData] = (), also: Sequence[RunData] = ()) -> list[str]:
    """The block a README and a report open with: the answer to each question, the conditions,
    the tables behind the answers, the other findings, and what did not hold. ``runs``: the
    published runs the answers say they held across (none: not said)."""
    if _finish_fetch(data) is None and data.frames.get("sweep") is None:
        return [found.markdown() for found in findings(data)]
    lines = [fusing_answer(data, runs), "", sweep_answer(data, also, runs), ""]
    said = conditions(data)
    lines += [said, ""] if said else []
    if cells := fusing_cells(data):
        lines += [FUSING_TABLE, "", markdown_table(fusing_table(cells)), ""]
        if any(c.rtt_missed for c in cells):
            lines += [
                f"{RTT_MISSED}: a side paid over 10% or 0.2 ms beyond its nominal rtt or the other's.",
                "",
            ]
    if found := holds(data):
        lines += [SWEEP_TABLE, "", markdown_table(sweep_table(found)), ""]
    races = race_rates(data)
    if not races.empty:
        raced, free = races[races["raced"]], races[~races["raced"]]
        lines += [RACE_TABLE, "", markdown_table(race_table(raced)), ""] if not raced.empty else []
        if not free.empty:
            who = "the atomic variants" if not set(raced["variant"]) - set(APP_SIDE) else "the rest"
            each = free.groupby(["protocol", "variant"]).size()
            per = f" ({int(each.iloc[0])} each)" if each.nunique() == 1 else ""
            lines += [f"No race in {who}' {len(free)} clean settings{per}.", ""]
    lines += [found.markdown() for found in findings(data)]
    if missed := missed_goals(data):
        lines += ["", "Goals missed, with the worst point:", "", *(f"- {line}" for line in missed)]
    return lines


FUSING_TABLE = (
    "Fused / two_call jobs/s, backlog: median [min-max] of clean pairs; who set the pace "
    "(fused/two_call if apart); rtt paid, ms; if Redis, what its counts predict."
)
SWEEP_TABLE = (
    "Redis's longest call in one sweep, ms (SLOWLOG: Redis's time, not the client's), "
    "healthy / all stalled; ≤ 1: under 1 ms."
)
RACE_TABLE = "Races, clean settings: total (per stalled job)."


def race_table(rates: pd.DataFrame) -> pd.DataFrame:
    """A variant and sweeper count a row: each race kind's total, and per stalled job."""
    table = pd.DataFrame({
        "variant": [variant_name(p, v) for p, v in zip(rates["protocol"], rates["variant"], strict=True)],
        "sweepers": rates["sweepers"],
        "stalled jobs, over reps and delays": rates["stalled"].map(count),
    })  # fmt: skip
    for column, label in zip(RACE_COUNTS, RACE_LABELS, strict=True):
        totals, per = rates[column], rates[f"{column}_per_stalled"]
        table[label] = [f"{count(t)} ({float(x):.2f})" for t, x in zip(totals, per, strict=True)]
    return table


RACE_LABELS = ("extra recoveries", "lost attempt updates", "finished jobs requeued")
