"""`python -m bench run`: every stage of a profile against one server, into one run folder."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from bench.errors import BenchError
from bench.harness.context import RunContext
from bench.harness.profile import STAGES, Profile, load_profile
from bench.harness.progress import Progress, StagePlan
from bench.harness.run_folder import Stage, add_quiet_machine, mark_complete, open_run
from bench.results.files import RESULTS_DIR
from bench.results.stages import BY_ID


def report_stage(ctx: RunContext) -> None:
    """The run's last stage: report.md. The run is marked complete first, so the report says so
    (a report that fails marks it incomplete again); here, so the report never imports the harness."""
    from bench.report.render import write_report  # pandas and matplotlib only when reporting

    mark_complete(ctx.run_dir)
    report = write_report(ctx.run_dir)
    ctx.progress.step(f"wrote {report}")


REPORT_SECONDS = 15.0  # the report's plots, for the run's ETA


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="echomq-bench run", description=__doc__)
    parser.add_argument("--profile", default="default", help="profiles/<name>.conf, or a path")
    parser.add_argument(
        "--stages",
        default=None,
        help=f"comma-separated, from {', '.join(STAGES)} (default: the profile's)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders go")
    add_quiet_machine(parser)
    parser.add_argument(
        "--skip-memory-check",
        action="store_true",
        help="start even when the run's estimated memory need exceeds the server's room "
        "(the estimate assumes 20,000 jobs/s for closed-loop producers)",
    )
    return parser.parse_args(argv)


def execute(
    profile: Profile,
    stages: Sequence[str],
    results_root: Path,
    quiet_machine: bool = False,
    memory_check: bool = True,
) -> int:
    """Run ``stages`` of ``profile`` into one new run folder; every stage is checked first."""
    for stage in stages:
        if stage not in STAGES:
            raise BenchError(f"unknown stage {stage!r}; use some of {', '.join(STAGES)}")
    # Everything is checked before the server starts and the folder is made.
    # In the suite's order, whatever the order given: the report comes last, after what it reports.
    ordered = sorted(dict.fromkeys(stages), key=STAGES.index)
    # each stage's module, imported on demand: pyperf, Locust and the rest load only when needed
    modules = {s: cast(Stage, importlib.import_module(BY_ID[s].module)) for s in ordered if s != "report"}
    for module in modules.values():  # every stage, so a bad key of the last fails the run at once
        module.check_profile(profile)
    runners = {s: modules[s].run_stage if s in modules else report_stage for s in ordered}
    plans = [  # the seconds each point should take, for the run's ETA
        StagePlan(s, tuple(modules[s].point_seconds(profile)) if s in modules else (REPORT_SECONDS,))
        for s in ordered
    ]
    progress = Progress(plans)
    with open_run(profile, stages, results_root, (), progress, quiet_machine, memory_check) as run:
        for stage, runner in runners.items():
            progress.stage = stage
            progress("starting")
            run.stage_started(stage)
            runner(run.ctx)
            progress.done()
            run.stage_done(stage)
    print(f"results: {run.ctx.run_dir}")
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    profile = load_profile(args.profile)
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip()) if args.stages else profile.stages
    return execute(
        profile,
        stages,
        args.results,
        quiet_machine=args.quiet_machine,
        memory_check=not args.skip_memory_check,
    )
