"""The script-cost stage: Redis's own µs per call of each script, on a small queue.

Each protocol's hot-path steps run alone, each script in its own phase; INFO commandstats' EVALSHA
calls and µs before and after a phase give Redis's time inside the call, not the network's (deltas
only: the server's statistics are not reset). A second table counts the commands a phase runs a
call, the scripts' own included, so a protocol's extra writes show beside the µs.
"""

from __future__ import annotations

from bench.harness.context import RunContext
from bench.harness.overrides import SectionFlags
from bench.harness.profile import FinishFetchOptions, Profile
from bench.harness.terminal import fold
from bench.results.files import Ledger
from bench.results.script_cost import ScriptCostRow
from bench.stages.script_cost.rows import SCRIPT_COST_CALLS, SCRIPT_COST_S_PER_PROTOCOL, script_cost_rows
from bench.stages.script_cost.table import commands_table, table


def check_profile(profile: Profile) -> None:
    """Nothing of its own to check: it runs the profile's protocols, finish_fetch's repetitions."""


def point_seconds(profile: Profile) -> tuple[float, ...]:
    """One step: every protocol's phases, ``repetitions`` rounds."""
    return (SCRIPT_COST_S_PER_PROTOCOL * len(profile.protocols) * profile.finish_fetch.repetitions,)


def run_stage(ctx: RunContext) -> None:
    """Each protocol's scripts alone, protocols alternating, into script_cost.csv."""
    ctx.progress("script cost: each protocol's scripts alone, protocols alternating")
    measured, phases = script_cost_rows(ctx, ctx.profile.protocols, ctx.profile.finish_fetch.repetitions)
    Ledger(ctx.run_dir).put(ScriptCostRow, measured)  # its rows; it has no meta.json section
    ctx.progress.step(f"script cost measured: {ScriptCostRow.FILE}")
    ctx.progress.done()
    print(fold(table(phases, SCRIPT_COST_CALLS)))
    print(fold(commands_table(phases)))


FLAGS = SectionFlags(FinishFetchOptions, only=("repetitions",))  # the one key of another's it reads
ABOUT = "Redis's own µs a call of each script alone, on a small queue. Settings default to the profile's."
