"""Redis's cost in instructions (instructions.csv) under callgrind, beside the script cost's µs."""

from __future__ import annotations

import pandas as pd

from bench.report.load import RunData
from bench.report.markdown import figure, fmt, markdown_table
from bench.report.plots.instructions import PART_ORDER, SERVER_STEPS, instruction_parts

# The script cost's steps (script_cost.csv) as the instructions stage names the same calls.
SCRIPT_COST_STEPS = {
    "fused cycle": "fused cycle",
    "two-call cycle": "two-call cycle",
    "extendLock": "extendLock",
    "moveStalledJobsToWait (100 active, healthy)": "healthy sweep (100 active)",
}
ABOUT = (
    "Instructions Redis executed, counted by valgrind's callgrind on a redis-server of the stage's own: "
    "inside command execution (Redis's call(): the scripts and the commands they run) and for the whole "
    "request (its read, parse, run and reply). A count, not a time: steal and a busy neighbour cannot "
    "move it, so compare judges it to 1%. The client, the network and the kernel are outside both. "
    "The command table's lookups are left out (Redis seeds that table at random as it starts). "
    "2N vs N: the count per unit over 2N calls against over N, within 0.5% for a cost per call at "
    "the state the count began at. Redis µs: the script cost's timed median, where the run has it."
)


def state_about(data: RunData) -> str:
    """The queue state a run's protocols' steps were counted at (meta.json's instructions.state)."""
    state = data.meta.instructions.state if data.meta.instructions is not None else {}
    if not state:
        return "Each protocol's steps began on an empty queue (a run from before the stated state)."
    return (
        f"Each protocol's steps began at one queue state: {state['wait']:,} waiting, {state['active']:,} "
        f"active, {state['completed']:,} completed, the events stream at {state['events']:,} entries, "
        f"ids past {state['last_id']:,}, and {state['other_keys']:,} other keys; each step ran "
        f"{state['lead_calls']:,} calls before its counted ones (bench/protocol/counted.py)."
    )


def timed_us(data: RunData) -> dict[tuple[str, str], float]:
    """(protocol, instructions step) -> the script cost's median Redis µs a call, where measured."""
    if (frame := data.frame("script_cost")) is None:
        return {}
    medians = frame.groupby(["protocol", "step"])["server_us_per_call"].median()
    return {
        (str(protocol), step): float(medians[(protocol, timed)])
        for protocol in frame["protocol"].unique()
        for step, timed in SCRIPT_COST_STEPS.items()
        if (protocol, timed) in medians.index
    }


def instructions_table(data: RunData) -> pd.DataFrame | None:
    """A step a row: its two counts per unit, how linear, and the timed µs beside them."""
    if (frame := data.frame("instructions")) is None:
        return None
    timed = timed_us(data)
    rows = []
    for row in frame.to_dict("records"):
        size = int(row["active_size"]) if row["active_size"] == row["active_size"] else 0
        step = f"{row['step']} ({size:,} active)" if size else str(row["step"])
        us = timed.get((str(row["protocol"]), str(row["step"])))
        linear = row["instructions_2n_diff_pct"]
        rows.append({
            **({"server": row["server"]} if servers(frame) else {}),
            "protocol": row["protocol"], "step": step, "per": row["unit"],
            "instructions in command": fmt(round(float(row["instructions_per_call"]))),
            "instructions, whole server": fmt(round(float(row["server_instructions_per_call"]))),
            "2N vs N": "" if pd.isna(linear) else f"{linear:+.2f}%",
            "Redis µs (timed)": "" if us is None else fmt(us),
        })  # fmt: skip
    return pd.DataFrame(rows)


COMPLETED_ABOUT = (
    "A job's instructions inside command execution against the completed set's size as its phases "
    "began, the rest of the state as above (the phases' own finishes add to the set as they run); "
    "beside each, how far it is from the count at the stated state's size."
)


def completed_table(data: RunData) -> pd.DataFrame | None:
    """A protocol's job a row, its count at each completed set size a column (instructions_completed.csv)."""
    frame = data.frames.get("instructions_completed")
    stated = data.meta.instructions.state.get("completed") if data.meta.instructions else None
    if frame is None or frame.empty or stated is None:
        return None
    by_job: dict[tuple[str, str, str], dict[int, float]] = {}
    for row in frame.fillna({"server": ""}).to_dict("records"):
        job = (str(row["server"]), str(row["protocol"]), str(row["step"]))
        by_job.setdefault(job, {})[int(row["completed_size"])] = float(row["instructions_per_call"])
    rows = []
    for (server, protocol, step), at in by_job.items():
        base = at.get(stated)
        cells = {
            f"{size:,} completed": fmt(round(n))
            + ("" if base is None or size == stated else f" ({n / base - 1:+.1%})")
            for size, n in sorted(at.items())
        }
        rows.append(
            {**({"server": server} if servers(frame) else {}), "protocol": protocol, "job": step, **cells}
        )
    return pd.DataFrame(rows)


JOBS = ("fused cycle", "two-call cycle")
UNNAMED = "unnamed (no symbols)"
LUA = "Lua interpreter"
COMMANDS = "command bodies"
UNNAMED_NOTE_PCT = 5.0  # an unnamed share above this is said, with how to get a server with symbols


def servers(frame: pd.DataFrame) -> list[str]:
    """The servers a run counted side by side (servers), in its order; none: one."""
    if "server" not in frame.columns:
        return []
    return [str(s) for s in frame["server"].fillna("").unique() if str(s)]


def parts_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A part a row, a protocol's fused and two-call job a column: instructions a job (share)."""
    several = servers(frame)
    jobs = frame[frame["step"].isin(JOBS[:1] if several else JOBS)].copy()  # a column a server: fused
    jobs["column"] = jobs["protocol"] + " " + jobs["step"].str.replace(" cycle", "")
    if several:
        jobs["column"] = jobs["server"] + ": " + jobs["column"]
    table = jobs.pivot_table(
        index="part", columns="column", values="server_instructions_per_call", aggfunc="sum", sort=False
    ).fillna(0.0)
    table = table.reindex(
        [p for p in PART_ORDER if p in table.index] + sorted(set(table.index) - set(PART_ORDER))
    )
    shown = pd.DataFrame(index=table.index)
    for column in table.columns:
        whole = float(table[column].sum())
        shown[column] = [f"{fmt(round(v))} ({v / whole * 100:.1f}%)" for v in table[column]]
    shown.loc["whole job"] = [fmt(round(float(table[c].sum()))) for c in table.columns]
    return shown.reset_index().rename(columns={"part": "part of Redis"})


def servers_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A job's and its add's whole-server instructions, a server a column, each against the first."""
    names = servers(frame)
    rows = frame[frame["step"].isin(SERVER_STEPS)]
    table = rows.pivot_table(
        index=["protocol", "step"], columns="server", values="server_instructions_per_call", sort=False
    )[names]
    shown = table.map(lambda v: fmt(round(v)))
    for name in names[1:]:
        shown[f"{name} / {names[0]}"] = (table[name] / table[names[0]]).map(lambda r: f"{r:.3f}")
    return shown.reset_index()


def parts_findings(frame: pd.DataFrame) -> list[str]:
    """What the breakdown says of a fused job, a protocol a line."""
    lines = []
    fused = frame[frame["step"] == "fused cycle"]
    by = ["server", "protocol"] if servers(frame) else ["protocol"]
    for key, rows in fused.groupby(by, sort=False):
        protocol = " on ".join(reversed([str(k) for k in key])) if isinstance(key, tuple) else str(key)
        whole = float(rows["server_instructions_per_call"].sum())
        share = rows.groupby("part")["server_instructions_per_call"].sum() / whole * 100  # as the table
        lua, unnamed = float(share.get(LUA, 0.0)), float(share.get(UNNAMED, 0.0))
        said = (
            f"- **{protocol}**, a fused job ({fmt(round(whole))} instructions): Lua's interpreter {lua:.1f}%"
        )
        if unnamed > UNNAMED_NOTE_PCT:
            said += f" in named functions, and {unnamed:.1f}% in unnamed ones, Lua's internals among them"
        commands = rows[rows["part"] == COMMANDS].sort_values("server_instructions_per_call")
        if not commands.empty:
            top = commands.iloc[-1]
            cost = fmt(round(float(top["server_instructions_per_call"])))
            said += f"; the costliest command body is {str(top['detail']).upper()}, {cost} a job"
        lines.append(said + ".")
    return lines


# The baselines that price one redis.call (bench/protocol/counted.py names them; a test holds them alike).
RETURN_ONE = "EVALSHA return 1"
TEN_CALLS, TEN = "EVALSHA 10 redis.call EXISTS", 10
EXISTS = "exists"


def call_price_findings(frame: pd.DataFrame) -> list[str]:
    """What one redis.call adds beyond its command on each server: ten EXISTS against none, a tenth."""
    lines = []
    by = ["server"] if servers(frame) else []
    groups = frame.groupby(by, sort=False) if by else [("", frame)]
    for server, rows in groups:
        ten, one = (rows[rows["step"] == step] for step in (TEN_CALLS, RETURN_ONE))
        if ten.empty or one.empty:
            continue
        ten_parts, one_parts = (s.groupby("part")["server_instructions_per_call"].sum() for s in (ten, one))
        added = ten_parts.sub(one_parts, fill_value=0.0) / TEN
        exists = ten[(ten["part"] == COMMANDS) & (ten["detail"] == EXISTS)]
        body = float(exists["server_instructions_per_call"].sum()) / TEN
        beyond = float(added.sum()) - body
        largest = added.drop(COMMANDS, errors="ignore").sort_values(ascending=False).head(3)
        where = ", ".join(f"{part} {fmt(round(float(v)))}" for part, v in largest.items())
        on = f" on {server[0] if isinstance(server, tuple) else server}" if by else ""
        lines.append(
            f"- **One redis.call**{on} adds {fmt(round(float(added.sum())))} instructions to a script call: "
            f"{fmt(round(body))} in the command's own body (EXISTS of a missing key), "
            f"{fmt(round(beyond))} beyond it; most in {where}."
        )
    return lines


def instructions_section(data: RunData) -> list[str]:
    if (table := instructions_table(data)) is None:
        about = data.meta.instructions
        if about is not None and about.skipped:
            return ["## Redis's cost in instructions", "", f"*Not counted: {about.skipped}.*", ""]
        return []
    lines = ["## Redis's cost in instructions", "", ABOUT, "", state_about(data), ""]
    frame = data.frames["instructions"]
    if servers(frame):
        lines += ["Each server counted, a job and its add (instructions of the whole server):", ""]
        lines += [markdown_table(servers_table(frame)), "", "Every step:", ""]
    lines += [markdown_table(table), ""]
    if (by_completed := completed_table(data)) is not None:
        lines += ["### A job against the completed set's size", "", COMPLETED_ABOUT, ""]
        lines += [markdown_table(by_completed), ""]
    if (parts := data.frame("instructions_parts")) is None:
        return lines
    findings = parts_findings(parts) + call_price_findings(parts)
    lines += ["### Where a job's instructions go", "", PARTS_ABOUT, "", *findings, ""]
    lines += [markdown_table(parts_table(parts)), ""]
    if float(parts.loc[parts["part"] == UNNAMED, "share_pct"].max()) > UNNAMED_NOTE_PCT:
        lines += [UNNAMED_ABOUT, ""]
    return lines + figure(instruction_parts(parts, data.path), "no step to draw")


PARTS_ABOUT = (
    "The whole server's count of a job, split by part of Redis: each function callgrind counted is put in "
    "one part by the rules in bench/stages/instructions/parts.py, and the parts add up to the count. "
    "Instructions a job, and the part's share of it."
)
UNNAMED_ABOUT = (
    "*Unnamed: this server binary carries no names for its static functions (a packaged, stripped "
    "build), so their share cannot be split; Lua's interpreter is among them. A server built from its "
    "sources keeps them: see docs/servers.md.*"
)
