"""The hot path's script cost (script_cost.csv): each protocol's steps against echomq's."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from bench.report.load import RunData
from bench.report.markdown import fmt, markdown_table
from bench.report.quiet import contended_note
from bench.report.verdict import CLAIM_BEYOND, NOT_JUDGED, Sample, verdict

BASE = "echomq"  # what every other protocol's script cost is read against
# The steps a worker pays a job (or a renewal) for: the line under the table names these.
HOT_STEPS = ("fused cycle", "two-call cycle", "extendLock")


def parse_commands(cell: str) -> dict[str, float]:
    """The commands cell, JSON or an older run's ``evalsha 1, zadd 1``, as {name: count a call}."""
    text = str(cell).strip()
    if text.startswith("{"):
        return {str(name): float(n) for name, n in json.loads(text).items()}
    found: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if part:
            name, _, count = part.rpartition(" ")
            found[name] = float(count)
    return found


def commands_text(cell: str) -> str:
    """The cell as the table shows it: ``evalsha 1, zadd 1``."""
    return ", ".join(f"{name} {n:g}" for name, n in sorted(parse_commands(cell).items()))


def _beyond(base: str, other: str) -> str:
    """What ``other`` runs per call beyond ``base``: ``zadd +1, zrem +1``, or ``same``."""
    a, b = parse_commands(base), parse_commands(other)
    diff = {n: b.get(n, 0.0) - a.get(n, 0.0) for n in sorted(set(a) | set(b))}
    return ", ".join(f"{n} {d:+g}" for n, d in diff.items() if abs(d) > 1e-9) or "same"


# verdict's words as a script cost reads them: lower µs is "better", so a dearer protocol costs "more"
COST_WORDS = {"worse": "more", "better": "less", NOT_JUDGED: "too few repetitions to judge"}
SAME_WITHIN_NOISE = "same within noise"


@dataclass(frozen=True)
class Extra:
    """A step's cost beyond echomq's in one run: the median of the per-round differences (the
    protocols alternate round by round) [min-max], and compare's verdict on the two's repetitions."""

    median: float
    lo: float
    hi: float
    verdict: str

    def text(self) -> str:
        return f"{self.median:+.2f} µs [{self.lo:+.2f} to {self.hi:+.2f}], {self.verdict}"


def extra_cost(base: pd.DataFrame, other: pd.DataFrame) -> Extra:
    """``other``'s µs per call beyond ``base``'s, both a step's rows (one per repetition)."""
    a = base.set_index("rep")["server_us_per_call"].astype(float)
    b = other.set_index("rep")["server_us_per_call"].astype(float)
    rounds = (b - a).dropna()  # paired by repetition: the same round, the same machine moment
    if rounds.empty:
        rounds = pd.Series([b.median() - a.median()])
    # One run, the protocols alternating: no drift between runs to allow for, compare's least
    # claimed change for a count (CLAIM_BEYOND) is the floor.
    said = verdict(Sample.of(a.tolist()), Sample.of(b.tolist()), higher_is_better=False, beyond=CLAIM_BEYOND)
    return Extra(
        float(rounds.median()),
        float(rounds.min()),
        float(rounds.max()),
        COST_WORDS.get(said, SAME_WITHIN_NOISE),
    )


def script_cost_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per step and protocol: µs a call median [min-max], commands, and both beyond echomq's."""
    rows = []
    for (step, protocol), mine in frame.groupby(["step", "protocol"], sort=False):
        usec = mine["server_us_per_call"].astype(float)
        base = frame[(frame["step"] == step) & (frame["protocol"] == BASE)]
        own = protocol != BASE and not base.empty
        commands = mine["commands"].iloc[0]
        rows.append({
            "step": step, "protocol": protocol, "reps": mine["rep"].nunique(),
            "redis µs per call, median [min-max]": f"{fmt(usec.median())} [{fmt(usec.min())}-"
            f"{fmt(usec.max())}]",
            f"µs beyond {BASE}, median [min-max]": extra_cost(base, mine).text() if own else "",
            "commands per call": commands_text(commands),
            f"commands beyond {BASE}": _beyond(base["commands"].iloc[0], commands) if own else "",
        })  # fmt: skip
    return pd.DataFrame(rows)


def script_cost_lines(table: pd.DataFrame) -> list[str]:
    """A line a protocol's hot-path step: its extra µs a job with range and verdict, never bare."""
    lines = []
    column = f"µs beyond {BASE}, median [min-max]"
    for protocol in [p for p in table["protocol"].unique() if p != BASE]:
        mine = table[(table["protocol"] == protocol) & table["step"].isin(HOT_STEPS)]
        for step, extra, beyond in mine[["step", column, f"commands beyond {BASE}"]].itertuples(index=False):
            if extra:
                lines.append(f"- **{protocol}**, {step}: Redis µs a job beyond {BASE}: {extra}.")
                lines.append(f"  Its commands beyond {BASE}: {beyond}.")
    return lines


def script_cost_section(data: RunData) -> list[str]:
    if (frame := data.frame("script_cost")) is None:
        return []
    lines = ["### The hot path's script cost: each protocol's scripts alone", ""]
    lines += [
        "Each step of a worker runs alone on a small queue, the protocols taking turns (A B A B). "
        "The table gives Redis's own µs inside its EVALSHAs (INFO commandstats); a cycle is one job. "
        "It lists every command the step runs, those inside the scripts too. "
        "There is no load and no network: this is the script cost of a protocol's extra writes, not "
        "a throughput. "
        "Beyond echomq is the median of the rounds' differences [min-max]. "
        '"More" or "less" only where compare\'s rules find a change beyond 5%. '
        "Else it is the same within noise.",
        "",
    ]
    lines += contended_note(frame, "repetition(s)")
    table = script_cost_table(frame)
    lines += script_cost_lines(table)
    lines += ["", markdown_table(table), ""]
    return lines
