"""The stages, listed once: the commands, the run's order, the stage modules, meta.json's sections,
the files the report loads and compare's keys derive from STAGES. A new stage is its folder
(bench/stages/<id>/, its contract in bench/results/<id>.py) and an entry here; its module is named
as a string, so results never imports a stage."""

from __future__ import annotations

from dataclasses import dataclass

from bench.results import bullmq_worker, finish_fetch, instructions, race, script_cost, sweep
from bench.results.rows import Row


@dataclass(frozen=True)
class ResultFile:
    """One CSV a stage writes: its row type, and its frame's name in the report (None: not loaded)."""

    frame: str | None
    row: type[Row]
    optional: bool = False  # written only when the profile asks: loaded when there, never "absent"
    windows: bool = True  # a row a measured window; not so a window's parts, nor a count under callgrind


@dataclass(frozen=True)
class Stage:
    id: str  # its folder, its meta.json section's key, the name --stages takes
    help: str  # its command's one line (`echomq-bench <id with dashes>` runs it alone)
    order: int  # its place in a run: a stage runs after those with a lower order
    files: tuple[ResultFile, ...]  # its CSVs, its point's main file first
    meta: type | None = None  # its meta.json section (a frozen dataclass), if it writes one

    @property
    def module(self) -> str:
        """Its stage.py, for importlib (check_profile, point_seconds, run_stage; main where it has one)."""
        return f"bench.stages.{self.id}.stage"


# In the report's order; ``order`` is the run's.
STAGES: tuple[Stage, ...] = (
    Stage(
        "finish_fetch", "finish-then-fetch alone (Locust)", 1,
        (ResultFile("finish_fetch", finish_fetch.FinishFetchRow),
         ResultFile("finish_fetch_shards", finish_fetch.FinishFetchShardRow, optional=True, windows=False),
         ResultFile(None, finish_fetch.FinishFetchQueueRow, optional=True),
         ResultFile("finish_fetch_servers", finish_fetch.FinishFetchServerRow, optional=True)),
        finish_fetch.FinishFetchMeta,
    ),
    Stage(
        "sweep", "the sweep-cost benchmark alone (pyperf)", 3,
        (ResultFile("sweep", sweep.SweepCostRow),
         ResultFile("sweep_hazard", sweep.SweepHazardRow, optional=True),
         ResultFile("sweep_control", sweep.SweepControlRow, optional=True)),
        sweep.SweepMeta,
    ),
    Stage("race", "the race audit alone", 4, (ResultFile("race", race.RaceRow),), race.RaceMeta),
    Stage(
        "bullmq_worker", "BullMQ's own workers alone", 5,
        (ResultFile("bullmq_worker", bullmq_worker.BullmqWorkerRow),), bullmq_worker.BullmqWorkerMeta,
    ),
    Stage(
        "script_cost", "Redis µs per call of each script, small queue", 2,
        (ResultFile("script_cost", script_cost.ScriptCostRow, optional=True),),
    ),
    Stage(
        "instructions", "instructions Redis runs a call and a job (callgrind)", 6,
        (ResultFile("instructions", instructions.InstructionsRow, optional=True, windows=False),
         ResultFile("instructions_parts", instructions.InstructionsPartRow, optional=True, windows=False),
         ResultFile("instructions_completed", instructions.InstructionsCompletedRow, optional=True,
                    windows=False)),
        instructions.InstructionsMeta,
    ),
)  # fmt: skip

RUN_ORDER: tuple[str, ...] = tuple(s.id for s in sorted(STAGES, key=lambda s: s.order))
BY_ID: dict[str, Stage] = {s.id: s for s in STAGES}
FILES: tuple[ResultFile, ...] = tuple(f for s in STAGES for f in s.files)
# the frames whose rows are measured windows: how quiet a run was is counted over these
WINDOW_FRAMES: frozenset[str] = frozenset(f.frame for f in FILES if f.frame and f.windows)
