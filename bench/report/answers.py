"""The answer to each question the suite exists for: what to do, by how much it pays, under which
conditions, how it held across the published runs; and the tables behind them. Every figure comes
from clean cells and says what it counts; an answer the data do not support says so."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.report.columns import clean, filled, regime, rtt_paid_ms
from bench.report.load import RunData
from bench.report.ratios import RTT_MISSED, paired_ratios
from bench.results.finish_fetch import Regime

BUSY_MS = 5000.0  # Redis's busy-reply-threshold (5 s): past it, other clients get BUSY
SLOW_MS = 1.0  # SLOWLOG's threshold in the suite's runs: a call at or under it is "≤ 1 ms"
NETWORK_RTT_MS = 1.0  # a cell at or past this rtt: workers wait on the network
ANSWER_WORDS = 60  # the most words an answer may take
SHORT_HOLD_MS = 10.0  # a variant whose longest call stays under this is one to run
APP_SIDE = ("app_side", "app_side_pipelined")
RACE_COUNTS = ("double_recoveries", "lost_attempt_updates", "requeued_after_finish")


@dataclass(frozen=True)
class Cell:
    """fused / two_call jobs/s at one point of one protocol, from its clean repetition pairs."""

    protocol: str
    concurrency: int
    rtt_ms: float
    job_ms: float
    median: float
    lo: float
    hi: float
    pairs: int
    pace: str  # the side most clean rows named as setting the pace; "fused/two_call" where they differ
    rtt_paid_ms: float | None
    rtt_missed: bool = False  # the rtt paid missed its nominal (or the strategies') one: not quoted
    predicted: float | None = None  # where Redis set both strategies' pace: what its counts predict

    @property
    def key(self) -> tuple[str, int, float, float]:
        return self.protocol, self.concurrency, self.rtt_ms, self.job_ms

    def ratio(self) -> str:
        """The median and its pairs' [min-max], or that it rests on one pair."""
        return f"{self.median:.2f}" + (f" [{self.lo:.2f}-{self.hi:.2f}]" if self.pairs > 1 else " (1 pair)")

    def text(self) -> str:
        if self.rtt_missed:
            return f"{RTT_MISSED} (paid {self.rtt_paid_ms:.2f})" if self.rtt_paid_ms else RTT_MISSED
        paid = f", rtt paid {self.rtt_paid_ms:.2f}" if self.rtt_ms and self.rtt_paid_ms else ""
        counted = f", counts predict {self.predicted:.2f}" if self.predicted else ""
        return f"{self.ratio()}, {self.pace or 'pace not judged'}{paid}{counted}"


def _backlog(frame: pd.DataFrame, only: bool) -> pd.DataFrame:
    """The backlog regime's rows (a drain rate) when the run has them, else (unless ``only``) every
    closed-loop row: an open row's ratio is 1 by design, a steady one's where the producers set it."""
    regimes = regime(frame)
    if only or (regimes == Regime.BACKLOG).any():
        return frame[regimes == Regime.BACKLOG]
    return frame[regimes != Regime.OPEN]


def fusing_cells(data: RunData, pooled: bool = False) -> list[Cell]:
    """Every point's fused / two_call jobs/s of the run, from clean pairs, with its pace and rtt
    paid; a cell whose rtt missed is kept, marked, and never quoted (``quoted``). ``pooled``: for
    figures across runs, the backlog regime's cells only (a run from before it has none)."""
    if (key := ("fusing_cells", pooled)) not in data.derived:  # a page asks for a run's cells often
        data.derived[key] = _fusing_cells(data, pooled)
    return list(data.derived[key])


def _fusing_cells(data: RunData, pooled: bool) -> list[Cell]:
    if (frame := data.frame("finish_fetch")) is None or "strategy" not in frame.columns:
        return []
    frame = _backlog(filled(frame, concurrency=1), pooled)
    ok = frame[clean(frame)]
    pairs, bound = paired_ratios(ok), redis_bound_ratio(data)
    point = [ok[c] for c in ("protocol", "concurrency", "rtt_ms", "job_ms")]  # a point's rtts paid, and
    paid = rtt_paid_ms(ok).groupby(point).agg(list).to_dict()  # each strategy's limits there
    limits = ok.get("limit", pd.Series("", ok.index)).groupby([*point, ok["strategy"]]).agg(list).to_dict()
    cells = []
    for r in pairs[pairs["other"] == "two_call"].itertuples():
        key = (r.protocol, r.concurrency, r.rtt_ms, r.job_ms)
        paces = [_pace(limits.get((*key, strategy), [])) for strategy in ("fused", "two_call")]
        pace = paces[0] if paces[0] == paces[1] else "/".join(p or "?" for p in paces)
        slept = [v for v in paid.get(key, []) if not pd.isna(v)]
        cells.append(Cell(
            str(r.protocol), int(float(r.concurrency)), float(r.rtt_ms), float(r.job_ms),  # type: ignore[arg-type]
            float(r.median), float(r.lo), float(r.hi), int(r.pairs), pace,  # type: ignore[arg-type]
            float(pd.Series(slept, dtype=float).median()) if slept else None, bool(r.rtt_missed),
            bound.get(str(r.protocol)) if pace == REDIS else None,
        ))  # fmt: skip
    return cells


REDIS = "redis"  # the limit a row names when Redis set its pace


def _server_steps(data: RunData, *steps: str) -> dict[str, dict[str, float]]:
    """Each protocol's whole-server instructions a call of ``steps``, where it counted them all, on
    the first server the run counted (a run of servers counts each)."""
    if (frame := data.frame("instructions")) is None:
        return {}
    if "server" in frame.columns:
        frame = frame[frame["server"].fillna("") == frame["server"].fillna("").iloc[0]]
    found = {}
    for protocol, rows in frame.groupby("protocol", sort=False):
        counts = rows.set_index("step")["server_instructions_per_call"]
        if protocol != "none" and set(steps) <= set(counts.index):
            found[str(protocol)] = {step: float(counts[step]) for step in steps}
    return found


def redis_bound_ratio(data: RunData) -> dict[str, float]:
    """Each protocol's fused / two_call jobs/s where Redis alone sets the pace, as its instruction
    counts predict it: (add + two-call cycle) / (add + fused cycle), the whole server's."""
    found = _server_steps(data, "addJob", "fused cycle", "two-call cycle")
    return {
        p: (c["addJob"] + c["two-call cycle"]) / (c["addJob"] + c["fused cycle"]) for p, c in found.items()
    }


def _pace(limits: list[Any]) -> str:
    """The side most of these rows named as setting their pace ("" where none was judged): the
    first in order of the most named."""
    named = Counter(v for v in limits if not pd.isna(v) and v != "")
    return str(min(v for v, n in named.items() if n == max(named.values()))) if named else ""


def fusing_table(cells: Sequence[Cell]) -> pd.DataFrame:
    """A row a protocol and jobs in flight (and job time, where held), a column an rtt."""
    rtts = sorted({c.rtt_ms for c in cells})
    keys = ["protocol", "in flight", *(["job ms"] if any(c.job_ms for c in cells) else [])]
    rows: dict[tuple[str, int, float], dict[str, str]] = {}
    for c in sorted(cells, key=lambda c: (c.protocol, c.concurrency, c.job_ms)):
        row = rows.setdefault(
            (c.protocol, c.concurrency, c.job_ms),
            {"protocol": c.protocol, "in flight": str(c.concurrency), "job ms": f"{c.job_ms:g}"},
        )
        row[f"rtt {c.rtt_ms:g} ms"] = c.text()
    table = pd.DataFrame(list(rows.values()), columns=[*keys, *(f"rtt {r:g} ms" for r in rtts)])
    return table.fillna("—")


def _span(values: Sequence[float], spec: str = ".2f", unit: str = "x") -> str:
    """The least and the most of ``values`` (ratios by default), "lo-hi" and the unit; one figure
    where they read alike."""
    lo, hi = format(min(values), spec), format(max(values), spec)
    return f"{lo if lo == hi else f'{lo}-{hi}'}{unit}"


def quoted(cells: Sequence[Cell]) -> list[Cell]:
    """The cells whose ratio may be quoted: each paid the rtt it says."""
    return [c for c in cells if not c.rtt_missed]


def redis_work_saved(data: RunData) -> dict[str, float]:
    """Each protocol's share of the whole server's instructions a job that fusing saves."""
    found = _server_steps(data, "fused cycle", "two-call cycle")
    return {p: 1 - c["fused cycle"] / c["two-call cycle"] for p, c in found.items()}


def unstable(runs: Sequence[RunData]) -> list[tuple[str, int, float, float]]:
    """The cells (protocol, in flight, rtt, job ms) where two runs' fused / two_call ranges part."""
    every = [c for run in runs for c in quoted(fusing_cells(run, True))]
    by = {key: [c for c in every if c.key == key] for key in dict.fromkeys(c.key for c in every)}
    return [key for key, cells in by.items() if max(c.lo for c in cells) > min(c.hi for c in cells)]


def fusing_answer(data: RunData, runs: Sequence[RunData] = ()) -> str:
    """What to do about fusing, in at most ANSWER_WORDS words. With ``runs``, its ranges span
    every run's clean cells, never the newest run's alone."""
    if not (own := quoted(fusing_cells(data))):
        return "**Fusing.** No clean cell measured it: no answer from this run."
    pooled = [(run, quoted(fusing_cells(run, True))) for run in runs]
    every = [c for _, cells in pooled for c in cells] or own
    runs = [run for run, cells in pooled if cells]  # the runs whose backlog cells may be quoted
    cells = [c for c in every if not c.job_ms]  # no-op jobs; held ones are said on their own
    network = [c.median for c in cells if c.rtt_ms >= NETWORK_RTT_MS]
    rtts = sorted({c.rtt_ms for c in cells if c.rtt_ms >= NETWORK_RTT_MS})
    local = [c.median for c in cells if c.rtt_ms < NETWORK_RTT_MS]
    lost = [c for c in every if c.median < 1]  # below 1 in most pairs
    local_only = bool(lost) and all(c.rtt_ms < NETWORK_RTT_MS for c in lost)
    lead = "Fuse" if not lost else "Fuse over a network" if local_only else "Fuse where it won"
    if lost:
        over = f"{len(runs)} runs" if len(runs) > 1 else "the run"
        won = f" (it lost at {len(lost)} of {len(every)} cells over {over}{', at rtt 0' * local_only})"
    else:
        won = " (it never lost but in single pairs)" if any(c.lo < 1 for c in every) else " (it never lost)"
    span = "-".join(dict.fromkeys(f"{r:g}" for r in (rtts[:1] + rtts[-1:])))
    gains = [f"{_span(network)} the jobs/s at rtt {span} ms"] if network else []
    gains += [f"{_span(local)} at rtt 0"] if local else []
    job_times = sorted({c.job_ms for c in every if c.job_ms})
    gains += [f"{_span([c.median for c in every if c.job_ms == j])} with {j:g} ms jobs" for j in job_times]
    parts = [f"**{lead}**{won}: {', '.join(gains)}." if gains else f"**{lead}**{won}."]
    if saved := redis_work_saved(data):
        less = f"{_span([100 * v for v in saved.values()], '.0f', '%')} less work a finish-and-fetch"
        parts.append(f"Redis does {less} (counted, this run).")
    if runs:  # fused beat two calls at every clean network-bound cell of a run (lo above 1)
        bound = [n for _, cells in pooled if (n := [c for c in cells if c.rtt_ms >= NETWORK_RTT_MS])]
        held, shaky = sum(all(c.lo > 1 for c in n) for n in bound), unstable(runs)
        parts.append(
            f"Won every network cell in {held} of {len(bound)} runs"
            + (f"; unstable at {len(shaky)} cells." if shaky else ".")
        )
    if not job_times:
        parts.append("Jobs took 0 ms: a long job hides the round trip.")
    return " ".join(parts)


def _figure(protocol: str, concurrency: int, rtt_ms: float, job_ms: float) -> str:
    held = f", jobs {job_ms:g} ms" if job_ms else ""
    return f"fused / two_call, {protocol}, {concurrency} in flight{held}, rtt {rtt_ms:g} ms"


def cross_run_table(runs: Sequence[RunData]) -> pd.DataFrame:
    """The headline figures, a column a run."""
    columns: dict[str, dict[str, str]] = {}
    for run in runs:
        column = columns.setdefault(run.run_id, {})
        for c in fusing_cells(run, True):
            column[_figure(*c.key)] = RTT_MISSED if c.rtt_missed else c.ratio()
        for protocol, share in redis_work_saved(run).items():
            column[f"Redis instructions fusing saves a finish-and-fetch, {protocol}"] = f"{share:.1%}"
    columns = {run: column for run, column in columns.items() if column}  # a run with none: no column
    figures = list(dict.fromkeys(f for column in columns.values() for f in column))
    shaky = {_figure(*key) for key in unstable(runs)}
    table = pd.DataFrame(columns, index=figures, dtype=object).fillna("—").rename_axis("figure").reset_index()
    return table.assign(held=["unstable" if f in shaky else "" for f in figures])


# -- the sweep --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """A sweep variant's longest call inside Redis at one active-list size and scenario."""

    protocol: str
    variant: str
    scenario: str
    size: int
    ms: float
    bounded: bool  # no call reached SLOWLOG: the hold is at most SLOW_MS

    def text(self) -> str:
        return f"≤ {SLOW_MS:g}" if self.bounded else f"{self.ms:,.1f}" if self.ms < 100 else f"{self.ms:,.0f}"

    @property
    def name(self) -> str:
        return variant_name(self.protocol, self.variant)

    @property
    def short(self) -> bool:
        return self.bounded or self.ms < SHORT_HOLD_MS

    def of(self, protocol: str, variant: str, scenario: str) -> bool:
        return (self.protocol, self.variant, self.scenario) == (protocol, variant, scenario)


def holds(data: RunData) -> list[Hold]:
    if (frame := data.frame("sweep")) is None or "redis_hold_ms_max" not in frame.columns:
        return []
    rows = frame[clean(frame) & frame["redis_hold_ms_max"].notna()]
    return [
        Hold(str(r["protocol"]), str(r["variant"]), str(r["scenario"]), int(r["active_size"]),
             float(r["redis_hold_ms_max"]), float(r["redis_slow_calls_max"] or 0) == 0)
        for r in rows.to_dict("records")
    ]  # fmt: skip


def variant_name(protocol: object, variant: object) -> str:
    """A sweep variant as the tables name it: echomq's bare, another protocol's led by its name."""
    return str(variant) if protocol == "echomq" else f"{protocol} {variant}"


EXTRAPOLATED = " (extrapolated)"


def crossing(points: Sequence[Hold], limit: float) -> tuple[float, str]:
    """The active size at which the longest call passes ``limit``, to order by, and as said:
    interpolated log-log between the measured sizes, extrapolated (and said so) past the largest,
    or a bound. An interpolated size claims two significant figures, no more."""
    measured = sorted((h.size, h.ms) for h in points if not h.bounded)
    if above := [s for s, ms in measured if ms >= limit]:
        if not (below := [(s, ms) for s, ms in measured if s < above[0] and ms < limit]):
            return above[0], f"≤ {above[0]:,}"
        (s0, h0), (s1, h1) = below[-1], next((s, ms) for s, ms in measured if s == above[0])
        size = float(f"{s0 * (limit / h0) ** (math.log(s1 / s0) / math.log(h1 / h0)):.2g}")
        return size, f"~{size:,.0f}"
    if len(measured) >= 2 and measured[-1][1] > measured[-2][1]:
        (s0, h0), (s1, h1) = measured[-2], measured[-1]
        slope = math.log(h1 / h0) / math.log(s1 / s0)
        if slope > 0.5:
            size = float(f"{s1 * (limit / h1) ** (1 / slope):.2g}")
            return size, f"~{size:,.0f}{EXTRAPOLATED}"
    return max(h.size for h in points), f"> {max(h.size for h in points):,}"


def sweep_table(found: Sequence[Hold]) -> pd.DataFrame:
    """A variant a row: its longest call a size, healthy / all stalled, and its 1 ms and 5 s sizes."""
    sizes = sorted({h.size for h in found})
    rows = []
    for name, mine in _by_name(found).items():
        row = {"variant": name}
        for size in sizes:
            by = {h.scenario: h.text() for h in mine if h.size == size}
            row[f"{size:,}"] = f"{by.get('healthy', '—')} / {by.get('all_stalled', '—')}"
        stalled = [h for h in mine if h.scenario == "all_stalled"]
        row["all stalled past 1 ms at"] = crossing(stalled, SLOW_MS)[1] if stalled else "—"
        row["past 5 s at"] = crossing(stalled, BUSY_MS)[1] if stalled else "—"
        rows.append(row)
    return pd.DataFrame(rows)


def _by_name(found: Sequence[Hold]) -> dict[str, list[Hold]]:
    """The holds of each variant, by its name, in the order first measured."""
    return {name: [h for h in found if h.name == name] for name in dict.fromkeys(h.name for h in found)}


def race_rates(data: RunData, by_delay: bool = False) -> pd.DataFrame:
    """Each variant and sweeper count's races over clean settings: totals, per stalled job, and
    whether any raced; ``by_delay``: each delay apart too (runs pool delays alike only where the same
    ones were clean)."""
    if (frame := data.frame("race")) is None:
        return pd.DataFrame()
    rows = frame[clean(frame)].assign(stalled=lambda f: f["stalled_jobs"] * f["reps"])
    keys = ["protocol", "variant", "sweepers", *(["delay_ms"] if by_delay else [])]
    out = rows.groupby(keys, sort=False)[["stalled", *RACE_COUNTS]].sum().reset_index()
    for column in RACE_COUNTS:
        out[f"{column}_per_stalled"] = out[column] / out["stalled"]
    return out.assign(raced=out[list(RACE_COUNTS)].sum(axis=1) > 0)


def short_variants(data: RunData) -> dict[str, int]:
    """The atomic variants to run, by name: race-free, every longest call under SHORT_HOLD_MS;
    each with the largest active size it was measured at."""
    raced = {variant_name(r.protocol, r.variant) for r in race_rates(data).itertuples() if r.raced}
    return {
        name: max(h.size for h in mine)
        for name, mine in _by_name(holds(data)).items()
        if mine[0].variant not in APP_SIDE and name not in raced and all(h.short for h in mine)
    }


def short_held(names: Sequence[str], runs: Sequence[RunData]) -> tuple[int, int]:
    """In how many of ``runs`` that measured any of ``names`` each one it measured was short."""
    measured = [{h.name for h in holds(run)} & set(names) for run in runs]
    shorts = [m <= set(short_variants(run)) for run, m in zip(runs, measured, strict=True) if m]
    return sum(shorts), len(shorts)


def _over_runs(values: Sequence[float], digits: int) -> str:
    """ " (n runs: lo-hi)", or "" for fewer than two runs."""
    return f" ({len(values)} runs: {_span(values, f',.{digits}f', '')})" if len(values) >= 2 else ""


def routine_holds(size: int, runs: Sequence[RunData]) -> list[float]:
    """BullMQ's healthy atomic sweep's longest call at ``size``, one a run that measured it (a
    run where no call reached SLOWLOG counts SLOW_MS)."""
    found = [
        [h for h in holds(run) if h.of("bullmq", "atomic", "healthy") and h.size == size] for run in runs
    ]
    return [max(SLOW_MS if h.bounded else h.ms for h in at) for at in found if at]


RaceSetting = tuple[str, int, float]  # variant, sweepers, delay ms


def app_side_worst(data: RunData, setting: RaceSetting | None = None) -> tuple[float, RaceSetting] | None:
    """The clean app-side setting (variant, sweepers, delay) with the most extra recoveries a
    stalled job, and that rate; with ``setting``: that one's rate."""
    races = race_rates(data, by_delay=True)
    app = races[races["variant"].isin(APP_SIDE)] if not races.empty else races
    if setting is not None and not app.empty:
        variant, sweepers, delay = setting
        app = app[(app["variant"] == variant) & (app["sweepers"] == sweepers) & (app["delay_ms"] == delay)]
    if app.empty:
        return None
    worst = app.sort_values("double_recoveries_per_stalled").iloc[-1]
    found = (str(worst["variant"]), int(worst["sweepers"]), float(worst["delay_ms"]))
    return float(worst["double_recoveries_per_stalled"]), found


def sweep_answer(data: RunData, also: Sequence[RunData] = (), runs: Sequence[RunData] = ()) -> str:
    """What to do about the stalled sweep, in at most ANSWER_WORDS words; ``also``: other runs
    (the stress run's bigger sizes) whose longest calls the advice must hold for too, and says;
    ``runs``: the published runs each figure says it held across (none: not said)."""
    if not (found := holds(data)):
        return "**The sweep.** No clean sweep point: no answer from this run."
    short = short_variants(data)
    elsewhere = [h for run in also for h in holds(run) if h.name in short]
    short = {n: s for n, s in short.items() if all(h.short for h in elsewhere if h.name == n)}
    parts = []
    if short:
        held, of = short_held(list(short), runs)
        said = [f"all {of} runs" if held == of else f"{held} of {of} runs"] if of > 1 else []
        if slow := [h for h in elsewhere if not h.bounded and h.name in short]:
            worst = max(slow, key=lambda h: h.ms)
            which = f", {worst.name}" if len(short) > 1 else ""
            said.append(f"stress: {worst.text()} ms at {worst.size:,}{which}")
        largest = max(short.values())  # this run's: another run's sizes are said apart
        aside = f" ({'; '.join(said)})" if said else ""
        reach = f"calls under {SHORT_HOLD_MS:g} ms to {largest:,} jobs{aside}"
        parts.append(f"**Use {' or '.join(short)}**: race-free, {reach}.")
    else:
        parts.append("**No sweep variant stayed short and race-free here.**")
    passes = [
        crossing(stalled, BUSY_MS)
        for protocol in ("echomq", "bullmq")
        if (stalled := [h for h in found if h.of(protocol, "atomic", "all_stalled")])
    ]
    if passes:  # the soonest: the table gives each protocol's
        text = min(passes)[1]
        size, guessed = text.removesuffix(EXTRAPOLATED), text.endswith(EXTRAPOLATED)
        parts.append(f"All-stalled atomic sweeps pass 5 s from {size} jobs{EXTRAPOLATED * guessed}.")
    if bull := [h for h in found if h.of("bullmq", "atomic", "healthy")]:
        biggest = max(bull, key=lambda h: h.size)
        spread = _over_runs(routine_holds(biggest.size, runs), 0)
        at = f"{biggest.size:,} healthy jobs{spread}"
        parts.append(f"BullMQ's routine check holds Redis {biggest.text()} ms at {at}.")
    if (races := app_side_worst(data)) is not None:
        rate, setting = races
        variant, sweepers, delay = setting
        spread = _over_runs([w[0] for run in runs if (w := app_side_worst(run, setting))], 1)
        paused = f"a {delay:g} ms pause" if delay else "no pause"
        at = f"{sweepers} sweepers, {paused}{spread}"
        parts.append(f"{variant}: {rate:.1f} extra recoveries per stalled job, {at}.")
    return " ".join(parts)
